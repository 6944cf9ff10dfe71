package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/expr-lang/expr"
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
		Kind:    "map",
		Summary: "set or add fields of records by expressions: a system prompt by rule, a tag, a derived meta field",
		Description: `Each assignment sets one field of the record to the value of an expression
over the record (expr-lang, https://expr-lang.org). An assignment with a
condition applies only when the condition is true. The assignments run in
order: a later one sees what the earlier ones set.

A field is one of:

  meta.NAME        any JSON value: a string, number, bool, list or map;
                   nil removes it. NAME is letters, digits and _.
  prompt.system    a string: the system message, put first when the
                   prompt has none; "" removes it
  prompt.text      a string: the last user message's content (a record
                   whose prompt.text is a tool's result fails)

id never changes: exactly-once accounting keys on it. The completion and
the training row are not the map's to change: generate and
tokenize-and-mask made them. Nor is the prompt of a record that has one of
them. An assignment that would change it fails that record, so set the
prompt before generate. A value that errs or has the wrong type at run time
also fails the record, naming the assignment. The record is then in
RUN_DIR/failed/ with what the assignments before it set.

pipe check compiles the expressions, typed against the record. A problem is
reported at the assignment's line, naming it and the column. Problems are a
name the record has not, a value that does not fit its field (prompt.* is a
string), or a condition that is not a boolean.

` + recordExprHelp + `

The assignments are part of the settings that define the run's data. A
resumed run with other assignments is refused, unless pipe run
--force-new-config. The report counts the records each assignment changed.`,
		Outputs: []string{"out"},
		KeySettings: pipeline.SettingsFor(func(cfg *mapConfig) string {
			fields := make([]string, len(cfg.Set))
			for i, a := range cfg.Set {
				fields[i] = a.Field
			}
			return "set " + strings.Join(fields, ", ")
		}),
		Example: `[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "shape"
kind  = "map"
input = "prompts"
set = [
  {field = "meta.lang",     value = 'script(prompt.text)'},
  {field = "prompt.system", value = '"Answer in the language of the question."', when = 'meta.lang != "Latin"'},
  {field = "meta.long",     value = 'len(prompt.text) > 2000'},
]

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "shape"
path  = "out/prompts.jsonl"
`,
		New: pipeline.NewProcessor(newMap),
	})
}

// mapConfig configures map.
type mapConfig struct {
	Set       mapAssignments `toml:"set" required:"true" op:"false" doc:"The assignments, in order: [{field = FIELD, value = EXPRESSION, when = CONDITION}, ...]. FIELD is meta.NAME, prompt.system or prompt.text. when is optional."`
	Tokenizer string         `toml:"tokenizer" op:"false" path:"indir" contains:"tokenizer.json" doc:"Model directory whose tokenizer tokens() counts with. Needed only by expressions that call tokens()."`
	Workers   int            `toml:"workers" op:"true" default:"0" min:"0" max:"1024" doc:"Records shaped in parallel. 0 means one per CPU."`
}

// mapAssignment sets Field to Value's value where When (if given) is true.
type mapAssignment struct {
	Field string `json:"field"`
	Value string `json:"value"`
	When  string `json:"when,omitempty"`
}

// mapAssignments are the assignments as the pipeline file gives them: an
// array of {field, value, when} tables.
type mapAssignments []mapAssignment

// ConfigTypeName names the shape in docs and messages.
func (mapAssignments) ConfigTypeName() string { return "array of {field, value, when} tables" }

// String is the assignments as the run's settings record them: every
// expression as written, so a change to any of them is a changed setting.
func (s mapAssignments) String() string {
	b, _ := json.Marshal([]mapAssignment(s))
	return string(b)
}

// mapTable is how the assignments are written.
var mapTable = exprTable{noun: "assignment", shape: "{field = FIELD, value = EXPRESSION, when = CONDITION}",
	keys: []string{"field", "value", "when"}, want: "field, value and optionally when",
	hint: ` (an expression in single quotes: '"text"', '1', 'true')`}

// DecodeConfig reads the assignments from the file's value; what they
// say is Validate's to judge.
func (s *mapAssignments) DecodeConfig(raw any) error {
	tables, err := mapTable.decode(raw)
	if err != nil {
		return err
	}
	out := make(mapAssignments, 0, len(tables))
	for i, t := range tables {
		a := mapAssignment{Field: t["field"], Value: t["value"], When: t["when"]}
		switch {
		case a.Field == "":
			return fmt.Errorf("#%d: field is missing or empty", i+1)
		case strings.TrimSpace(a.Value) == "":
			return fmt.Errorf("#%d (%s): value is missing or empty", i+1, a.Field)
		case a.When != "" && strings.TrimSpace(a.When) == "":
			return fmt.Errorf("#%d (%s): when is blank: leave it out to always set", i+1, a.Field)
		}
		out = append(out, a)
	}
	*s = out
	return nil
}

// Validate judges every assignment's field and compiles its expressions
// against the record: pipe check names an assignment that would fail at
// run time.
func (c *mapConfig) Validate() []error {
	var errs []error
	at := func(i int, format string, args ...any) {
		errs = append(errs, &config.FieldError{Key: "set", Item: i + 1, Msg: fmt.Sprintf("#%d (%s): ", i+1, c.Set[i].Field) + fmt.Sprintf(format, args...)})
	}
	for i, a := range c.Set {
		target, err := parseMapTarget(a.Field)
		if err != nil {
			at(i, "%v", err)
			continue
		}
		value, when, err := target.compile(a, nil)
		if err != nil {
			at(i, "%v", err)
			continue
		}
		if c.Tokenizer == "" && (callsTokens(value) || when != nil && callsTokens(when)) {
			at(i, "tokens() needs tokenizer = MODEL_DIR (the model directory whose tokenizer counts)")
		}
	}
	if c.Tokenizer != "" {
		errs = append(errs, checkTokenizer("tokenizer", c.Tokenizer)...)
	}
	return errs
}

// mapTarget is a field an assignment sets: a meta field (name) or a part
// of the prompt.
type mapTarget struct {
	part string // "meta", "prompt.system" or "prompt.text"
	name string // meta's key
}

// mapFields are the fields an assignment may set, as users write them.
var mapFields = []string{"meta.NAME", "prompt.system", "prompt.text"}

// parseMapTarget reads an assignment's field, or says why it cannot be
// set and what can.
func parseMapTarget(field string) (mapTarget, error) {
	allowed := "; map sets " + strings.Join(mapFields, ", ")
	part, rest, _ := strings.Cut(field, ".")
	switch {
	case field == "prompt.system" || field == "prompt.text":
		return mapTarget{part: field}, nil
	case part == "meta" && validMetaName(rest):
		return mapTarget{part: "meta", name: rest}, nil
	case part == "meta":
		return mapTarget{}, fmt.Errorf("%q is not a meta field's name: meta.NAME takes letters, digits and _ (not starting with a digit), one level", rest)
	case part == "id":
		return mapTarget{}, errors.New("the id never changes: exactly-once accounting keys on it" + allowed)
	case part == "completion" || part == "row" || part == "tokens":
		return mapTarget{}, errors.New("the completion and the training row are what generate and tokenize-and-mask made, not the map's to change" + allowed)
	case part == "prompt":
		return mapTarget{}, fmt.Errorf("prompt.%s cannot be set%s", rest, allowed)
	}
	hint := suggest.DidYouMean(field, []string{"prompt.system", "prompt.text", "meta." + rest})
	if p := "prompt." + field; hint == "" && (p == "prompt.system" || p == "prompt.text") {
		hint = fmt.Sprintf(" (did you mean %q?)", p) // a part named without its prompt
	}
	return mapTarget{}, fmt.Errorf("unknown field %q%s%s", field, hint, allowed)
}

func validMetaName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// compile compiles a's value, typed for the target, and its condition
// (nil without one), with tok for tokens() (see compileExpr).
func (t mapTarget) compile(a mapAssignment, tok *tokenize.Tokenizer) (value, when *vm.Program, err error) {
	if t.part == "meta" {
		value, err = compileExpr(a.Value, tok)
		if err == nil {
			err = jsonType(value.Node().Type())
		}
	} else {
		value, err = compileExpr(a.Value, tok, expr.AsKind(reflect.String))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("value: %s", exprError(err))
	}
	if a.When != "" {
		if when, err = compileExpr(a.When, tok, expr.AsBool()); err != nil {
			return nil, nil, fmt.Errorf("when: %s", exprError(err))
		}
	}
	return value, when, nil
}

// jsonType refuses a value type no JSON value has (the record's parts as
// structs, a time): what is known only at run time (meta's fields, any)
// is checked then, by jsonValue.
func jsonType(t reflect.Type) error {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return nil
	case reflect.Slice, reflect.Array:
		return jsonType(t.Elem())
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return jsonType(t.Elem())
		}
	}
	name := t.String()
	if n, ok := envNames[t.Name()]; ok {
		name = n
	}
	return fmt.Errorf("value: a meta field holds a string, number, bool, list or map, not %s: name one of its fields", name)
}

// jsonValue checks that v is a JSON value: nil, a bool, a string, a finite
// number, or a list or string-keyed map of them.
func jsonValue(v any) error {
	switch x := v.(type) {
	case nil, bool, string, int, int64:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("value %v is not a JSON number", x)
		}
		return nil
	case []any:
		for _, e := range x {
			if err := jsonValue(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range x {
			if err := jsonValue(e); err != nil {
				return err
			}
		}
		return nil
	}
	return reflectedJSONValue(v)
}

// reflectedJSONValue is jsonValue for the types an expression may give
// that jsonValue does not name: other integers, float32, typed lists and
// string-keyed maps.
func reflectedJSONValue(v any) error {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return nil
	case reflect.Float32:
		return jsonValue(r.Float())
	case reflect.Slice, reflect.Array:
		for i := range r.Len() {
			if err := jsonValue(r.Index(i).Interface()); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if r.Type().Key().Kind() == reflect.String {
			for it := r.MapRange(); it.Next(); {
				if err := jsonValue(it.Value().Interface()); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return fmt.Errorf("a meta field holds a string, number, bool, list or map, not %T", v)
}

// mapStage is a map stage.
type mapStage struct {
	cfg     *mapConfig
	set     []compiledAssignment
	changed []atomic.Int64 // records each assignment changed
	errors  atomic.Int64   // records failed by an assignment
}

// compiledAssignment is an assignment ready to run.
type compiledAssignment struct {
	target      mapTarget
	value, when *vm.Program
}

var (
	_ pipeline.Processor = (*mapStage)(nil)
	_ pipeline.Parallel  = (*mapStage)(nil)
	_ pipeline.Opener    = (*mapStage)(nil)
	_ pipeline.Reporter  = (*mapStage)(nil)
)

func newMap(c *mapConfig) (pipeline.Processor, error) {
	return &mapStage{cfg: c, changed: make([]atomic.Int64, len(c.Set))}, nil
}

// Workers is the workers key, or one per CPU.
func (m *mapStage) Workers() int {
	if m.cfg.Workers > 0 {
		return m.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}

// Open compiles the assignments, with the tokenizer where one is given.
func (m *mapStage) Open(_ context.Context, env *pipeline.Env) error {
	var tok *tokenize.Tokenizer
	if m.cfg.Tokenizer != "" {
		var err error
		if tok, err = sharedTokenizer(env, m.cfg.Tokenizer); err != nil {
			return err
		}
	}
	m.set = make([]compiledAssignment, len(m.cfg.Set))
	for i, a := range m.cfg.Set {
		target, err := parseMapTarget(a.Field)
		if err != nil {
			return fmt.Errorf("set #%d (%s): %v", i+1, a.Field, err)
		}
		value, when, err := target.compile(a, tok)
		if err != nil {
			return fmt.Errorf("set #%d (%s): %v", i+1, a.Field, err)
		}
		m.set[i] = compiledAssignment{target: target, value: value, when: when}
	}
	return nil
}

func (m *mapStage) Close() error { return nil }

// Process runs the assignments over rec in order, each seeing what the
// earlier ones set, and sends it on. An assignment that cannot be
// evaluated, or whose value does not fit its field, fails the record,
// naming the assignment: a record half shaped is not sent on.
func (m *mapStage) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	env := envOf(rec)
	var machine vm.VM
	for i, a := range m.set {
		if a.when != nil {
			ok, err := machine.Run(a.when, env)
			if err != nil {
				return m.fail(out, rec, i, "when: "+exprError(err))
			}
			if !ok.(bool) {
				continue
			}
		}
		v, err := machine.Run(a.value, env)
		if err != nil {
			return m.fail(out, rec, i, "value: "+exprError(err))
		}
		changed, err := a.target.set(rec, &env, v)
		if err != nil {
			return m.fail(out, rec, i, err.Error())
		}
		if changed {
			m.changed[i].Add(1)
		}
	}
	return out.Emit("out", rec)
}

func (m *mapStage) fail(out pipeline.Emitter, rec *record.Record, i int, msg string) error {
	m.errors.Add(1)
	return out.Fail(rec, fmt.Errorf("set #%d (%s): %s", i+1, m.cfg.Set[i].Field, msg), 1)
}

// errPromptMade refuses to change the prompt of a record generated from it.
var errPromptMade = errors.New("the record has a completion or a training row: the prompt it was made from cannot change (set the prompt before generate)")

// set gives the target v's value in rec, and env (what the next
// assignment sees) with it. It reports whether the record changed.
func (t mapTarget) set(rec *record.Record, env *recordEnv, v any) (bool, error) {
	if t.part == "meta" {
		if err := jsonValue(v); err != nil {
			return false, err
		}
		// env.Meta may be rec.Meta or its decoded copy (metaValues):
		// both change, and a value left as it was keeps the input's
		// spelling in rec.Meta.
		old, had := env.Meta[t.name]
		if v == nil {
			delete(env.Meta, t.name)
			delete(rec.Meta, t.name)
			return had, nil
		}
		if had && sameValue(old, v) {
			return false, nil
		}
		env.Meta[t.name] = v
		if rec.Meta == nil {
			rec.Meta = env.Meta // envOf made a map for a record without one
		}
		rec.Meta[t.name] = v
		return true, nil
	}
	s, ok := v.(string)
	if !ok {
		return false, fmt.Errorf("value is %s, want a string", describeValue(v))
	}
	var changed bool
	var err error
	if t.part == "prompt.system" {
		changed, err = setSystem(rec, s)
	} else {
		changed, err = setText(rec, s)
	}
	if changed {
		meta := env.Meta
		*env = envOf(rec)
		env.Meta = meta
	}
	return changed, err
}

// setSystem makes s the content of rec's first system message, putting
// one first when there is none; "" removes it.
func setSystem(rec *record.Record, s string) (bool, error) {
	i := 0
	for i < len(rec.Messages) && rec.Messages[i].Role != "system" {
		i++
	}
	switch {
	case i == len(rec.Messages) && s == "", i < len(rec.Messages) && rec.Messages[i].Content == s:
		return false, nil
	case rec.Completion != nil || rec.Tokens != nil:
		return false, errPromptMade
	case i == len(rec.Messages):
		rec.Messages = append([]record.Message{{Role: "system", Content: s}}, rec.Messages...)
	case s == "":
		rec.Messages = append(rec.Messages[:i:i], rec.Messages[i+1:]...)
	default:
		rec.Messages[i].Content = s
	}
	return true, nil
}

// setText makes s the content of the message prompt.text reads: the last
// user message. When that is a tool's message (a tool result the model
// answers), the record fails: a map does not rewrite what a tool said.
func setText(rec *record.Record, s string) (bool, error) {
	i := len(rec.Messages) - 1
	for i >= 0 && rec.Messages[i].Role != "user" && rec.Messages[i].Role != "tool" {
		i--
	}
	switch {
	case i < 0:
		return false, errors.New("the record has no user message to set")
	case rec.Messages[i].Role == "tool":
		return false, errors.New("prompt.text of this record is a tool's result (its last message before the answer is a tool's): map sets only a user message")
	case rec.Messages[i].Content == s:
		return false, nil
	case rec.Completion != nil || rec.Tokens != nil:
		return false, errPromptMade
	}
	rec.Messages[i].Content = s
	return true, nil
}

// sameValue reports whether a and b are the same JSON value: numbers by
// value (1 set by an expression is the 1.0 a reader gave), the rest deeply.
func sameValue(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// describeValue names v's type in a message: "nil", "int 3", "bool true".
func describeValue(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T %s", v, termsafe.Cut(fmt.Sprint(v), 40))
}

// Report gives the records each assignment changed and those an
// assignment failed.
func (m *mapStage) Report() []figure.Figure {
	out := make([]figure.Figure, 0, len(m.changed)+1)
	for i := range m.changed {
		out = append(out, figure.NewCounter("fields_changed", m.changed[i].Load(), "set", fmt.Sprintf("#%d %s", i+1, m.cfg.Set[i].Field)))
	}
	return append(out, figure.NewCounter("set_errors", m.errors.Load()))
}
