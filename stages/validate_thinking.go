package stages

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "validate-thinking",
		Summary: "reject empty, truncated and malformed completions of reasoning models, with a reason code",
		Description: `Checks each completion and sends it to "accepted", or to "rejected" with a
reason code. The record keeps everything for inspection. The rules, in the
order they are checked; the first that matches is the reason:

  no_completion       the record has no completion
  ids_text_mismatch   the output ids do not decode to the thinking and answer
                      (another tokenizer than the server's; needs tokenizer)
  truncated           finish_reason is "length", and the row does not fill the
                      trainer's max_length (see below)
  aborted             finish_reason is "abort"
  think_unclosed      thinking on, and the output ids have no </think> (needs
                      tokenizer); with forced thinking also an output that
                      stopped inside the reasoning
  think_leaked        a think marker in the answer (or an earlier assistant turn)
  think_repeated      a think marker inside the thinking, or several in the
                      output ids (with forced thinking: any <think> in them)
  empty_thinking      thinking on, and the thinking is empty or whitespace
  empty_answer        the answer (or an earlier assistant turn) is empty or whitespace
  placeholder_answer  the trimmed answer equals one of placeholder_answers (case-insensitive)
  bad_tool_call       a tool call the model made is malformed or names no tool the
                      conversation declares (see below)
  thinking_too_short  thinking shorter than min_thinking_length
  answer_too_short    answer shorter than min_answer_length
  repetition          thinking or answer degenerates into a loop: more than
                      max_repetition of its repetition_ngram-grams of words repeat earlier ones

Forced thinking is a chat template whose generation prompt ends in
"<think>\n". generate records it in completion.request.thinking_forced;
else the tokenizer's own template tells. The output then starts inside the
reasoning. So it has no <think> of its own, and one cut short is
reasoning, never an answer.

Tool calls: on /generate the model's calls stay in the answer, as Qwen3
writes them. They are <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
blocks after the content. On the chat API with a tool-call parser they are
completion.tool_calls. bad_tool_call rejects:

  - a block that is not one JSON object with a string "name" and an
    "arguments" object. A string holding the arguments is refused: SGLang's
    parser would pass it on encoded twice.
  - a block not in that layout, which SGLang's parser does not see
  - an unclosed <tool_call>, or a </tool_call> that closes nothing
  - text after the calls, which SGLang's parser drops
  - a call whose name (function.name) is not among the record's tools
  - a call in a conversation that declares no tools
  - a call block in the thinking (<tool_call> followed by "{"). The server's
    tool-call parser reads only the answer, so such a call is never made.

A completion.tool_calls entry needs a declared name. Its arguments must be
an object or a string holding one. Names are not checked where a tool
schema has no name pipe can read. A completion cut at the trainer's length
may end inside a call. An answer that only calls tools (the chat API's
empty content) is neither empty nor too short. The detail names the call,
by its index and name, and what is wrong.

Cut at the trainer's length: this needs max_length (read from [trainer])
and length = "keep". A completion stopped by the length limit whose prompt
and output fill max_length is then accepted. It trains exactly the tokens a
finished one would. The trainer keeps the first max_length tokens of a row
(SpecForge prompt_builder.py _prompt_from_record). Such a completion is
counted as kept_at_length and marked meta.cut_at_length. The rules about
how an output ends do not apply to it: truncated, think_unclosed, an empty
answer after reasoning cut short, the minimum lengths. The other rules do.
One cut short of max_length is truncated. length = "reject" rejects every
cut completion.

Any rule is turned off by listing its code in disable. Lengths are in tokens
when tokenizer is set, else in characters. Rejections by reason are in the
run summary.

A second chance: a record rejected for a reason listed in second_chance
leaves by the "retry" port instead. Its completion is dropped, meta.attempt
counted up, and the reason added to meta.retried_after. A generate stage
reading STAGE.retry samples it again; give it another seed or temperature.
A judge of its own checks the new completion. Chain as many attempts as you
allow. The summary counts second_chances by reason. At each later judge it
counts the records recovered by attempt. pipe report counts them from the
rows.`,
		Outputs:         []string{"accepted", pipeline.RejectedPort, RetryPort},
		OptionalOutputs: []string{RetryPort},
		OutputsUsed:     secondChanceOutputs(func(c any) []string { return c.(*validateThinkingConfig).SecondChance }),
		Needs:           []string{record.FieldCompletion},
		Produces:        nil,
		KeySettings: pipeline.SettingsFor(func(cfg *validateThinkingConfig) string {
			s := "thinking " + cfg.Thinking
			if len(cfg.Disable) > 0 {
				s += ", off: " + strings.Join(cfg.Disable, ",")
			}
			if len(cfg.SecondChance) > 0 {
				s += ", second chance: " + strings.Join(cfg.SecondChance, ",")
			}
			return s
		}),
		Example: `[[stage]]
id   = "completions"
kind = "read-completions"
path = "completions.jsonl"

[[stage]]
id                = "check"
kind              = "validate-thinking"
input             = "completions"
thinking          = "on"
min_answer_length = 2
disable           = ["placeholder_answer"]

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "check.accepted"
path  = "out/good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "check.rejected"
path  = "out/rejected.jsonl"
`,
		New: pipeline.NewProcessor(func(c *validateThinkingConfig) (pipeline.Processor, error) { return newValidateThinking(c), nil }),
	})
}

// The reason codes of validate-thinking, in the order the rules are checked.
const (
	ReasonTruncated         = "truncated"
	ReasonAborted           = "aborted"
	ReasonThinkUnclosed     = "think_unclosed"
	ReasonThinkLeaked       = "think_leaked"
	ReasonThinkRepeated     = "think_repeated"
	ReasonEmptyThinking     = "empty_thinking"
	ReasonEmptyAnswer       = "empty_answer"
	ReasonPlaceholderAnswer = "placeholder_answer"
	ReasonBadToolCall       = "bad_tool_call"
	ReasonThinkingTooShort  = "thinking_too_short"
	ReasonAnswerTooShort    = "answer_too_short"
	ReasonRepetition        = "repetition"
)

var validateReasons = []string{
	ReasonNoCompletion, ReasonIDsTextMismatch, ReasonTruncated, ReasonAborted, ReasonThinkUnclosed, ReasonThinkLeaked,
	ReasonThinkRepeated, ReasonEmptyThinking, ReasonEmptyAnswer, ReasonPlaceholderAnswer, ReasonBadToolCall,
	ReasonThinkingTooShort, ReasonAnswerTooShort, ReasonRepetition,
}

// validateThinkingConfig configures validate-thinking.
type validateThinkingConfig struct {
	// Thinking says whether completions should think first. "auto" is
	// what the completion's request recorded (enable_thinking), and on when
	// it recorded nothing.
	Thinking string `toml:"thinking" default:"auto" enum:"auto|on|off" doc:"Whether completions must contain thinking: on, off, or auto. auto takes the request's enable_thinking, and is on when none is recorded."`
	// Disable lists reason codes whose rules are not applied.
	Disable []string `toml:"disable" doc:"Reason codes of rules to turn off, e.g. [\"repetition\"]."`
	// Tokenizer is a model directory; with it, lengths are counted in tokens
	// and the output ids are checked for think markers.
	Tokenizer string `toml:"tokenizer" path:"indir" contains:"tokenizer.json" doc:"Model directory (tokenizer.json). Lengths are then in tokens, and output ids are checked for think markers."`
	// MinAnswerLength and MinThinkingLength are in tokens with a tokenizer,
	// else in characters. 0 is off: empty ones are caught by empty_answer /
	// empty_thinking.
	MinAnswerLength   int `toml:"min_answer_length" default:"0" min:"0" doc:"Reject answers shorter than this: tokens with tokenizer, else characters. 0: off."`
	MinThinkingLength int `toml:"min_thinking_length" default:"0" min:"0" doc:"Reject thinking shorter than this: tokens with tokenizer, else characters. 0: off."`
	// RepetitionNgram is the n of the n-grams of words (CJK: characters)
	// compared by the repetition rule.
	RepetitionNgram int `toml:"repetition_ngram" default:"10" min:"2" max:"1000" doc:"N-gram length in words for the repetition rule."`
	// MaxRepetition is the largest allowed share of n-grams that repeat an
	// earlier one.
	MaxRepetition float64 `toml:"max_repetition" default:"0.5" min:"0" max:"1" doc:"Largest share of repeated n-grams allowed in thinking or answer."`
	// RepetitionMinWords: texts with fewer words are not checked for
	// repetition.
	RepetitionMinWords int `toml:"repetition_min_words" default:"100" min:"1" doc:"Texts with fewer words are not checked for repetition."`
	// PlaceholderAnswers are answers that mean "no answer", compared trimmed
	// and case-insensitively.
	PlaceholderAnswers []string `toml:"placeholder_answers" default:"...,…,N/A,TODO,TBD,null,undefined,placeholder,[placeholder],<placeholder>,[answer],<answer>" doc:"Answers rejected as placeholders, compared trimmed and case-insensitive."`
	// ThinkStart and ThinkEnd are the model's think markers.
	ThinkStart string `toml:"think_start" default:"<think>" doc:"The model's opening think marker."`
	ThinkEnd   string `toml:"think_end" default:"</think>" doc:"The model's closing think marker."`
	// MaxLength is the trainer's tokens per row ([trainer] max_length).
	MaxLength int `toml:"max_length" default:"0" min:"0" trainer:"max_length" doc:"The trainer's tokens per row, read from [trainer] max_length. A completion cut at the length limit whose row fills it is kept (see length). 0: every cut completion is truncated."`
	// Length is what a completion cut where its row fills max_length does.
	Length string `toml:"length" default:"keep" enum:"keep|reject" doc:"A completion cut by the length limit whose prompt and output fill max_length. \"keep\" keeps it, as the trainer would train it (kept_at_length). \"reject\" rejects it (truncated)."`
	// SecondChance lists the reasons whose records are sampled again.
	SecondChance []string `toml:"second_chance" op:"false" doc:"Reason codes whose records leave by the retry port for a new attempt, instead of being rejected. A generate stage with input = STAGE.retry takes them."`
}

// Validate checks the disable list and the markers.
func (c *validateThinkingConfig) Validate() []error {
	errs := checkSecondChance(c.SecondChance, validateReasons)
	for _, d := range c.Disable {
		if !slices.Contains(validateReasons, d) {
			errs = append(errs, &config.FieldError{Key: "disable", Msg: fmt.Sprintf("unknown reason code %q; codes: %s", d, strings.Join(validateReasons, ", "))})
		}
	}
	if c.ThinkStart == "" || c.ThinkEnd == "" {
		errs = append(errs, &config.FieldError{Key: "think_end", Msg: "think_start and think_end must not be empty"})
	}
	return append(errs, checkTokenizer("tokenizer", c.Tokenizer)...)
}

type validateThinking struct {
	cfg *validateThinkingConfig
	// early stops the run when a server's first completions all have ids
	// that do not spell their text (generate checks only where it has a
	// tokenizer), or when most of the first ones are rejected for being
	// cut at the length limit (generate_early.go).
	early        earlyWatch
	halt         func(error)
	id           string
	keptAtLength atomic.Int64
	off          map[string]bool
	placeholders map[string]bool
	tok          *tokenize.Tokenizer
	chances      *secondChances
	startID      int // -1 when unknown
	endID        int
	// forced: the tokenizer's own template forces thinking.
	forced bool
	// lastTools is the tool names of the last conversation whose calls
	// were checked: a dataset's conversations mostly share their tools.
	lastTools atomic.Pointer[toolNames]
}

// toolNames is the names a conversation's tools declare (declaredToolNames).
type toolNames struct {
	tools string
	names []string
	known bool
}

// declaredNames is declaredToolNames(tools), read once for a run of
// conversations with the same tools.
func (v *validateThinking) declaredNames(tools []byte) ([]string, bool) {
	if last := v.lastTools.Load(); last != nil && last.tools == string(tools) {
		return last.names, last.known
	}
	names, known := declaredToolNames(tools)
	v.lastTools.Store(&toolNames{tools: string(tools), names: names, known: known})
	return names, known
}

func newValidateThinking(cfg *validateThinkingConfig) *validateThinking {
	v := &validateThinking{cfg: cfg, off: map[string]bool{}, placeholders: map[string]bool{}, startID: -1, endID: -1,
		chances: newSecondChances(cfg.SecondChance)}
	for _, d := range cfg.Disable {
		v.off[d] = true
	}
	for _, p := range cfg.PlaceholderAnswers {
		v.placeholders[strings.ToLower(strings.TrimSpace(p))] = true
	}
	return v
}

// Open loads the tokenizer, if one is configured.
func (v *validateThinking) Open(ctx context.Context, env *pipeline.Env) error {
	v.halt, v.id = env.Halt, env.StageID
	if v.cfg.Tokenizer == "" {
		return nil
	}
	tok, err := sharedTokenizer(env, v.cfg.Tokenizer)
	if err != nil {
		return err
	}
	v.useTokenizer(tok)
	if tmpl, err := tok.Chat(""); err == nil {
		if v.forced, _, err = tmpl.ThinkingForced(v.cfg.ThinkStart, v.cfg.ThinkEnd); err != nil {
			return fmt.Errorf("%s: rendering the generation prompt: %w", tok.Dir(), err)
		}
	}
	return nil
}

func (v *validateThinking) useTokenizer(tok *tokenize.Tokenizer) {
	v.tok = tok
	if id, ok := tok.TokenID(v.cfg.ThinkStart); ok {
		v.startID = id
	}
	if id, ok := tok.TokenID(v.cfg.ThinkEnd); ok {
		v.endID = id
	}
}

// Process sends rec to "accepted" or rejects it with the first failing rule.
// The engine counts both, by reason; the stage counts only what it kept
// at the trainer's length (Report).
func (v *validateThinking) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	reason, detail := v.check(rec)
	if c := rec.Completion; c != nil && v.halt != nil {
		v.watchEarly(c, reason)
	}
	if reason == "" {
		if v.fillsRow(rec.Completion) {
			v.keptAtLength.Add(1)
			if rec.Meta == nil {
				rec.Meta = map[string]any{}
			}
			rec.Meta[recordline.MetaCutAtLength] = true
		}
		v.chances.accepted(rec)
		return out.Emit("accepted", rec)
	}
	return v.chances.reject(out, rec, reason, detail)
}

// fillsRow says whether c was cut by the length limit where its row fills
// the trainer's max_length, and is to be kept (length = "keep").
func (v *validateThinking) fillsRow(c *record.Completion) bool {
	if c == nil || c.FinishReason != "length" || v.cfg.MaxLength <= 0 || v.cfg.Length != "keep" {
		return false
	}
	if completionRowTokens(c) >= v.cfg.MaxLength {
		return true
	}
	// generate bounded the request by the row's room: the limit that cut
	// it is the row's end, even where the server counted the prompt
	// otherwise than pipe's rendering did (the chat API).
	room, bounded := requestInt(c.Request, RequestRowMaxLength)
	bound := max(requestIntOr0(c.Request, "max_new_tokens"), requestIntOr0(c.Request, "max_tokens"))
	return bounded && room == v.cfg.MaxLength && bound > 0 && c.CompletionTokens >= bound
}

// completionRowTokens is the tokens of the row a completion makes before
// the template closes it: its prompt and its output.
func completionRowTokens(c *record.Completion) int {
	prompt := c.PromptTokens
	if prompt == 0 {
		prompt = len(c.PromptIDs)
	}
	return prompt + c.CompletionTokens
}

// Report counts the completions kept though cut at the length limit.
func (v *validateThinking) Report() []figure.Figure {
	return append([]figure.Figure{figure.NewCounter(figure.KeptAtLength, v.keptAtLength.Load())}, v.chances.Report()...)
}

// check returns the reason code and detail of the first rule rec fails, or "".
// The rules run in a fixed order, in groups; a disabled rule (fail gives
// "") passes, and the next one is tried.
func (v *validateThinking) check(rec *record.Record) (reason, detail string) {
	c := rec.Completion
	if c == nil {
		return v.fail(ReasonNoCompletion, "record has no completion")
	}
	thinking, why := v.thinkingOn(c)
	forced := thinking && (v.forced || requestForced(c.Request))
	atLength := v.fillsRow(c)
	// Ids that do not spell the text are said as such before any rule
	// reads either: every thinking rule would be wrong about them.
	if r, d := v.idsRule(c); r != "" {
		return r, d
	}
	if !atLength {
		if r, d := v.finishRule(c); r != "" {
			return r, d
		}
	}
	if r, d := v.markerRules(c, thinking, forced, atLength, why); r != "" {
		return r, d
	}
	if r, d := v.contentRules(c, thinking, atLength, why); r != "" {
		return r, d
	}
	if r, d := v.toolCallRule(rec, atLength); r != "" {
		return r, d
	}
	if r, d := v.historyRules(rec); r != "" {
		return r, d
	}
	if !atLength {
		if r, d := v.lengthRules(c, thinking); r != "" {
			return r, d
		}
	}
	return v.repetitionRule(c, atLength)
}

// idsRule: the output ids, decoded, contain the answer and the thinking
// (only the first part that does not is tested against the rule).
func (v *validateThinking) idsRule(c *record.Completion) (string, string) {
	if len(c.OutputIDs) == 0 || v.tok == nil {
		return "", ""
	}
	out := v.tok.Decode(c.OutputIDs)
	if part := idsMisspell(out, c); part != "" {
		return v.fail(ReasonIDsTextMismatch, idsMismatchDetail(part, out))
	}
	return "", ""
}

// finishRule: the completion was neither cut at its length nor aborted.
func (v *validateThinking) finishRule(c *record.Completion) (string, string) {
	switch c.FinishReason {
	case "length":
		return v.fail(ReasonTruncated, fmt.Sprintf("finish_reason length after %d completion tokens", c.CompletionTokens))
	case "abort":
		return v.fail(ReasonAborted, "finish_reason abort")
	}
	return "", ""
}

// markerCounts counts the think markers in the output ids; -1, -1 when
// they are not known (no ids, or no end marker id).
func (v *validateThinking) markerCounts(c *record.Completion) (starts, ends int) {
	if len(c.OutputIDs) == 0 || v.endID < 0 {
		return -1, -1
	}
	for _, id := range c.OutputIDs {
		switch id {
		case v.startID:
			starts++
		case v.endID:
			ends++
		}
	}
	return starts, ends
}

// markerRules: the thinking is closed once, opened at most once (not at
// all when the prompt forced it open), and no marker is left in the text.
func (v *validateThinking) markerRules(c *record.Completion, thinking, forced, atLength bool, why string) (string, string) {
	starts, ends := v.markerCounts(c)
	if r, d := v.openCloseRules(c, thinking, forced, atLength, why, starts, ends); r != "" {
		return r, d
	}
	if r, d := v.markerTextRules(c); r != "" {
		return r, d
	}
	if starts > 1 || ends > 1 {
		return v.fail(ReasonThinkRepeated, fmt.Sprintf("output ids have %d %s and %d %s", starts, v.cfg.ThinkStart, ends, v.cfg.ThinkEnd))
	}
	return "", ""
}

// openCloseRules: with thinking on, the output closes it (in the ids, or,
// without ids, by an answer after the reasoning), and does not open it
// again when the prompt forced it open. starts and ends are markerCounts.
// An output cut where its row fills max_length (atLength) need not close
// it: the trainer never sees past the cut.
func (v *validateThinking) openCloseRules(c *record.Completion, thinking, forced, atLength bool, why string, starts, ends int) (string, string) {
	if thinking && ends == 0 && !atLength {
		if r, d := v.fail(ReasonThinkUnclosed, fmt.Sprintf("thinking on (%s) but the output ids have no %s", why, v.cfg.ThinkEnd)); r != "" {
			return r, d
		}
	}
	if forced && ends < 0 && !atLength && c.FinishReason == "length" && strings.TrimSpace(c.Answer) == "" && strings.TrimSpace(c.Reasoning) != "" {
		// No ids (chat API): the server's parser put an output with no
		// </think> all into the reasoning, and the length limit stopped
		// it there. One that stopped by itself is an empty answer
		// (contentRules): whether </think> came cannot be told.
		if r, d := v.fail(ReasonThinkUnclosed, fmt.Sprintf("forced thinking: the output was cut by the length limit inside the reasoning (%d bytes, no %s, no answer)", len(c.Reasoning), v.cfg.ThinkEnd)); r != "" {
			return r, d
		}
	}
	if forced && starts > 0 {
		if r, d := v.fail(ReasonThinkRepeated, fmt.Sprintf("forced thinking: the prompt opened the reasoning, yet the output ids have %d %s of their own", starts, v.cfg.ThinkStart)); r != "" {
			return r, d
		}
	}
	return "", ""
}

// markerTextRules: neither the answer nor the thinking text has a marker.
func (v *validateThinking) markerTextRules(c *record.Completion) (string, string) {
	if m := v.markerIn(c.Answer); m != "" {
		if r, d := v.fail(ReasonThinkLeaked, fmt.Sprintf("answer contains %s at byte %d", m, strings.Index(c.Answer, m))); r != "" {
			return r, d
		}
	}
	if m := v.markerIn(c.Reasoning); m != "" {
		return v.fail(ReasonThinkRepeated, fmt.Sprintf("thinking contains %s at byte %d", m, strings.Index(c.Reasoning, m)))
	}
	return "", ""
}

// contentRules: the thinking (when on) and the answer are not empty, and
// the answer is not a placeholder.
func (v *validateThinking) contentRules(c *record.Completion, thinking, atLength bool, why string) (string, string) {
	if thinking && strings.TrimSpace(c.Reasoning) == "" {
		if r, d := v.fail(ReasonEmptyThinking, fmt.Sprintf("thinking on (%s) but the thinking is empty (%d bytes)", why, len(c.Reasoning))); r != "" {
			return r, d
		}
	}
	// An answer that only calls tools is not empty; one whose calls the
	// server's parser dropped (finish_reason tool_calls) is a bad call.
	if strings.TrimSpace(c.Answer) == "" && len(c.ToolCalls) == 0 && c.FinishReason != "tool_calls" && !atLength {
		d := fmt.Sprintf("answer is empty (%d bytes) after %d bytes of thinking (finish_reason %s)", len(c.Answer), len(c.Reasoning), c.FinishReason)
		if _, ends := v.markerCounts(c); thinking && ends < 0 && strings.TrimSpace(c.Reasoning) != "" {
			why := "without output ids"
			if len(c.OutputIDs) > 0 {
				why = "without a tokenizer to find " + v.cfg.ThinkEnd + "'s id in the output ids"
			}
			d += "; " + why + " pipe cannot tell whether the model wrote " + v.cfg.ThinkEnd + " (the reasoning parser puts an unclosed output all into the reasoning)"
		}
		if r, d := v.fail(ReasonEmptyAnswer, d); r != "" {
			return r, d
		}
	}
	if v.placeholders[strings.ToLower(strings.TrimSpace(c.Answer))] {
		return v.fail(ReasonPlaceholderAnswer, fmt.Sprintf("answer is the placeholder %q", strings.TrimSpace(c.Answer)))
	}
	return "", ""
}

// toolCallRule: the calls the completion makes, in its answer's text
// (Qwen3's <tool_call> blocks) or apart from it (completion.tool_calls),
// are well formed and name tools the conversation declares, and the
// thinking makes none (see tool_call.go). An answer with no tool_call tag
// and no parsed calls costs one scan of each text.
func (v *validateThinking) toolCallRule(rec *record.Record, atLength bool) (string, string) {
	if v.off[ReasonBadToolCall] {
		return "", ""
	}
	c := rec.Completion
	calls, reason, detail := textCalls(c, atLength)
	if reason != "" || len(calls) == 0 && len(c.ToolCalls) == 0 {
		return reason, detail
	}
	undeclared := v.undeclaredTool(rec.Tools)
	for i, call := range calls {
		if what := undeclared(call.Name); what != "" {
			return ReasonBadToolCall, "answer: " + (&toolCallProblem{Call: i + 1, Name: call.Name, What: what}).Error()
		}
	}
	return parsedCallsRule(c.ToolCalls, undeclared)
}

// textCalls reads the calls in the completion's answer (Qwen3's
// <tool_call> blocks), or rejects it as bad_tool_call: a call in the
// thinking, blocks that do not parse, or a turn the server said ended in
// calls with none left.
func textCalls(c *record.Completion, atLength bool) (calls []textToolCall, reason, detail string) {
	if i := toolCallBlockIndex(c.Reasoning); i >= 0 {
		return nil, ReasonBadToolCall, fmt.Sprintf("the thinking makes a tool call at byte %d, %s: the server's tool-call parser reads only the answer, so it is never made",
			i, quoteClipped(c.Reasoning[i:], 80))
	}
	if !mentionsToolCall(c.Answer) {
		if c.FinishReason == "tool_calls" && len(c.ToolCalls) == 0 {
			// SGLang's tool-call parser drops a call it cannot parse, or one
			// naming an undeclared tool, and still says the turn ended in calls.
			return nil, ReasonBadToolCall, "finish_reason tool_calls, but the server returned no call: its tool-call parser dropped what the model wrote (not JSON, or an undeclared tool)"
		}
		return nil, "", ""
	}
	_, calls, p := splitTextToolCalls(c.Answer, atLength)
	if p != nil {
		return nil, ReasonBadToolCall, "answer: " + p.Error()
	}
	return calls, "", ""
}

// undeclaredTool returns what is wrong with calling the tool name in a
// conversation that declares tools: "" when it may.
func (v *validateThinking) undeclaredTool(tools []byte) func(name string) string {
	names, known := v.declaredNames(tools)
	return func(name string) string {
		switch {
		case len(tools) == 0:
			return "the conversation declares no tools"
		case known && !slices.Contains(names, name):
			return "names no tool the conversation declares (" + quoteNames(names, 8) + ")"
		}
		return ""
	}
}

// parsedCallsRule: each call the server parsed (completion.tool_calls)
// has a name the conversation declares, and arguments that are an object
// or a string holding one.
func parsedCallsRule(calls []record.ToolCall, undeclared func(string) string) (string, string) {
	for i, call := range calls {
		what := undeclared(call.Function.Name)
		if call.Function.Name == "" {
			what = "it has no name"
		}
		if what == "" {
			what = checkCallArguments(call.Function.Arguments)
		}
		if what != "" {
			return ReasonBadToolCall, fmt.Sprintf("completion.tool_calls[%d] (%s): %s", i, quoteClipped(call.Function.Name, 64), what)
		}
	}
	return "", ""
}

// historyRules: earlier assistant turns (given, or regenerated with turns
// = "all") are trained on as well with mask = "assistant", so none has a
// marker or is empty.
func (v *validateThinking) historyRules(rec *record.Record) (string, string) {
	for i, m := range rec.Messages {
		if m.Role != "assistant" {
			continue
		}
		if mk := v.markerIn(m.Content); mk != "" {
			if r, d := v.fail(ReasonThinkLeaked, fmt.Sprintf("history turn %d (assistant) contains %s", i+1, mk)); r != "" {
				return r, d
			}
		}
		if strings.TrimSpace(m.Content) == "" && len(m.ToolCalls) == 0 {
			if r, d := v.fail(ReasonEmptyAnswer, fmt.Sprintf("history turn %d (assistant) is empty", i+1)); r != "" {
				return r, d
			}
		}
	}
	return "", ""
}

// lengthRules: the thinking (when on) and the answer are at least as long
// as the minimums configured.
func (v *validateThinking) lengthRules(c *record.Completion, thinking bool) (string, string) {
	if v.cfg.MinThinkingLength > 0 && thinking {
		if n, unit := v.length(c.Reasoning); n < v.cfg.MinThinkingLength {
			if r, d := v.fail(ReasonThinkingTooShort, fmt.Sprintf("thinking has %d %s, minimum %d", n, unit, v.cfg.MinThinkingLength)); r != "" {
				return r, d
			}
		}
	}
	if v.cfg.MinAnswerLength > 0 && len(c.ToolCalls) == 0 {
		if n, unit := v.length(c.Answer); n < v.cfg.MinAnswerLength {
			return v.fail(ReasonAnswerTooShort, fmt.Sprintf("answer has %d %s, minimum %d", n, unit, v.cfg.MinAnswerLength))
		}
	}
	return "", ""
}

// repetitionRule: neither the thinking nor the answer repeats more of its
// n-grams than max_repetition.
func (v *validateThinking) repetitionRule(c *record.Completion, atLength bool) (string, string) {
	if v.off[ReasonRepetition] {
		return "", ""
	}
	for _, part := range []struct{ name, text string }{{"thinking", c.Reasoning}, {"answer", c.Answer}} {
		share, words := repeatedShare(part.text, v.cfg.RepetitionNgram, v.cfg.RepetitionMinWords)
		if share > v.cfg.MaxRepetition {
			return ReasonRepetition, fmt.Sprintf("%s: %.0f%% of its %d-grams repeat (%d words; max %.0f%%)",
				part.name, 100*share, v.cfg.RepetitionNgram, words, 100*v.cfg.MaxRepetition)
		}
	}
	if !atLength {
		return "", ""
	}
	// A loop is what most often runs an output to the length limit, and
	// one that began late is under max_repetition of the whole text: the
	// part the limit cut is judged by its last quarter alone.
	name, text := "answer", c.Answer
	if strings.TrimSpace(text) == "" {
		name, text = "thinking", c.Reasoning
	}
	tail := lastQuarter(text)
	if share, words := repeatedShare(tail, v.cfg.RepetitionNgram, v.cfg.RepetitionMinWords); share > v.cfg.MaxRepetition {
		return ReasonRepetition, fmt.Sprintf("cut at the trainer's length: the last quarter of its %s loops, %.0f%% of its %d-grams repeat (%d words; max %.0f%%)",
			name, 100*share, v.cfg.RepetitionNgram, words, 100*v.cfg.MaxRepetition)
	}
	return "", ""
}

// lastQuarter is about the last quarter of s, from a rune's start.
func lastQuarter(s string) string {
	i := len(s) * 3 / 4
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// fail returns reason and detail unless the rule is disabled.
func (v *validateThinking) fail(reason, detail string) (string, string) {
	if v.off[reason] {
		return "", ""
	}
	return reason, detail
}

// thinkingOn says whether c should contain thinking, and why.
func (v *validateThinking) thinkingOn(c *record.Completion) (bool, string) {
	switch v.cfg.Thinking {
	case "on":
		return true, `thinking = "on"`
	case "off":
		return false, `thinking = "off"`
	}
	if b, ok := requestThinking(c.Request); ok {
		return b, fmt.Sprintf("request enable_thinking=%v", b)
	}
	return true, "request does not record enable_thinking; set thinking = \"off\" if it was off"
}

// markerIn returns the first think marker found in s, or "".
func (v *validateThinking) markerIn(s string) string {
	i, j := strings.Index(s, v.cfg.ThinkStart), strings.Index(s, v.cfg.ThinkEnd)
	switch {
	case i < 0 && j < 0:
		return ""
	case i < 0 || (j >= 0 && j < i):
		return v.cfg.ThinkEnd
	}
	return v.cfg.ThinkStart
}

// length is s's length in tokens with a tokenizer, else in characters.
func (v *validateThinking) length(s string) (int, string) {
	if v.tok != nil {
		return len(v.tok.Encode(s)), "tokens"
	}
	return utf8.RuneCountInString(s), "characters"
}

var wordSeed = maphash.MakeSeed()

// repeatScratch is repeatedShare's working memory, reused across calls
// (a fresh word list and n-gram set per completion was a tenth of a
// rehearsal's allocations).
type repeatScratch struct {
	words []uint64
	set   []uint64 // open addressing; 0 is an empty slot
}

var repeatScratches = sync.Pool{New: func() any { return new(repeatScratch) }}

// asciiClass is what each ASCII byte is to repeatedShare's words:
// unicode.IsSpace, isWordRune, or neither (a word of its own).
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := range rune(utf8.RuneSelf) {
		switch {
		case unicode.IsSpace(c):
			t[c] = classSpace
		case isWordRune(c):
			t[c] = classWord
		}
	}
	return t
}()

const (
	classSymbol uint8 = iota
	classSpace
	classWord
)

// runeClass is r's asciiClass, for any rune: a CJK character is a
// symbol (a word of its own).
func runeClass(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	switch {
	case unicode.IsSpace(r):
		return classSpace
	case isWordRune(r) && !isCJK(r):
		return classWord
	}
	return classSymbol
}

// repeatedShare splits s into words (runs of letters and digits; each CJK
// character and each other symbol is a word of its own) and returns the
// share of its n-grams that equal an earlier n-gram, and the word count.
// Texts with fewer than minWords words return share 0.
func repeatedShare(s string, n, minWords int) (float64, int) {
	sc := repeatScratches.Get().(*repeatScratch)
	defer repeatScratches.Put(sc)
	sc.words = appendWordHashes(sc.words[:0], s)
	words := sc.words
	if len(words) < minWords || len(words) < n+1 {
		return 0, len(words)
	}
	total := len(words) - n + 1
	return float64(sc.repeatedNGrams(words, n)) / float64(total), len(words)
}

// appendWordHashes appends the hash of each word of s (repeatedShare's
// words) to words.
func appendWordHashes(words []uint64, s string) []uint64 {
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch runeClass(r) {
		case classSpace:
			i += size
		case classWord:
			j := wordEnd(s, i+size)
			words = append(words, maphash.String(wordSeed, s[i:j]))
			i = j
		default:
			words = append(words, maphash.String(wordSeed, s[i:i+size]))
			i += size
		}
	}
	return words
}

// wordEnd is where the word going on at j ends: the first rune from j that
// is not of classWord.
func wordEnd(s string, j int) int {
	for j < len(s) {
		if c := s[j]; c < utf8.RuneSelf {
			if asciiClass[c] != classWord {
				return j
			}
			j++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		if runeClass(r) != classWord {
			return j
		}
		j += size
	}
	return j
}

// repeatedNGrams counts the n-grams of words that equal an earlier one.
// Each n-gram is hashed by combining its word hashes; a collision can only
// overstate repetition by one n-gram in 2^64. The set of n-grams seen is an
// open-addressing table at most half full, kept in sc between calls.
func (sc *repeatScratch) repeatedNGrams(words []uint64, n int) int {
	total := len(words) - n + 1
	size := 1
	for size < 2*total {
		size <<= 1
	}
	if cap(sc.set) < size {
		sc.set = make([]uint64, size)
	}
	set := sc.set[:size]
	clear(set)
	mask := uint64(size - 1)
	repeats := 0
	for i := range total {
		h := uint64(14695981039346656037)
		for _, w := range words[i : i+n] {
			h = (h ^ w) * 1099511628211
			h ^= h >> 29
		}
		if h == 0 {
			h = 1 // 0 marks an empty slot
		}
		for at := (h * 0x9E3779B97F4A7C15) >> 32 & mask; ; at = (at + 1) & mask {
			if set[at] == 0 {
				set[at] = h
				break
			}
			if set[at] == h {
				repeats++
				break
			}
		}
	}
	return repeats
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r)
}

var (
	_ pipeline.Processor = (*validateThinking)(nil)
	_ pipeline.Opener    = (*validateThinking)(nil)
)
