// Package trainrow writes records in the layouts trainers read as they are:
// SpecForge's pre-tokenized and raw-conversation JSONL routes. write-jsonl
// and pipe export share it, so a row is judged and encoded the same way in
// both.
//
// The rules are SpecForge's own (github.com/sgl-project/SpecForge):
//   - specforge/config/schema.py DataConfig: data.prompts_path takes
//     "already-tokenized JSONL records", data.train_data_path "raw
//     conversation JSON/JSONL"; exactly one of them.
//   - specforge/data/prompt_builder.py prepare_prompt_tasks: one file; its
//     first record decides the route — with input_ids and loss_mask it is
//     pre-tokenized (both or neither, else an error), without them it is
//     raw conversations. _prompt_from_record: both integer lists of one
//     length, not empty, loss_mask 0 or 1; cut to max_length; a row with
//     fewer than min_loss_tokens loss tokens after the cut is dropped
//     silently, and so is one the algorithm's loss_mask_filter refuses.
//   - specforge/algorithms/model_providers.py dflash_min_loss_tokens: 2 for
//     DFlash; specforge/algorithms/dflash/providers.py: loss_mask_filter =
//     has_consecutive_supervised_tokens (specforge/data/loss_mask.py), two
//     adjacent loss tokens. EAGLE3 takes one loss token
//     (algorithms/eagle3/providers.py one_loss_token).
//   - specforge/data/preprocessing.py build_eagle3_dataset: the raw route
//     needs a "conversations" column; it pops "id" and "tools" and passes
//     every other column as a keyword argument into the tokenizer's
//     apply_chat_template (preprocess_conversations **kwargs), so a
//     "messages" column breaks the render and must not be there.
//   - specforge/data/parse.py ThinkingParser: messages keep role, content,
//     reasoning_content, tool_calls, name, tool_call_id (standard_keys);
//     Parser._sanitize_message parses a tool_calls string as JSON and each
//     call's string arguments into an object.
//   - preprocessing.py build_eagle3_dataset: a "tools" column holding a
//     string is parsed as JSON (a list is taken as it is) and passed to
//     apply_chat_template(tools=...) for its row.
//
// The conversations layout writes a row's tools and a turn's tool_calls as
// JSON text, which SpecForge parses back (above): load_dataset("json")
// gives every row one Arrow type, so lists of objects would have their
// keys merged across rows (each tool schema, each call's object arguments
// getting the others' keys as nulls, which the template then renders) or
// fail to load where two rows disagree on a value's type. Text keeps each
// row's own.
package trainrow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// Layouts.
const (
	// Records is pipe's own record per line (id, messages, completion,
	// tokens, ...): what read-completions reads back.
	Records = "records"
	// SpecForge is {"id", "input_ids", "loss_mask"} per line: SpecForge's
	// pre-tokenized route (data.prompts_path).
	SpecForge = "specforge"
	// Conversations is {"id", "conversations": [...], "tools"} per line,
	// the final turn {"role": "assistant", "content", "reasoning_content"}
	// (and its "tool_calls"); "tools" only where the record has tools:
	// SpecForge's raw route (data.train_data_path), which renders it with
	// the model's chat template and the row's tools.
	Conversations = "conversations"
)

// Layouts lists the layouts, for settings and flags.
var Layouts = []string{Records, SpecForge, Conversations}

// Trainers whose loader rules Rules applies.
const (
	TrainerDFlash = "dflash" // also SpecForge's domino and dspark
	TrainerEAGLE3 = "eagle3"
)

// Rules are the trainer's limits a row is judged by, so that what it would
// cut or drop silently is cut or rejected here, with a reason.
type Rules struct {
	// MaxLength is SpecForge's data.max_length: longer rows are cut to it
	// (as SpecForge does) or rejected (TooLong "reject"). 0: no limit.
	MaxLength int
	// TooLong is "cut" (default) or "reject".
	TooLong string
	// Trainer is TrainerDFlash or TrainerEAGLE3 ("" is EAGLE3's rule).
	Trainer string
}

// Reasons a row is rejected for.
const (
	ReasonNoTokens       = "no_tokens"        // the specforge layout needs tokenize-and-mask's row
	ReasonBadTokens      = "bad_tokens"       // input_ids and loss_mask differ in length, or are empty
	ReasonNoCompletion   = "no_completion"    // the conversations layout needs a final assistant turn
	ReasonTooLong        = "too_long"         // longer than max_length, with too_long = "reject"
	ReasonFewLossTokens  = "few_loss_tokens"  // fewer loss tokens than the trainer needs
	ReasonNoAdjacentLoss = "no_adjacent_loss" // DFlash: no two adjacent loss tokens
	ReasonUnfinishedTurn = "unfinished_turn"  // conversations: cut at length short of max_length
	ReasonBadToolCalls   = "bad_tool_calls"   // conversations: tool calls that do not encode (arguments not JSON)
)

// Problem is why a row is not written: a reason code and a detail.
type Problem struct{ Reason, Detail string }

func (p *Problem) Error() string { return p.Reason + ": " + p.Detail }

// MinLossTokens is the loss tokens a row needs for the trainer.
func (r Rules) MinLossTokens() int {
	if r.Trainer == TrainerDFlash {
		return 2
	}
	return 1
}

// Encode is rec as one line of layout (without its newline), or the
// problem that keeps it out.
func Encode(layout string, r Rules, rec *record.Record) ([]byte, *Problem, error) {
	return AppendEncode(nil, layout, r, rec)
}

// AppendEncode is Encode appending the line to dst[:0] (its bytes are
// json.Marshal's): a writer that reuses dst makes no garbage per line.
func AppendEncode(dst []byte, layout string, r Rules, rec *record.Record) ([]byte, *Problem, error) {
	switch layout {
	case "", Records:
		line, err := appendJSON(dst, rec)
		return line, nil, err
	case SpecForge:
		if rec.Tokens == nil {
			return nil, &Problem{ReasonNoTokens, "the specforge layout takes tokenize-and-mask's rows (input_ids, loss_mask); this record has none"}, nil
		}
		ids, mask, prob := r.Judge(rec.Tokens)
		if prob != nil {
			return nil, prob, nil
		}
		line, err := appendJSON(dst, struct {
			ID       string          `json:"id"`
			InputIDs []int32         `json:"input_ids"`
			LossMask record.LossMask `json:"loss_mask"`
		}{rec.ID, ids, mask})
		return line, nil, err
	case Conversations:
		conv, prob := Conversation(rec)
		if prob != nil {
			return nil, prob, nil
		}
		if prob := r.unfinishedTurn(rec); prob != nil {
			return nil, prob, nil
		}
		if rec.Tokens != nil { // SpecForge tokenizes again; judge the row it will make
			if _, _, prob := r.Judge(rec.Tokens); prob != nil {
				return nil, prob, nil
			}
		}
		line, err := appendJSON(dst, struct {
			ID            string    `json:"id"`
			Conversations []Message `json:"conversations"`
			Tools         string    `json:"tools,omitempty"`
		}{rec.ID, conv, string(rec.Tools)})
		return line, nil, err
	}
	return nil, nil, fmt.Errorf("unknown layout %q (%s)", layout, strings.Join(Layouts, ", "))
}

// appendJSON is json.Marshal(v) in dst[:0] (record.AppendJSON: the
// token id lists written fast).
func appendJSON(dst []byte, v any) ([]byte, error) { return record.AppendJSON(dst[:0], v) }

// Judge applies the trainer's rules to a row: the ids and mask it trains
// on (cut to MaxLength), or why it would be dropped.
func (r Rules) Judge(t *record.Tokens) ([]int32, record.LossMask, *Problem) {
	ids, mask := t.InputIDs, t.LossMask
	if len(ids) != len(mask) || len(ids) == 0 {
		return nil, nil, &Problem{ReasonBadTokens, fmt.Sprintf("%d input_ids and %d loss_mask values (SpecForge wants the same number, not 0)", len(ids), len(mask))}
	}
	if r.MaxLength > 0 && len(ids) > r.MaxLength {
		if r.TooLong == "reject" {
			return nil, nil, &Problem{ReasonTooLong, fmt.Sprintf("%d tokens, max_length is %d", len(ids), r.MaxLength)}
		}
		ids, mask = ids[:r.MaxLength], mask[:r.MaxLength]
	}
	n := 0
	adjacent := false
	for i, m := range mask {
		if m != 0 {
			n++
			if i > 0 && mask[i-1] != 0 {
				adjacent = true
			}
		}
	}
	cut := ""
	if len(ids) < len(t.InputIDs) {
		cut = fmt.Sprintf(" after the cut to max_length %d (of %d tokens)", r.MaxLength, len(t.InputIDs))
	}
	if min := r.MinLossTokens(); n < min {
		return nil, nil, &Problem{ReasonFewLossTokens, fmt.Sprintf("%d loss tokens%s; the trainer (%s) drops rows with fewer than %d", n, cut, r.trainer(), min)}
	}
	if r.Trainer == TrainerDFlash && !adjacent {
		return nil, nil, &Problem{ReasonNoAdjacentLoss, fmt.Sprintf("no two adjacent loss tokens%s; DFlash drops such rows", cut)}
	}
	return ids, mask, nil
}

// unfinishedTurn keeps out of the raw route a completion the length limit
// cut (meta.cut_at_length) whose row does not fill max_length: SpecForge
// renders every assistant turn finished (the template's </think> and
// <|im_end|>), and where the row is shorter than max_length its cut no
// longer drops those tokens the model never generated, so they would be
// trained. A row that fills max_length loses them to the cut.
func (r Rules) unfinishedTurn(rec *record.Record) *Problem {
	if rec.Meta[recordline.MetaCutAtLength] != true {
		return nil
	}
	n := 0
	if rec.Tokens != nil {
		n = len(rec.Tokens.InputIDs)
	}
	if r.MaxLength > 0 && n >= r.MaxLength {
		return nil
	}
	return &Problem{ReasonUnfinishedTurn, fmt.Sprintf("cut by the length limit at %d tokens, short of max_length %d: the raw-conversation route renders the turn finished and would train closing tokens the model never generated; the specforge layout (data.prompts_path) trains it as generated", n, r.MaxLength)}
}

func (r Rules) trainer() string {
	if r.Trainer == "" {
		return TrainerEAGLE3
	}
	return r.Trainer
}

// Message is one turn as SpecForge's ThinkingParser keeps it.
type Message struct {
	Role             string  `json:"role"`
	Content          string  `json:"content"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
	// ToolCalls is the turn's calls as JSON text (see the package doc).
	ToolCalls  string `json:"tool_calls,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// callsText is calls as JSON text; "" for none.
func callsText(calls []record.ToolCall) (string, error) {
	if len(calls) == 0 {
		return "", nil
	}
	b, err := json.Marshal(calls)
	return string(b), err
}

// Conversation is the record's conversation as the model saw and answered
// it: the system prompt generate added (if the messages have none), the
// prompt turns with their tool fields, and the completion as the final
// assistant turn with its reasoning and tool calls. Without a completion,
// messages ending in an assistant turn are taken as they are.
func Conversation(rec *record.Record) ([]Message, *Problem) {
	var out []Message
	c := rec.Completion
	if c != nil && c.SystemPrompt != "" && (len(rec.Messages) == 0 || rec.Messages[0].Role != "system") {
		out = append(out, Message{Role: "system", Content: c.SystemPrompt})
	}
	for _, m := range rec.Messages {
		msg := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		if m.ReasoningContent != "" {
			msg.ReasoningContent = &m.ReasoningContent
		}
		var err error
		if msg.ToolCalls, err = callsText(m.ToolCalls); err != nil {
			return nil, &Problem{ReasonBadToolCalls, fmt.Sprintf("turn %d: %v", len(out)+1, err)}
		}
		out = append(out, msg)
	}
	switch {
	case c != nil:
		reasoning := c.Reasoning
		calls, err := callsText(c.ToolCalls)
		if err != nil {
			return nil, &Problem{ReasonBadToolCalls, fmt.Sprintf("the completion: %v", err)}
		}
		out = append(out, Message{Role: "assistant", Content: c.Answer, ReasoningContent: &reasoning, ToolCalls: calls})
	case len(out) == 0 || out[len(out)-1].Role != "assistant":
		return nil, &Problem{ReasonNoCompletion, "no completion and no final assistant turn: nothing to train on"}
	}
	return out, nil
}
