package stages

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/internal/termsafe"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "tokenize-and-mask",
		Summary: "build training rows: input_ids and the assistant loss_mask, from the generation's own ids or the model's chat template",
		Description: `Turns a conversation and its completion into a training row:
tokens.input_ids, tokens.loss_mask, num_tokens and num_loss_tokens.
Messages and completion stay on the record. Where each assistant turn lies
comes from rendering the conversation message by message. The messages
before a turn are rendered with the generation prompt and compared with
the conversation holding the turn. Marker strings are never searched for.
So text a user or system prompt wrote is never trained on, whatever
special tokens it contains. mask chooses the tokens:

  specforge  SpecForge's labelling for the template's family. A template
             that forces thinking trains the final turn from after the
             generation prompt through "<|im_end|>\n". Such a template's
             generation prompt ends in "<think>\n": Qwen3.5/3.6,
             Qwen3-Thinking-2507, SpecForge's "qwen3.5". Earlier turns,
             rendered without "<think>", get none. A hybrid template (Qwen3;
             SpecForge's "qwen3-thinking"/"qwen3-instruct") trains every
             assistant turn. It trains from after "<|im_start|>assistant\n"
             (and the empty think block of thinking off) through
             "<|im_end|>\n".
  assistant  every assistant turn, the same way
  last_turn  the last assistant turn only
  generated  exactly the tokens the model sampled: the last turn through
             its <|im_end|>, not the template's "\n" after it

The run log says at start whether the template forces thinking, and which
labelling is used. Each row records it in meta.loss_mask_convention.

source chooses one of two ways to build a row:

  ids   the completion's prompt_ids, then its output_ids, then the template's
        closing "\n". These are exactly the tokens the model saw and
        sampled (native /generate with input_ids). No re-tokenization.
  text  render the conversation with the model's own chat template
        (add_generation_prompt false, the reply's reasoning in the last
        turn). Encode the whole text once without adding special tokens.
        Take the mask from token offsets in that text.

source = "auto" uses ids when the completion has them, else text. With
compare_text, every ids row is also built from text. Rows where
re-tokenizing would have given different ids are counted in the summary.

system_prompt, when set, is the system prompt of every row ("" for none).
Unset, each row keeps the one generation used. The prompt used is recorded
in meta.train_system_prompt. A row whose system prompt differs from
generation's cannot use the generation's ids. It is built from text.

validate-thinking may keep a completion though the length limit cut it
(meta.cut_at_length), as its row fills the trainer's max_length. Such a
completion has no end of turn. Its row ends at its last generated token,
with no closing "<|im_end|>\n", and is cut to max_length.

Rejections:

  too_long             more than max_length tokens, with on_too_long = "reject"
  too_few_loss_tokens  no run of min_adjacent_loss_tokens loss tokens
  no_output_ids        source = "ids", and the completion has no output ids
  bad_prompt_ids       prompt ids that do not form a ChatML turn
  unterminated_output  output ids that do not end a ChatML turn
  ids_text_mismatch    output ids that do not decode to the completion's
                       thinking and answer: another tokenizer than the server's
  render_failed        the chat template cannot render the conversation
  no_completion        the record has no completion`,
		Outputs:  []string{"out", pipeline.RejectedPort},
		Needs:    []string{record.FieldMessages, record.FieldCompletion},
		Produces: []string{record.FieldTokens},
		Fields: pipeline.FieldsFor(func(c *tokenizeAndMaskConfig) (needs, produces []string) {
			needs = []string{record.FieldMessages, record.FieldCompletion}
			if c.Source == "ids" {
				needs = append(needs, record.FieldOutputIDs)
			}
			return needs, []string{record.FieldTokens}
		}),
		KeySettings: pipeline.SettingsFor(func(cfg *tokenizeAndMaskConfig) string {
			s := "mask " + cfg.Mask + ", source " + cfg.Source
			if cfg.MaxLength > 0 {
				s += fmt.Sprintf(", max %d (%s)", cfg.MaxLength, cfg.OnTooLong)
			}
			return s
		}),
		Example: `[[stage]]
id   = "completions"
kind = "read-completions"
path = "completions.jsonl"

[[stage]]
id          = "tok"
kind        = "tokenize-and-mask"
input       = "completions"
tokenizer   = "models/qwen3"
mask        = "assistant"
max_length  = 8192
on_too_long = "reject"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "tok"
path  = "out/rows.jsonl"
`,
		New: pipeline.NewProcessor(func(c *tokenizeAndMaskConfig) (pipeline.Processor, error) { return newTokenizeAndMask(c), nil }),
	})
}

// Reason codes of tokenize-and-mask.
const (
	ReasonTooLong            = "too_long"
	ReasonTooFewLossTokens   = "too_few_loss_tokens"
	ReasonNoOutputIDs        = "no_output_ids"
	ReasonBadPromptIDs       = "bad_prompt_ids"
	ReasonUnterminatedOutput = "unterminated_output"
	ReasonRenderFailed       = "render_failed"
)

// tokenizeAndMaskConfig configures tokenize-and-mask.
type tokenizeAndMaskConfig struct {
	// Tokenizer is the model directory. Required.
	Tokenizer string `toml:"tokenizer" required:"true" path:"indir" contains:"tokenizer.json" doc:"Model directory with tokenizer.json and the chat template (tokenizer_config.json or chat_template.jinja)."`
	// Template is "" (the model's own) or "chatml".
	Template string `toml:"template" default:"" enum:"|chatml" doc:"Chat template: \"\" for the model's own, or \"chatml\"."`
	Mask     string `toml:"mask" default:"specforge" enum:"specforge|assistant|last_turn|generated" doc:"Which tokens carry loss. \"specforge\": SpecForge's labelling for the template. \"assistant\": every assistant turn. \"last_turn\": the last turn. \"generated\": exactly the generated tokens."`
	// SystemPrompt, when set, is every row's system prompt ("" for none).
	SystemPrompt *string `toml:"system_prompt" doc:"System prompt of every row; \"\" means none. Unset keeps the one generation used."`
	// MaxLength is the most tokens a row may have; 0 is no limit.
	MaxLength int `toml:"max_length" default:"0" min:"0" trainer:"max_length" doc:"Most tokens per row, read from [trainer] max_length. 0: no limit."`
	// OnTooLong is "truncate" (cut to max_length) or "reject"; unset,
	// "truncate" with [trainer] and "reject" without (TrainerDefaults).
	OnTooLong string `toml:"on_too_long" default:"" enum:"|reject|truncate" doc:"What a row longer than max_length does. \"truncate\" cuts it, keeping its head as the trainer does. \"reject\" refuses it as too_long. Unset: \"truncate\" with [trainer], \"reject\" without."`
	// MinAdjacentLossTokens: a row needs a run of at least this many loss
	// tokens (block-parallel drafters need 2).
	MinAdjacentLossTokens int `toml:"min_adjacent_loss_tokens" default:"2" min:"1" doc:"Reject rows with no run of this many adjacent loss tokens."`
	// Source is "auto" (ids when present, else text), "ids" or "text".
	Source string `toml:"source" default:"auto" enum:"auto|ids|text" doc:"Build rows from the generation's \"ids\", from the \"text\", or \"auto\": ids when present, else text."`
	// CompareText also builds each ids row from text and counts
	// disagreements.
	CompareText bool `toml:"compare_text" default:"true" doc:"Also re-tokenize ids rows, and count rows whose ids would differ."`
	// ChatTemplate is the trainer's name of the chat template, checked
	// against the model's.
	ChatTemplate string `toml:"chat_template" default:"" trainer:"chat_template" doc:"SpecForge's name of the chat template, read from [trainer] chat_template. It matters with mask = \"specforge\". A name under which SpecForge would label the conversations otherwise than these rows is refused. The error lists the names that agree."`
	// Workers is how many records are tokenized at once; 0 is one per CPU.
	Workers int `toml:"workers" op:"true" default:"0" min:"0" max:"1024" doc:"Records tokenized in parallel. 0 means one per CPU."`
}

type tokenizeAndMask struct {
	cfg  *tokenizeAndMaskConfig
	tok  *tokenize.Tokenizer
	tmpl *chat.Template
	log  io.Writer

	imStart, imEnd int // ids of <|im_start|> and <|im_end|>
	mode           tokenize.MaskMode
	forced         bool   // the template forces thinking
	convention     string // the labelling used, for meta.loss_mask_convention
	newline        []int

	fromIDs, fromText, differs, truncated atomic.Int64
	cutAtLength                           atomic.Int64
	textNoIDs, textSystemDiffers          atomic.Int64
	tokens, lossTokens                    atomic.Int64
	logged                                atomic.Int64
	systemMu                              sync.Mutex
	systemUsed                            map[string]int64 // rows by system prompt used
}

func newTokenizeAndMask(cfg *tokenizeAndMaskConfig) *tokenizeAndMask {
	return &tokenizeAndMask{cfg: cfg, log: io.Discard, systemUsed: map[string]int64{}}
}

// Open loads the tokenizer and the chat template.
func (s *tokenizeAndMask) Open(ctx context.Context, env *pipeline.Env) error {
	tok, err := sharedTokenizer(env, s.cfg.Tokenizer)
	if err != nil {
		return err
	}
	if env != nil && env.Log != nil {
		s.log = env.Log
	}
	warnServedModel(env, s.cfg.Tokenizer)
	return s.use(tok)
}

func (s *tokenizeAndMask) use(tok *tokenize.Tokenizer) error {
	tmpl, err := tok.Chat(s.cfg.Template)
	if err != nil {
		return err
	}
	s.tok, s.tmpl = tok, tmpl
	if s.mode, err = tokenize.ParseMaskMode(s.cfg.Mask); err != nil {
		return err
	}
	forced, gen, err := tmpl.ThinkingForced("<think>", "</think>")
	if err != nil {
		return fmt.Errorf("%s: rendering the generation prompt: %w", tok.Dir(), err)
	}
	s.forced = forced
	s.convention = s.mode.Convention(forced)
	how := "does not force thinking (a hybrid template: the model opens its own <think>)"
	if forced {
		how = "forces thinking (outputs start inside the reasoning)"
	}
	fmt.Fprintf(s.log, "tokenize-and-mask: the chat template %s: its generation prompt is %q; loss mask %s\n", how, gen, s.convention)
	var ok1, ok2 bool
	s.imStart, ok1 = tok.TokenID("<|im_start|>")
	s.imEnd, ok2 = tok.TokenID("<|im_end|>")
	if !ok1 || !ok2 {
		return fmt.Errorf("%s: the vocabulary has no <|im_start|> / <|im_end|>; tokenize-and-mask builds ChatML (Qwen) rows", tok.Dir())
	}
	s.newline = tok.Encode("\n")
	return nil
}

// Workers lets the engine tokenize several records at once.
func (s *tokenizeAndMask) Workers() int {
	if s.cfg.Workers > 0 {
		return s.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Process builds rec's training row and emits it, or rejects rec.
func (s *tokenizeAndMask) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	row, reason, detail := s.build(rec)
	if reason != "" {
		return out.Reject(rec, reason, detail)
	}
	rec.Tokens = row
	s.tokens.Add(int64(row.NumTokens))
	s.lossTokens.Add(int64(row.NumLossTokens))
	return out.Emit("out", rec)
}

// build returns rec's row, or a reason code and detail for rejecting it.
func (s *tokenizeAndMask) build(rec *record.Record) (row *record.Tokens, reason, detail string) {
	c := rec.Completion
	if c == nil {
		return nil, ReasonNoCompletion, "record has no completion"
	}
	turns, system, genSystem := s.systemPrompts(rec)
	s.noteSystem(rec, system)

	hasIDs := len(c.PromptIDs) > 0 && len(c.OutputIDs) > 0
	useIDs, reason, detail := s.chooseIDs(c, hasIDs, system != genSystem)
	if reason != "" {
		return nil, reason, detail
	}

	rec.Meta["loss_mask_convention"] = s.convention
	cut := rec.Meta[recordline.MetaCutAtLength] == true && c.FinishReason == "length"
	msgs := conversation(turns, system, c)
	opts := withTools(chat.Options{EnableThinking: enableThinking(c)}, rec)
	lastOnly := s.mode.LastOnly(s.forced)
	var text textRendering
	// The ids path needs the text's turns only for earlier assistant turns
	// that carry loss.
	if !useIDs || s.cfg.CompareText || (!lastOnly && hasEarlierReply(turns)) {
		var err error
		if text, err = s.renderText(msgs, opts, lastOnly); err != nil {
			return nil, ReasonRenderFailed, err.Error()
		}
	}
	if useIDs {
		row, reason, detail = s.idsRow(rec, msgs, opts, text, cut)
	} else {
		row, reason, detail = s.textRow(c, text, cut)
	}
	if reason != "" {
		return nil, reason, detail
	}
	if cut {
		s.cutAtLength.Add(1)
	}

	if reason, detail := s.fitLength(row); reason != "" {
		return nil, reason, detail
	}
	if run := longestRun(row.LossMask); run < s.cfg.MinAdjacentLossTokens {
		return nil, ReasonTooFewLossTokens, fmt.Sprintf("%d loss tokens, longest run %d, need a run of %d", row.NumLossTokens, run, s.cfg.MinAdjacentLossTokens)
	}
	return row, "", ""
}

// noteSystem records the system prompt rec's row is built with: in its
// meta, and in the stage's counts.
func (s *tokenizeAndMask) noteSystem(rec *record.Record, system string) {
	if rec.Meta == nil {
		rec.Meta = map[string]any{}
	}
	rec.Meta["train_system_prompt"] = system
	s.systemMu.Lock()
	s.systemUsed[system]++
	s.systemMu.Unlock()
}

// textRendering is a conversation rendered by the chat template: the
// text, its assistant turns, and the row its tokens make (nil when the
// conversation was not rendered).
type textRendering struct {
	text  string
	turns []chat.Turn
	row   *record.Tokens
}

// renderText renders msgs with the chat template and tokenizes the text,
// masked as the stage's mask says.
func (s *tokenizeAndMask) renderText(msgs []chat.Message, opts chat.Options, lastOnly bool) (textRendering, error) {
	text, all, err := s.tmpl.AssistantTurns(msgs, opts, lastOnly)
	if err != nil {
		return textRendering{}, err
	}
	ids, mask := s.tok.EncodeMasked(text, tokenize.MaskSpans(all, s.mode, s.forced))
	return textRendering{text: text, turns: all, row: newRow(ids, mask, "text")}, nil
}

// idsRow builds rec's row from the generation's ids, and compares it with
// the text's row when the text was rendered.
func (s *tokenizeAndMask) idsRow(rec *record.Record, msgs []chat.Message, opts chat.Options, text textRendering, cut bool) (*record.Tokens, string, string) {
	ids, mask, reason, detail := s.fromGenerationIDs(rec.Completion, msgs, opts, text.text, text.turns, cut)
	if reason != "" {
		return nil, reason, detail
	}
	row := newRow(ids, mask, "ids")
	s.fromIDs.Add(1)
	switch {
	case text.row != nil && cut:
		// The template closed the reply the model never finished, and
		// the limit may have cut a word the text's tokens would have
		// merged: compare up to the ids' last token, or every cut row
		// reads as a retokenizing mismatch.
		n := len(row.InputIDs) - 1
		s.compareRows(rec, tokensPrefix(row, n), tokensPrefix(text.row, n))
	case text.row != nil:
		s.compareRows(rec, row, text.row)
	}
	return row, "", ""
}

// textRow is the row of the rendered text; a completion cut at length
// ends it where the model's text ends.
func (s *tokenizeAndMask) textRow(c *record.Completion, text textRendering, cut bool) (*record.Tokens, string, string) {
	row := text.row
	s.fromText.Add(1)
	if cut {
		// The template closed the reply the model never finished:
		// the row ends where the model's text does in the rendering,
		// before any closing token of the template.
		end, ok := generatedEnd(text.text, text.turns, c)
		if !ok {
			return nil, ReasonRenderFailed, "a completion cut at length: its text's end is not in the rendered conversation"
		}
		truncateRow(row, len(s.tok.Encode(text.text[:end])))
	}
	return row, "", ""
}

// tokensPrefix is row's first n tokens (all of a shorter row), sharing
// its arrays.
func tokensPrefix(row *record.Tokens, n int) *record.Tokens {
	n = max(0, min(n, len(row.InputIDs)))
	return &record.Tokens{InputIDs: row.InputIDs[:n], LossMask: row.LossMask[:n]}
}

// compareRows notes where the row built from the ids differs from the
// one built from the text (compare_text), if it does.
func (s *tokenizeAndMask) compareRows(rec *record.Record, row, textRow *record.Tokens) {
	if at := firstDifference(row, textRow); at >= 0 {
		s.differs.Add(1)
		rec.Meta["retokenized_differs_at"] = at
		s.logDifference(rec.ID, row, textRow, at)
	}
}

// chooseIDs says whether the row is built from the generation's ids
// (hasIDs: the completion has prompt and output ids; systemDiffers: the
// row's system prompt is not the one generation used), counting why not,
// or rejects the record when source = "ids" and it has none.
func (s *tokenizeAndMask) chooseIDs(c *record.Completion, hasIDs, systemDiffers bool) (useIDs bool, reason, detail string) {
	useIDs = hasIDs && s.cfg.Source != "text"
	switch {
	case s.cfg.Source == "ids" && !hasIDs:
		return false, ReasonNoOutputIDs, fmt.Sprintf("source = \"ids\" but the completion has %d prompt ids and %d output ids", len(c.PromptIDs), len(c.OutputIDs))
	case useIDs && systemDiffers:
		// The ids carry generation's system prompt, not the configured one.
		useIDs = false
		s.textSystemDiffers.Add(1)
	case !useIDs && s.cfg.Source == "auto":
		s.textNoIDs.Add(1)
	}
	return useIDs, "", ""
}

// fitLength applies max_length to row: a longer row is rejected
// (on_too_long = "reject") or cut to it, its loss tokens counted again.
func (s *tokenizeAndMask) fitLength(row *record.Tokens) (reason, detail string) {
	if s.cfg.MaxLength <= 0 || row.NumTokens <= s.cfg.MaxLength {
		return "", ""
	}
	if s.cfg.OnTooLong == "reject" {
		return ReasonTooLong, fmt.Sprintf("%d tokens, max_length %d", row.NumTokens, s.cfg.MaxLength)
	}
	truncateRow(row, s.cfg.MaxLength)
	s.truncated.Add(1)
	return "", ""
}

// generatedEnd is where, in rendered (the conversation with the cut
// completion as its last turn, whose turns are turns), the model's text
// ends: the end of the answer, or of the reasoning when the limit cut it
// before any answer. The template may have trimmed the text's edges.
func generatedEnd(rendered string, turns []chat.Turn, c *record.Completion) (int, bool) {
	if len(turns) == 0 {
		return 0, false
	}
	last := turns[len(turns)-1]
	if strings.TrimSpace(c.Answer) != "" {
		return last.ContentEnd, true
	}
	tail := strings.TrimSpace(c.Reasoning)
	if i := len(tail) - 64; i > 0 {
		for i < len(tail) && !utf8.RuneStart(tail[i]) {
			i++
		}
		tail = tail[i:]
	}
	body := rendered[last.Body:last.ContentEnd]
	i := strings.LastIndex(body, tail)
	if tail == "" || i < 0 {
		return 0, false
	}
	return last.Body + i + len(tail), true
}

// truncateRow keeps row's first n tokens (all of a shorter row), its loss
// tokens counted again.
func truncateRow(row *record.Tokens, n int) {
	if n >= len(row.InputIDs) {
		return
	}
	row.InputIDs = row.InputIDs[:n]
	row.LossMask = row.LossMask[:n]
	row.NumTokens = n
	row.NumLossTokens = 0
	for _, m := range row.LossMask {
		row.NumLossTokens += int(m)
	}
}

// systemPrompts returns the prompt turns without a leading system turn, the
// system prompt of the row and the one generation used.
func (s *tokenizeAndMask) systemPrompts(rec *record.Record) (turns []record.Message, system, genSystem string) {
	turns = rec.Messages
	genSystem = rec.Completion.SystemPrompt
	if len(turns) > 0 && turns[0].Role == "system" {
		genSystem = turns[0].Content
		turns = turns[1:]
	}
	system = genSystem
	if s.cfg.SystemPrompt != nil {
		system = *s.cfg.SystemPrompt
	}
	return turns, system, genSystem
}

// conversation returns the messages to render: the system prompt if any,
// the prompt turns, then the completion as the last assistant turn.
func conversation(turns []record.Message, system string, c *record.Completion) []chat.Message {
	msgs := make([]chat.Message, 0, len(turns)+2)
	if system != "" {
		msgs = append(msgs, chat.NewMessage("system", system))
	}
	for _, m := range turns {
		msgs = append(msgs, chatMessage(m))
	}
	// The reply always has its reasoning_content, "" too, as before tools.
	reply := chat.NewReply("assistant", c.Answer, c.Reasoning)
	if len(c.ToolCalls) > 0 {
		reply = reply.With("tool_calls", c.ToolCalls)
	}
	return append(msgs, reply)
}

// hasEarlierReply says whether the prompt turns hold an assistant turn.
func hasEarlierReply(turns []record.Message) bool {
	for _, m := range turns {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
}

// enableThinking is the enable_thinking generation recorded, if any.
func enableThinking(c *record.Completion) *bool {
	if b, ok := requestThinking(c.Request); ok {
		return &b
	}
	return nil
}

// fromGenerationIDs builds the row from the ids the model saw and sampled:
// prompt ids, output ids (ending with <|im_end|>), then the template's
// closing "\n". The prompt ids must decode to the conversation before the
// completion rendered with the generation prompt, so the output begins
// exactly where the last turn's loss begins. Earlier turns' spans (turns of
// rendered, the text rendering, when the mode trains them) lie within the
// prompt, which is the same text.
func (s *tokenizeAndMask) fromGenerationIDs(c *record.Completion, msgs []chat.Message, opts chat.Options, rendered string, turns []chat.Turn, cut bool) (ids, mask []int, reason, detail string) {
	out := c.OutputIDs
	switch {
	case cut:
		// Cut by the length limit where the row is full: no end of turn
		// was sampled, and none is added.
	case out[len(out)-1] != s.imEnd:
		// SGLang includes the matched EOS in output_ids; an older server may
		// not, yet the stop says it was sampled.
		if c.FinishReason == "stop" && matchedID(c.MatchedStop) == s.imEnd {
			out = append(out[:len(out):len(out)], s.imEnd)
		} else {
			last, _ := s.tok.Token(out[len(out)-1])
			return nil, nil, ReasonUnterminatedOutput, fmt.Sprintf("output ids end with %q (finish_reason %q), not <|im_end|>", last, c.FinishReason)
		}
	}
	ids = make([]int, 0, len(c.PromptIDs)+len(out)+len(s.newline))
	ids = append(ids, c.PromptIDs...)
	ids = append(ids, out...)
	if !cut {
		ids = append(ids, s.newline...)
	}

	// The text the ids spell, and each id's byte range in it: in context,
	// not decoded alone (a Metaspace or Strip decoder treats the first
	// token apart, so a token's length alone can be off by its space).
	text, offsets := s.tok.DecodeOffsets(ids)
	promptEnd := offsets[len(c.PromptIDs)-1][1]
	outEnd := offsets[len(c.PromptIDs)+len(out)-1][1]
	var prompt string
	if n := len(turns); n > 0 && turns[n-1].Prompted {
		// The text path rendered it already: the conversation up to the
		// reply's body.
		prompt = rendered[:turns[n-1].Body]
	} else {
		gopts := opts
		gopts.AddGenerationPrompt = true
		var err error
		if prompt, err = s.tmpl.Render(msgs[:len(msgs)-1], gopts); err != nil {
			return nil, nil, ReasonRenderFailed, err.Error()
		}
	}
	if got := text[:promptEnd]; got != prompt {
		at := 0
		for at < min(len(got), len(prompt)) && got[at] == prompt[at] {
			at++
		}
		return nil, nil, ReasonBadPromptIDs, fmt.Sprintf("the prompt ids are not the conversation rendered with the generation prompt: they differ at byte %d (ids %q, template %q); rendered with another template, or without add_generation_prompt?",
			at, termsafe.Cut(got[at:], 40), termsafe.Cut(prompt[at:], 40))
	}
	output := text[promptEnd:]
	if part := idsMisspell(output, c); part != "" {
		return nil, nil, ReasonIDsTextMismatch, idsMismatchDetail(part, output)
	}
	var spans [][2]int
	if len(turns) > 1 && !s.mode.LastOnly(s.forced) {
		spans = tokenize.MaskSpans(turns[:len(turns)-1], s.mode, s.forced)
	}
	if s.mode == tokenize.MaskGenerated {
		spans = append(spans, [2]int{promptEnd, outEnd})
	} else {
		spans = append(spans, [2]int{promptEnd, len(text)})
	}
	return ids, maskFromOffsets(offsets, spans), "", ""
}

// maskFromOffsets marks each token whose first byte lies in one of spans,
// the rule of tokenize.EncodeMasked.
func maskFromOffsets(offsets [][2]int, spans [][2]int) []int {
	mask := make([]int, len(offsets))
	k := 0
	for i, off := range offsets {
		for k < len(spans) && off[0] >= spans[k][1] {
			k++
		}
		if k < len(spans) && off[0] >= spans[k][0] {
			mask[i] = 1
		}
	}
	return mask
}

// matchedID is matched_stop as a token id (JSON numbers arrive as float64), or -1.
func matchedID(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return -1
}

func newRow(ids, mask []int, source string) *record.Tokens {
	row := &record.Tokens{InputIDs: make([]int32, len(ids)), LossMask: make([]uint8, len(mask)), NumTokens: len(ids), Source: source}
	for i, id := range ids {
		row.InputIDs[i] = int32(id)
	}
	for i, m := range mask {
		row.LossMask[i] = uint8(m)
		row.NumLossTokens += m
	}
	return row
}

// firstDifference is the first index where the rows' ids or masks differ, or -1.
func firstDifference(a, b *record.Tokens) int {
	n := min(len(a.InputIDs), len(b.InputIDs))
	for i := 0; i < n; i++ {
		if a.InputIDs[i] != b.InputIDs[i] || a.LossMask[i] != b.LossMask[i] {
			return i
		}
	}
	if len(a.InputIDs) != len(b.InputIDs) {
		return n
	}
	return -1
}

func longestRun(mask []uint8) int {
	best, run := 0, 0
	for _, m := range mask {
		if m == 1 {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// logDifference writes the first few disagreements to the run log.
func (s *tokenizeAndMask) logDifference(id string, ids, text *record.Tokens, at int) {
	if s.logged.Add(1) > 5 {
		return
	}
	show := func(r *record.Tokens) string {
		lo, hi := max(0, at-3), min(len(r.InputIDs), at+4)
		var parts []string
		for _, x := range r.InputIDs[lo:hi] {
			parts = append(parts, fmt.Sprintf("%q", s.tok.Decode([]int{int(x)})))
		}
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(s.log, "tokenize-and-mask: record %s: re-tokenized text differs from the generation's ids at token %d: ids %s; text %s\n",
		id, at, show(ids), show(text))
}

// Report gives the row sources, disagreements and token totals.
func (s *tokenizeAndMask) Report() []figure.Figure {
	stats := []figure.Figure{
		figure.NewCounter("rows", s.fromIDs.Load(), "source", "ids"),
		figure.NewCounter("rows", s.fromText.Load(), "source", "text"),
		figure.NewCounter("text_rows_without_ids", s.textNoIDs.Load()),
		figure.NewCounter("text_rows_system_prompt_differs", s.textSystemDiffers.Load()),
		figure.NewCounter("tokens", s.tokens.Load()).In(figure.UnitTokens),
		figure.NewCounter("loss_tokens", s.lossTokens.Load()).In(figure.UnitTokens),
		// What the trainer trains on: the rows are within max_length.
		figure.NewCounter(figure.TrainedTokens, s.lossTokens.Load()).In(figure.UnitTokens),
	}
	if s.cfg.CompareText && s.fromIDs.Load() > 0 {
		stats = append(stats, figure.NewCounter("retokenized_text_differs", s.differs.Load()))
	}
	if s.cfg.MaxLength > 0 {
		stats = append(stats, figure.NewCounter("truncated_to_max_length", s.truncated.Load()))
	}
	s.systemMu.Lock()
	prompts := make([]string, 0, len(s.systemUsed))
	for p := range s.systemUsed {
		prompts = append(prompts, p)
	}
	sort.Slice(prompts, func(i, j int) bool { return s.systemUsed[prompts[i]] > s.systemUsed[prompts[j]] })
	for i, p := range prompts {
		if i == 3 {
			var others int64
			for _, q := range prompts[3:] {
				others += s.systemUsed[q]
			}
			stats = append(stats, figure.NewCounter("rows_by_system_prompt", others, "prompt", fmt.Sprintf("%d others", len(prompts)-3)))
			break
		}
		name := "none"
		if p != "" {
			name = fmt.Sprintf("%q", termsafe.Cut(p, 60))
		}
		stats = append(stats, figure.NewCounter("rows_by_system_prompt", s.systemUsed[p], "prompt", name))
	}
	s.systemMu.Unlock()
	return stats
}

// Validate refuses a tokenizer.json whose components pipe does not
// reproduce, and a trainer's template name that labels the rows otherwise.
func (c *tokenizeAndMaskConfig) Validate() []error {
	errs := checkTokenizer("tokenizer", c.Tokenizer)
	if c.ChatTemplate != "" && c.Mask == "specforge" && c.Tokenizer != "" {
		if err := checkTrainerTemplate(c.Tokenizer, c.Template, c.ChatTemplate); err != nil {
			errs = append(errs, &config.FieldError{Key: "chat_template", Msg: err.Error()})
		}
	}
	return errs
}

// TrainerDefaults: a row longer than the trainer's max_length is cut as
// the trainer cuts it (its head kept); without [trainer], max_length is a
// limit of the user's own, and a longer row is refused.
func (c *tokenizeAndMaskConfig) TrainerDefaults(declared bool) {
	if c.OnTooLong == "" {
		c.OnTooLong = "reject"
		if declared {
			c.OnTooLong = "truncate"
		}
	}
}

var (
	_ pipeline.Processor = (*tokenizeAndMask)(nil)
	_ pipeline.Parallel  = (*tokenizeAndMask)(nil)
	_ pipeline.Opener    = (*tokenizeAndMask)(nil)
	_ pipeline.Reporter  = (*tokenizeAndMask)(nil)
)
