// Package record is what flows through a pipeline: the Record (a prompt,
// later its completion and its training tokens), its JSON form, and the
// field names stages declare they need and produce.
package record

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/pipe-dev/pipe/pipeline/internal/ticket"
)

// Record is one unit of work flowing through the graph: a prompt, later its
// completion, later its tokens. Stages add parts; nothing removes them, so a
// record written at any point keeps everything needed to inspect it.
//
// A record is owned by one stage at a time. The engine clones it when a port
// fans out to several inputs, so a stage may modify the record it was given.
type Record struct {
	// ID is stable across runs: given by the input or a content hash. It is the
	// key of exactly-once accounting.
	ID string `json:"id"`
	// Messages is the conversation: the prompt turns, and after generation of
	// earlier turns (turns = "all") the generated assistant turns too.
	Messages []Message `json:"messages,omitempty"`
	// Tools are the conversation's tool schemas, the JSON array as given
	// (OpenAI's [{"type": "function", "function": {"name", "description",
	// "parameters"}}], or any other objects the chat template reads), key
	// order and number spelling kept: the template renders them as written.
	// Empty when the conversation declares none.
	Tools json.RawMessage `json:"tools,omitempty"`
	// Completion is the generated final assistant turn.
	Completion *Completion `json:"completion,omitempty"`
	// Tokens is the training row built by tokenize-and-mask.
	Tokens *Tokens `json:"tokens,omitempty"`
	// Reject says why a stage rejected the record; set only on rejected records.
	Reject *Rejection `json:"reject,omitempty"`
	// Failure says why a record could not be processed after every attempt.
	Failure *Failure `json:"failure,omitempty"`
	// Meta keeps the input's other fields, for traceability.
	Meta map[string]any `json:"meta,omitempty"`
	// Shard is set on the records a writer sends on its shards port: one
	// per committed shard file.
	Shard *ShardRef `json:"shard,omitempty"`

	// Ticket is the engine's: it tracks where the copies of this record
	// still have to be committed before its id counts as finished; shared
	// by clones. Its type is internal: stages cannot use it.
	Ticket *ticket.Ticket `json:"-"`
}

// Message is one conversation turn, with the fields of OpenAI's chat
// format that chat templates and SpecForge's loader read (parse.py
// ThinkingParser.standard_keys). A field the input has and Message does
// not is refused by the readers, never dropped.
type Message struct {
	Role string `json:"role"`
	// Content is the text; "" also stands for a null content (an
	// assistant turn that only calls tools), which templates and
	// SpecForge's _normalize_message read as "".
	Content string `json:"content"`
	// ReasoningContent is the thinking of an assistant turn, without markers.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the tools an assistant turn calls, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the id of the call a tool turn answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name is the tool's name on a tool turn (or a participant's name).
	Name string `json:"name,omitempty"`
}

// HasToolFields reports whether m has any of the tool-use fields.
func (m *Message) HasToolFields() bool {
	return len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Name != ""
}

// ToolCall is one call of an assistant turn, in OpenAI's form: {"id",
// "type": "function", "function": {"name", "arguments"}}. ID and Type are
// absent when the input gave none.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function a tool call names and its arguments.
type FunctionCall struct {
	Name string `json:"name"`
	// Arguments are as given: a JSON string (OpenAI's form: the arguments'
	// JSON as text) stays that string, an object (as many datasets and
	// chat templates take them) stays that object, key order and number
	// spelling kept.
	Arguments json.RawMessage `json:"arguments"`
}

// Completion is what a server generated for the final assistant turn, and
// everything needed to judge and reproduce it.
type Completion struct {
	Reasoning    string `json:"reasoning"`
	Answer       string `json:"answer"`
	FinishReason string `json:"finish_reason"` // "stop", "length", "abort", ...
	MatchedStop  any    `json:"matched_stop,omitempty"`
	// ToolCalls are the calls the answer makes, where the source gives
	// them apart from its text (a chat completion's message.tool_calls, a
	// conversation's final assistant turn).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`

	// PromptIDs and OutputIDs are the exact tokens the model saw and sampled
	// (native /generate with input_ids); empty on the chat API.
	PromptIDs []int `json:"prompt_ids,omitempty"`
	OutputIDs []int `json:"output_ids,omitempty"`

	// Speculative decoding figures, when the server reports them.
	SpecVerifyCt     int     `json:"spec_verify_ct,omitempty"`
	SpecAcceptLength float64 `json:"spec_accept_length,omitempty"`

	LatencySeconds float64 `json:"latency_s"`
	Server         string  `json:"server"`
	// ServerStart is which start of a server the run launched made it (1:
	// its first process): rows from a start a breaker later tripped on
	// can be found (completion.server_start in expressions).
	ServerStart int `json:"server_start,omitempty"`
	Attempts    int `json:"attempts"`
	// SystemPrompt is the system prompt sent, if any; recorded because
	// trainers must use the same one.
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Request is the exact request settings (API, model, sampling).
	Request map[string]any `json:"request,omitempty"`
}

// Tokens is a training row.
type Tokens struct {
	InputIDs      []int32  `json:"input_ids"`
	LossMask      LossMask `json:"loss_mask"`
	NumTokens     int      `json:"num_tokens"`
	NumLossTokens int      `json:"num_loss_tokens"`
	// Source is "ids" when built from the generation's own token ids, "text"
	// when from re-tokenizing the text.
	Source string `json:"source,omitempty"`
}

// Rejection is why a record was rejected: a stable reason code for counting
// and a detail for a human.
type Rejection struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// Failure is why a record could not be processed.
type Failure struct {
	Stage    string `json:"stage"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts,omitempty"`
}

// ShardRef names one committed shard file.
type ShardRef struct {
	Path string `json:"path"` // absolute path of the shard file
	Dir  string `json:"dir"`  // its shard directory, holding .pipe/manifest.json
	Name string `json:"name"` // e.g. "part-00000.parquet"

	Rows, Tokens, Bytes int64
	SHA256              string `json:"sha256"`
}

// Clone returns a deep copy of the parts stages modify in place.
func (r *Record) Clone() *Record {
	c := *r
	c.Messages = append([]Message(nil), r.Messages...)
	for i := range c.Messages {
		if m := &c.Messages[i]; m.ToolCalls != nil {
			m.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
		}
	}
	if r.Completion != nil {
		cc := *r.Completion
		if cc.ToolCalls != nil {
			cc.ToolCalls = append([]ToolCall(nil), cc.ToolCalls...)
		}
		c.Completion = &cc
	}
	if r.Tokens != nil {
		t := *r.Tokens
		c.Tokens = &t
	}
	if r.Reject != nil {
		x := *r.Reject
		c.Reject = &x
	}
	if r.Failure != nil {
		x := *r.Failure
		c.Failure = &x
	}
	if r.Meta != nil {
		c.Meta = make(map[string]any, len(r.Meta))
		for k, v := range r.Meta {
			c.Meta[k] = v
		}
	}
	return &c
}

// MetaConversationEnded says, in a record's meta, why generate with
// turns = "all" ended the conversation at its completion, before the
// given conversation's end ("new_call", "no_call", "call_differs",
// "bad_call": a regenerated turn whose tool calls the given results do
// not answer).
const MetaConversationEnded = "conversation_ended"

// Field names used by specs to declare what a stage needs and produces;
// `pipe check` verifies that every needed field is produced upstream.
const (
	FieldID         = "id"
	FieldMessages   = "messages"
	FieldCompletion = "completion"
	FieldOutputIDs  = "completion.output_ids"
	FieldTokens     = "tokens"
	FieldShard      = "shard"
)

// LossMask is one 0/1 per token. It is written to JSON as an array of numbers,
// not as the base64 string encoding/json uses for []uint8.
type LossMask []uint8

func (m LossMask) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2*len(m)+2)
	b = append(b, '[')
	for i, v := range m {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return append(b, ']'), nil
}

func (m *LossMask) UnmarshalJSON(data []byte) error {
	var ints []uint8
	if len(data) > 0 && data[0] == '"' { // tolerate base64 from older files
		var raw []byte
		if err := json.Unmarshal(data, &raw); err != nil {
			return err
		}
		*m = raw
		return nil
	}
	var nums []int
	if err := json.Unmarshal(data, &nums); err != nil {
		return err
	}
	ints = make([]uint8, len(nums))
	for i, n := range nums {
		if n != 0 && n != 1 {
			return fmt.Errorf("loss_mask value %d at %d: want 0 or 1", n, i)
		}
		ints[i] = uint8(n)
	}
	*m = ints
	return nil
}
