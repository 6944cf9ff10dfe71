package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

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
		Description: `Each rule is an expression over the record (expr-lang,
https://expr-lang.org). When true, it rejects the record with the rule's
reason code. The first rule that is true decides. Records no rule rejects
go to "accepted".

pipe check compiles the rules, typed against the record. A problem is
reported at the rule's line, naming it and the column. Problems are a name
the record has not, a type that does not fit, or an expression that is not
a boolean.

` + recordExprHelp + `

Rejections by reason are in the run summary and the report. second_chance
lists rule reasons whose records leave by the "retry" port instead, for a
new attempt. validate-thinking's second_chance does the same.`,
		Outputs:         []string{"accepted", pipeline.RejectedPort, RetryPort},
		OptionalOutputs: []string{RetryPort},
		OutputsUsed:     secondChanceOutputs(func(c any) []string { return c.(*filterConfig).SecondChance }),
		Needs:           nil,
		Produces:        nil,
		KeySettings: pipeline.SettingsFor(func(cfg *filterConfig) string {
			reasons := make([]string, len(cfg.Rules))
			for i, r := range cfg.Rules {
				reasons[i] = r.Reason
			}
			s := "rules: " + strings.Join(reasons, ", ")
			if len(cfg.SecondChance) > 0 {
				s += "; second chance: " + strings.Join(cfg.SecondChance, ",")
			}
			return s
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

// filterConfig configures filter.
type filterConfig struct {
	Rules     filterRules `toml:"rules" required:"true" op:"false" doc:"The rules, in order: [{reject_if = EXPRESSION, reason = CODE}, ...]. The first true one rejects the record with its reason."`
	Tokenizer string      `toml:"tokenizer" op:"false" path:"indir" contains:"tokenizer.json" doc:"Model directory whose tokenizer tokens() counts with. Needed only by rules that call tokens()."`
	Workers   int         `toml:"workers" op:"true" default:"0" min:"0" max:"1024" doc:"Records judged in parallel. 0 means one per CPU."`
	// SecondChance lists the rules' reasons whose records are sampled again.
	SecondChance []string `toml:"second_chance" op:"false" doc:"Rule reasons whose records leave by the retry port for a new attempt, instead of being rejected. A generate stage with input = STAGE.retry takes them."`
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

// filterTable is how the rules are written.
var filterTable = exprTable{item: "rule", noun: "rule", shape: "{reject_if = EXPRESSION, reason = CODE}",
	keys: []string{"reject_if", "reason"}, want: "reject_if and reason"}

// DecodeConfig reads the rules from the file's value.
func (r *filterRules) DecodeConfig(raw any) error {
	tables, err := filterTable.decode(raw)
	if err != nil {
		return err
	}
	out := make(filterRules, 0, len(tables))
	seen := map[string]int{}
	for i, t := range tables {
		rule := filterRule{RejectIf: t["reject_if"], Reason: t["reason"]}
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

// Validate compiles every rule against the record's fields: pipe check
// names a rule that would fail at run time.
func (c *filterConfig) Validate() []error {
	reasons := make([]string, len(c.Rules))
	for i, r := range c.Rules {
		reasons[i] = r.Reason
	}
	errs := checkSecondChance(c.SecondChance, reasons)
	for i, r := range c.Rules {
		prog, err := compileRule(r.RejectIf, nil)
		if err != nil {
			errs = append(errs, &config.FieldError{Key: "rules", Item: i + 1, Msg: fmt.Sprintf("#%d (%s): %s", i+1, r.Reason, exprError(err))})
			continue
		}
		if c.Tokenizer == "" && callsTokens(prog) {
			errs = append(errs, &config.FieldError{Key: "rules", Item: i + 1, Msg: fmt.Sprintf("#%d (%s): tokens() needs tokenizer = MODEL_DIR (the model directory whose tokenizer counts)", i+1, r.Reason)})
		}
	}
	if c.Tokenizer != "" {
		errs = append(errs, checkTokenizer("tokenizer", c.Tokenizer)...)
	}
	return errs
}

// compileRule compiles a rule's expression to a boolean program (see
// compileExpr for tok).
func compileRule(src string, tok *tokenize.Tokenizer) (*vm.Program, error) {
	return compileExpr(src, tok, expr.AsBool())
}

// filter is a filter stage.
type filter struct {
	cfg      *filterConfig
	programs []*vm.Program
	counts   []atomic.Int64 // rejections per rule
	errors   atomic.Int64   // evaluations that failed (the record failed)
	chances  *secondChances
}

var (
	_ pipeline.Processor = (*filter)(nil)
	_ pipeline.Parallel  = (*filter)(nil)
	_ pipeline.Opener    = (*filter)(nil)
	_ pipeline.Reporter  = (*filter)(nil)
)

func newFilter(c *filterConfig) (pipeline.Processor, error) {
	return &filter{cfg: c, counts: make([]atomic.Int64, len(c.Rules)), chances: newSecondChances(c.SecondChance)}, nil
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
			return fmt.Errorf("rule %d (%s): %s", i+1, r.Reason, exprError(err))
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
			return out.Fail(rec, fmt.Errorf("rule %d (%s): %s", i+1, f.cfg.Rules[i].Reason, exprError(err)), 1)
		}
		if v.(bool) {
			f.counts[i].Add(1)
			return f.chances.reject(out, rec, f.cfg.Rules[i].Reason, "rule "+fmt.Sprint(i+1)+": "+termsafe.Cut(f.cfg.Rules[i].RejectIf, 200))
		}
	}
	f.chances.accepted(rec)
	return out.Emit("accepted", rec)
}

// Report gives the rejections per rule and the evaluations that failed.
func (f *filter) Report() []figure.Figure {
	out := make([]figure.Figure, 0, len(f.counts)+1)
	for i := range f.counts {
		out = append(out, figure.NewCounter("rule_rejections", f.counts[i].Load(), "reason", f.cfg.Rules[i].Reason))
	}
	return append(append(out, figure.NewCounter("rule_errors", f.errors.Load())), f.chances.Report()...)
}
