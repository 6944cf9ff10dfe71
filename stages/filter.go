package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "filter",
		Summary: "reject records by rules of your own: expressions over the record, each with its reason code",
		Description: `Each rule is an expression (expr-lang, https://expr-lang.org) over the
record that, when true, rejects it with the rule's reason code; the first
rule that is true decides. Records no rule rejects go to "accepted".

The rules are compiled by pipe check, typed against the record: a name the
record has not, a type that does not fit, or an expression that is not a
boolean is a problem at the rules key, naming the rule and the column.

What an expression sees:

  id                          the record id
  meta                        the input's other fields (meta.source, ...)
  prompt.text                 the last user (or tool) message
  prompt.system               the system message ("" without one)
  prompt.messages             [{role, content, reasoning}], the conversation
                              before the completion
  prompt.turns, prompt.tools  the number of messages, of declared tools
  completion.answer           the answer, completion.reasoning its thinking
  completion.finish_reason    "stop", "length", ...
  completion.prompt_tokens, completion.completion_tokens,
  completion.reasoning_tokens, completion.tool_calls (a count)
  completion.present          false when the record has none
  row.tokens, row.loss_tokens the training row's lengths (after
                              tokenize-and-mask), row.present

Functions besides expr-lang's own (len, lower, trim, hasPrefix, contains,
the matches operator for regular expressions, ...):

  tokens(text)                tokens of text by the run's tokenizer (needs
                              tokenizer)
  script(text)                the Unicode script most of text's letters are
                              in: "Latin", "Han", "Cyrillic", "Arabic", ...,
                              "" with no letters (a language check:
                              script(completion.answer) != script(prompt.text))

Rejections by reason are in the run summary and the report.`,
		Outputs:  []string{"accepted", pipeline.RejectedPort},
		Needs:    nil,
		Produces: nil,
		KeySettings: pipeline.SettingsFor(func(cfg *FilterConfig) string {
			reasons := make([]string, len(cfg.Rules))
			for i, r := range cfg.Rules {
				reasons[i] = r.Reason
			}
			return "rules: " + strings.Join(reasons, ", ")
		}),
		Example: `[[stage]]
id   = "completions"
kind = "read-completions"
path = "completions.jsonl"

[[stage]]
id    = "rules"
kind  = "filter"
input = "completions"
rules = [
  {reject_if = 'len(trim(completion.answer)) < 20', reason = "short_answer"},
  {reject_if = 'lower(completion.answer) matches "^as an ai"', reason = "as_an_ai"},
  {reject_if = 'script(completion.answer) != script(prompt.text)', reason = "other_language"},
]

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "rules.accepted"
path  = "out/good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "rules.rejected"
path  = "out/rejected.jsonl"
`,
		New: pipeline.NewProcessor(newFilter),
	})
}

// FilterConfig configures filter.
type FilterConfig struct {
	Rules     filterRules `toml:"rules" required:"true" op:"false" doc:"the rules, in order: [{reject_if = EXPRESSION, reason = CODE}, ...]; the first true one rejects the record with its reason"`
	Tokenizer string      `toml:"tokenizer" op:"false" path:"indir" contains:"tokenizer.json" doc:"model directory whose tokenizer tokens() counts with; needed only by rules that call tokens()"`
	Workers   int         `toml:"workers" op:"true" default:"0" min:"0" max:"1024" doc:"records judged in parallel; 0 = one per CPU"`
}

// filterRule is one rule: an expression that, true, rejects with Reason.
type filterRule struct {
	RejectIf string `json:"reject_if"`
	Reason   string `json:"reason"`
}

// filterRules are the rules as the pipeline file gives them: an array of
// {reject_if, reason} tables.
type filterRules []filterRule

// ConfigTypeName names the shape in docs and messages.
func (filterRules) ConfigTypeName() string { return "array of {reject_if, reason} tables" }

// String is the rules as the run's settings record them.
func (r filterRules) String() string {
	b, _ := json.Marshal([]filterRule(r))
	return string(b)
}

// DecodeConfig reads the rules from the file's value.
func (r *filterRules) DecodeConfig(raw any) error {
	list, ok := raw.([]any)
	if !ok {
		return fmt.Errorf("must be an array of {reject_if, reason} tables, got %T", raw)
	}
	if len(list) == 0 {
		return fmt.Errorf("must hold at least one rule")
	}
	out := make(filterRules, 0, len(list))
	seen := map[string]int{}
	for i, el := range list {
		t, ok := el.(map[string]any)
		if !ok {
			return fmt.Errorf("rule %d: must be a table {reject_if = EXPRESSION, reason = CODE}", i+1)
		}
		var rule filterRule
		for k, v := range t {
			s, ok := v.(string)
			switch {
			case k != "reject_if" && k != "reason":
				return fmt.Errorf("rule %d: unknown key %q (want reject_if and reason)", i+1, k)
			case !ok:
				return fmt.Errorf("rule %d: %s must be a string", i+1, k)
			case k == "reject_if":
				rule.RejectIf = s
			default:
				rule.Reason = s
			}
		}
		if strings.TrimSpace(rule.RejectIf) == "" {
			return fmt.Errorf("rule %d: reject_if is missing or empty", i+1)
		}
		if !validReason(rule.Reason) {
			return fmt.Errorf("rule %d: reason %q must be a code of lowercase letters, digits and _ (e.g. short_answer)", i+1, rule.Reason)
		}
		if j, dup := seen[rule.Reason]; dup {
			return fmt.Errorf("rule %d: reason %q is rule %d's too: give each rule its own code", i+1, rule.Reason, j)
		}
		seen[rule.Reason] = i + 1
		out = append(out, rule)
	}
	*r = out
	return nil
}

func validReason(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Validate compiles every rule against the record's fields: pipe check
// names a rule that would fail at run time.
func (c *FilterConfig) Validate() []error {
	var errs []error
	for i, r := range c.Rules {
		prog, err := compileRule(r.RejectIf, nil)
		if err != nil {
			errs = append(errs, &config.FieldError{Key: "rules", Msg: fmt.Sprintf("#%d (%s): %s", i+1, r.Reason, ruleError(err))})
			continue
		}
		if c.Tokenizer == "" && callsTokens(prog) {
			errs = append(errs, &config.FieldError{Key: "rules", Msg: fmt.Sprintf("#%d (%s): tokens() needs tokenizer = MODEL_DIR (the model directory whose tokenizer counts)", i+1, r.Reason)})
		}
	}
	if c.Tokenizer != "" {
		errs = append(errs, checkTokenizer("tokenizer", c.Tokenizer)...)
	}
	return errs
}

// ruleError is expr's message, its caret line kept under the expression,
// in the record's words: "completion has no field anwser (did you mean
// answer?) (1:16)" for expr's "type stages.completionEnv has no field
// anwser", and a did-you-mean for an unknown name.
func ruleError(err error) string {
	msg := strings.TrimRight(err.Error(), "\n")
	if m := noField.FindStringSubmatch(msg); m != nil {
		if fields, ok := envFields[m[1]]; ok {
			hint := suggest.DidYouMean(m[2], fields)
			if hint == "" {
				hint = " (its fields: " + strings.Join(fields, ", ") + ")"
			}
			msg = strings.Replace(msg, m[0], envNames[m[1]]+" has no field "+m[2]+hint, 1)
		}
	} else if m := unknownName.FindStringSubmatch(msg); m != nil {
		hint := suggest.DidYouMean(m[1], topNames)
		if hint == "" {
			// A field named without its part: "answer" for completion.answer.
			for _, part := range []string{"completion", "prompt", "row"} {
				if h := suggest.DidYouMean(m[1], envFields[part+"Env"]); h != "" {
					hint = strings.Replace(h, `"`, `"`+part+".", 1)
					break
				}
			}
		}
		msg = strings.Replace(msg, m[0], m[0]+hint, 1)
	}
	return msg
}

var (
	noField     = regexp.MustCompile(`type stages\.(\w+) has no field (\w+)`)
	unknownName = regexp.MustCompile(`unknown name (\w+)`)
	// envNames and envFields are each env struct's name in a rule and
	// its fields; topNames what a rule may name at the top.
	envNames  = map[string]string{"promptEnv": "prompt", "messageEnv": "a message", "completionEnv": "completion", "rowEnv": "row", "filterEnv": "the record"}
	envFields = map[string][]string{}
	topNames  = []string{"tokens", "script"}
)

func init() {
	for _, v := range []any{filterEnv{}, promptEnv{}, messageEnv{}, completionEnv{}, rowEnv{}} {
		t := reflect.TypeOf(v)
		for i := range t.NumField() {
			envFields[t.Name()] = append(envFields[t.Name()], t.Field(i).Tag.Get("expr"))
		}
	}
	topNames = append(topNames, envFields["filterEnv"]...)
}

// filterEnv is what a rule sees of a record (see the Description).
type filterEnv struct {
	ID         string         `expr:"id"`
	Meta       map[string]any `expr:"meta"`
	Prompt     promptEnv      `expr:"prompt"`
	Completion completionEnv  `expr:"completion"`
	Row        rowEnv         `expr:"row"`
}

type promptEnv struct {
	Text     string       `expr:"text"`
	System   string       `expr:"system"`
	Messages []messageEnv `expr:"messages"`
	Turns    int          `expr:"turns"`
	Tools    int          `expr:"tools"`
}

type messageEnv struct {
	Role      string `expr:"role"`
	Content   string `expr:"content"`
	Reasoning string `expr:"reasoning"`
}

type completionEnv struct {
	Present          bool   `expr:"present"`
	Answer           string `expr:"answer"`
	Reasoning        string `expr:"reasoning"`
	FinishReason     string `expr:"finish_reason"`
	PromptTokens     int    `expr:"prompt_tokens"`
	CompletionTokens int    `expr:"completion_tokens"`
	ReasoningTokens  int    `expr:"reasoning_tokens"`
	ToolCalls        int    `expr:"tool_calls"`
}

type rowEnv struct {
	Present    bool `expr:"present"`
	Tokens     int  `expr:"tokens"`
	LossTokens int  `expr:"loss_tokens"`
}

// envOf is what a rule sees of rec.
func envOf(rec *record.Record) filterEnv {
	e := filterEnv{ID: rec.ID, Meta: rec.Meta}
	if e.Meta == nil {
		e.Meta = map[string]any{}
	}
	e.Prompt.Turns, e.Prompt.Tools = len(rec.Messages), len(rec.Tools)
	e.Prompt.Messages = make([]messageEnv, len(rec.Messages))
	for i, m := range rec.Messages {
		e.Prompt.Messages[i] = messageEnv{Role: m.Role, Content: m.Content, Reasoning: m.ReasoningContent}
		switch m.Role {
		case "system":
			if e.Prompt.System == "" {
				e.Prompt.System = m.Content
			}
		case "user", "tool":
			e.Prompt.Text = m.Content
		}
	}
	if c := rec.Completion; c != nil {
		e.Completion = completionEnv{Present: true, Answer: c.Answer, Reasoning: c.Reasoning, FinishReason: c.FinishReason,
			PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens, ReasoningTokens: c.ReasoningTokens, ToolCalls: len(c.ToolCalls)}
	}
	if t := rec.Tokens; t != nil {
		e.Row = rowEnv{Present: true, Tokens: t.NumTokens, LossTokens: t.NumLossTokens}
	}
	return e
}

// compileRule compiles a rule's expression to a boolean program. tok,
// when not nil, is what tokens() counts with; compiled without it (pipe
// check), tokens() type-checks and is not called.
func compileRule(src string, tok *tokenize.Tokenizer) (*vm.Program, error) {
	count := func(params ...any) (any, error) {
		if tok == nil {
			return nil, fmt.Errorf("tokens() needs the stage's tokenizer")
		}
		return len(tok.Encode(params[0].(string))), nil
	}
	return expr.Compile(src,
		expr.Env(filterEnv{}),
		expr.AsBool(),
		expr.Function("tokens", count, new(func(string) int)),
		expr.Function("script", func(params ...any) (any, error) { return dominantScript(params[0].(string)), nil }, new(func(string) string)),
	)
}

// callsTokens reports whether prog calls tokens().
func callsTokens(prog *vm.Program) bool {
	v := &callFinder{name: "tokens"}
	node := prog.Node()
	ast.Walk(&node, v)
	return v.found
}

type callFinder struct {
	name  string
	found bool
}

func (v *callFinder) Visit(n *ast.Node) {
	if c, ok := (*n).(*ast.CallNode); ok {
		if id, ok := c.Callee.(*ast.IdentifierNode); ok && id.Value == v.name {
			v.found = true
		}
	}
}

// filter is a filter stage.
type filter struct {
	cfg      *FilterConfig
	programs []*vm.Program
	counts   []atomic.Int64 // rejections per rule
	errors   atomic.Int64   // evaluations that failed (the record failed)
}

var (
	_ pipeline.Processor = (*filter)(nil)
	_ pipeline.Parallel  = (*filter)(nil)
	_ pipeline.Opener    = (*filter)(nil)
	_ pipeline.Reporter  = (*filter)(nil)
)

func newFilter(c *FilterConfig) (pipeline.Processor, error) {
	return &filter{cfg: c, counts: make([]atomic.Int64, len(c.Rules))}, nil
}

// Workers is the workers key, or one per CPU.
func (f *filter) Workers() int {
	if f.cfg.Workers > 0 {
		return f.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Open compiles the rules, with the tokenizer where one is given.
func (f *filter) Open(_ context.Context, env *pipeline.Env) error {
	var tok *tokenize.Tokenizer
	if f.cfg.Tokenizer != "" {
		var err error
		if tok, err = sharedTokenizer(env, f.cfg.Tokenizer); err != nil {
			return err
		}
	}
	f.programs = make([]*vm.Program, len(f.cfg.Rules))
	for i, r := range f.cfg.Rules {
		prog, err := compileRule(r.RejectIf, tok)
		if err != nil {
			return fmt.Errorf("rule %d (%s): %s", i+1, r.Reason, ruleError(err))
		}
		f.programs[i] = prog
	}
	return nil
}

func (f *filter) Close() error { return nil }

// Process rejects rec with the first rule that is true of it. A rule that
// cannot be evaluated (a map key of the wrong type, a regular expression
// that does not compile) fails the record, naming the rule: a rule that
// errs is not a verdict.
func (f *filter) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	env := envOf(rec)
	var machine vm.VM
	for i, prog := range f.programs {
		v, err := machine.Run(prog, env)
		if err != nil {
			f.errors.Add(1)
			return out.Fail(rec, fmt.Errorf("rule %d (%s): %s", i+1, f.cfg.Rules[i].Reason, ruleError(err)), 1)
		}
		if v.(bool) {
			f.counts[i].Add(1)
			return out.Reject(rec, f.cfg.Rules[i].Reason, "rule "+fmt.Sprint(i+1)+": "+truncate(f.cfg.Rules[i].RejectIf, 200))
		}
	}
	return out.Emit("accepted", rec)
}

// Report gives the rejections per rule and the evaluations that failed.
func (f *filter) Report() []figure.Figure {
	out := make([]figure.Figure, 0, len(f.counts)+1)
	for i := range f.counts {
		out = append(out, figure.NewCounter("rule_rejections", f.counts[i].Load(), "reason", f.cfg.Rules[i].Reason))
	}
	return append(out, figure.NewCounter("rule_errors", f.errors.Load()))
}
