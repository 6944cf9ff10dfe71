package stages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// mapTestEmitter is thinkTestEmitter that keeps failed records too.
type mapTestEmitter struct {
	*thinkTestEmitter
	failed []error
}

func (e *mapTestEmitter) Fail(rec *record.Record, err error, attempts int) error {
	e.failed = append(e.failed, err)
	return nil
}

// openMap validates and opens a map stage of these assignments.
func openMap(t testing.TB, set ...mapAssignment) *mapStage {
	t.Helper()
	cfg := &mapConfig{Set: set}
	if errs := cfg.Validate(); errs != nil {
		t.Fatal(errs)
	}
	p, _ := newMap(cfg)
	m := p.(*mapStage)
	if err := m.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return m
}

// shape runs m over rec and returns what it sent on, failing the test on
// a failed record.
func shape(t *testing.T, m *mapStage, rec *record.Record) *record.Record {
	t.Helper()
	em := &mapTestEmitter{thinkTestEmitter: newThinkTestEmitter()}
	if err := m.Process(context.Background(), rec, em); err != nil {
		t.Fatal(err)
	}
	if len(em.failed) > 0 || len(em.emitted["out"]) != 1 {
		t.Fatalf("%s: failed %v, sent %d", rec.ID, em.failed, len(em.emitted["out"]))
	}
	return em.emitted["out"][0]
}

func prompt(id string, msgs ...string) *record.Record {
	r := &record.Record{ID: id}
	for i := 0; i < len(msgs); i += 2 {
		r.Messages = append(r.Messages, record.Message{Role: msgs[i], Content: msgs[i+1]})
	}
	return r
}

// The assignments run in order, a later one seeing what the earlier ones
// set; when decides whether one runs; each counts the records it changed.
func TestMapOrderAndWhen(t *testing.T) {
	m := openMap(t,
		mapAssignment{Field: "meta.lang", Value: `script(prompt.text)`},
		mapAssignment{Field: "prompt.system", Value: `"Answer in " + meta.lang`, When: `prompt.system == ""`},
		mapAssignment{Field: "meta.long", Value: `len(prompt.text) > 20`},
		mapAssignment{Field: "meta.system_was_set", Value: `prompt.system != "keep me"`},
	)
	en := shape(t, m, prompt("en", "user", "Why is the sky blue?"))
	zh := shape(t, m, prompt("zh", "user", "天空为什么是蓝色的？请详细解释一下瑞利散射的原理。"))
	kept := shape(t, m, prompt("kept", "system", "keep me", "user", "Why is the sky blue at noon and red at dusk?"))

	if want := []record.Message{{Role: "system", Content: "Answer in Latin"}, {Role: "user", Content: "Why is the sky blue?"}}; !reflect.DeepEqual(en.Messages, want) {
		t.Errorf("en: messages %+v, want %+v", en.Messages, want)
	}
	if want := map[string]any{"lang": "Latin", "long": false, "system_was_set": true}; !reflect.DeepEqual(en.Meta, want) {
		t.Errorf("en: meta %v, want %v", en.Meta, want)
	}
	if zh.Messages[0].Content != "Answer in Han" || zh.Meta["long"] != true {
		t.Errorf("zh: %+v %v", zh.Messages, zh.Meta)
	}
	if kept.Messages[0].Content != "keep me" || len(kept.Messages) != 2 || kept.Meta["system_was_set"] != false {
		t.Errorf("kept: when was not false for a record with a system prompt: %+v %v", kept.Messages, kept.Meta)
	}
	for i, want := range []int64{3, 2, 3, 3} {
		if got := m.changed[i].Load(); got != want {
			t.Errorf("set #%d changed %d records, want %d", i+1, got, want)
		}
	}
	if f, ok := figure.Find(m.Report(), "fields_changed", "set", "#2 prompt.system"); !ok || f.Value != 2 {
		t.Errorf("report: %+v", m.Report())
	}
}

// meta.NAME takes every JSON value, nil removes it, and setting a field
// to the value it has changes nothing.
func TestMapMetaValues(t *testing.T) {
	m := openMap(t,
		mapAssignment{Field: "meta.s", Value: `"x" + id`},
		mapAssignment{Field: "meta.i", Value: `len(prompt.text)`},
		mapAssignment{Field: "meta.f", Value: `len(prompt.text) / 2`},
		mapAssignment{Field: "meta.b", Value: `prompt.turns > 1`},
		mapAssignment{Field: "meta.list", Value: `["a", 1, true, map(prompt.messages, .role)]`},
		mapAssignment{Field: "meta.map", Value: `{"n": 1, "tags": ["t"], "source": meta.source}`},
		mapAssignment{Field: "meta.range", Value: `1..3`},
		mapAssignment{Field: "meta.source", Value: `nil`},
		mapAssignment{Field: "meta.same", Value: `1`},
	)
	r := prompt("r1", "user", "hello")
	r.Meta = map[string]any{"source": "forum", "same": 1.0}
	got := shape(t, m, r).Meta
	want := map[string]any{
		"s": "xr1", "i": 5, "f": 2.5, "b": false,
		"list":  []any{"a", 1, true, []any{"user"}},
		"map":   map[string]any{"n": 1, "tags": []any{"t"}, "source": "forum"},
		"range": []int{1, 2, 3},
		"same":  1.0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("meta\n got %#v\nwant %#v", got, want)
	}
	for i, want := range []int64{1, 1, 1, 1, 1, 1, 1, 1, 0} {
		if got := m.changed[i].Load(); got != want {
			t.Errorf("set #%d (%s) changed %d records, want %d", i+1, m.cfg.Set[i].Field, got, want)
		}
	}

	// A record without meta gets one only when an assignment sets it.
	none := openMap(t, mapAssignment{Field: "meta.gone", Value: `nil`})
	if got := shape(t, none, prompt("r2", "user", "hi")); got.Meta != nil {
		t.Errorf("meta %v made for a record that had none", got.Meta)
	}
}

// prompt.system is the first system message: put first when absent,
// removed by "", replaced in place otherwise; prompt.text is the last user
// message.
func TestMapPrompt(t *testing.T) {
	system := openMap(t, mapAssignment{Field: "prompt.system", Value: `meta.system`})
	for _, c := range []struct {
		in     *record.Record
		system string
		want   []string
	}{
		{prompt("insert", "user", "q"), "be brief", []string{"system", "be brief", "user", "q"}},
		{prompt("replace", "system", "old", "user", "q"), "be brief", []string{"system", "be brief", "user", "q"}},
		{prompt("remove", "system", "old", "user", "q", "assistant", "a", "user", "q2"), "", []string{"user", "q", "assistant", "a", "user", "q2"}},
		{prompt("absent", "user", "q"), "", []string{"user", "q"}},
	} {
		c.in.Meta = map[string]any{"system": c.system}
		got := shape(t, system, c.in)
		var flat []string
		for _, m := range got.Messages {
			flat = append(flat, m.Role, m.Content)
		}
		if !reflect.DeepEqual(flat, c.want) {
			t.Errorf("%s: %q, want %q", c.in.ID, flat, c.want)
		}
	}
	if got := system.changed[0].Load(); got != 3 {
		t.Errorf("%d records changed, want 3 (not the one without a system message set to \"\")", got)
	}

	text := openMap(t,
		mapAssignment{Field: "prompt.text", Value: `trim(prompt.text) + " Think step by step."`},
		mapAssignment{Field: "meta.seen", Value: `prompt.text`},
	)
	got := shape(t, text, prompt("t", "user", "first", "assistant", "a", "user", " 2+2? "))
	if got.Messages[0].Content != "first" || got.Messages[2].Content != "2+2? Think step by step." || got.Meta["seen"] != "2+2? Think step by step." {
		t.Errorf("%+v %v", got.Messages, got.Meta)
	}
}

// pipe check's judgement of assignments: each problem names the
// assignment and says what may be set or what the record has.
func TestMapProblems(t *testing.T) {
	for _, c := range []struct {
		a    mapAssignment
		want string
	}{
		{mapAssignment{Field: "id", Value: `"x"`}, `#1 (id): the id never changes: exactly-once accounting keys on it; map sets meta.NAME, prompt.system, prompt.text`},
		{mapAssignment{Field: "completion.answer", Value: `"x"`}, `#1 (completion.answer): the completion and the training row are what generate and tokenize-and-mask made, not the map's to change; map sets`},
		{mapAssignment{Field: "row.tokens", Value: `1`}, `not the map's to change`},
		{mapAssignment{Field: "prompt.turns", Value: `1`}, `prompt.turns cannot be set; map sets meta.NAME, prompt.system, prompt.text`},
		{mapAssignment{Field: "promt.system", Value: `"x"`}, `unknown field "promt.system" (did you mean "prompt.system"?); map sets`},
		{mapAssignment{Field: "mta.lang", Value: `"x"`}, `unknown field "mta.lang" (did you mean "meta.lang"?)`},
		{mapAssignment{Field: "system", Value: `"x"`}, `unknown field "system" (did you mean "prompt.system"?)`},
		{mapAssignment{Field: "meta.a.b", Value: `1`}, `"a.b" is not a meta field's name`},
		{mapAssignment{Field: "meta.1x", Value: `1`}, `"1x" is not a meta field's name`},
		{mapAssignment{Field: "prompt.system", Value: `len(prompt.text)`}, `#1 (prompt.system): value: expected string, but got int`},
		{mapAssignment{Field: "prompt.text", Value: `prompt.turns > 1`}, `value: expected string, but got bool`},
		{mapAssignment{Field: "prompt.system", Value: `"x"`, When: `prompt.text`}, `#1 (prompt.system): when: expected bool, but got string`},
		{mapAssignment{Field: "meta.p", Value: `prompt`}, `value: a meta field holds a string, number, bool, list or map, not prompt`},
		{mapAssignment{Field: "meta.p", Value: `prompt.messages`}, `not a message`},
		{mapAssignment{Field: "meta.lang", Value: `script(prompt.txt)`}, "value: prompt has no field txt (did you mean \"text\"?) (1:15)\n | script(prompt.txt)\n | ..............^"},
		{mapAssignment{Field: "meta.x", Value: `1`, When: `completion.finsh_reason == "length"`}, `when: completion has no field finsh_reason (did you mean "finish_reason"?)`},
		{mapAssignment{Field: "meta.n", Value: `tokens(prompt.text)`}, `#1 (meta.n): tokens() needs tokenizer = MODEL_DIR`},
	} {
		errs := (&mapConfig{Set: mapAssignments{c.a}}).Validate()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.a, errs, c.want)
		}
	}
	// Every problem at once, each at its assignment.
	errs := (&mapConfig{Set: mapAssignments{{Field: "id", Value: `"x"`}, {Field: "meta.ok", Value: `1`}, {Field: "prompt.text", Value: `1`}}}).Validate()
	if len(errs) != 2 || !strings.HasPrefix(errs[0].Error(), "set: #1 (id)") || !strings.HasPrefix(errs[1].Error(), "set: #3 (prompt.text)") {
		t.Errorf("%v", errs)
	}

	for _, c := range []struct {
		raw  any
		want string
	}{
		{[]any{}, "at least one assignment"},
		{"meta.x = 1", "must be an array"},
		{[]any{"meta.x"}, "#1: must be a table"},
		{[]any{map[string]any{"value": "1"}}, "#1: field is missing"},
		{[]any{map[string]any{"field": "meta.x"}}, "#1 (meta.x): value is missing"},
		{[]any{map[string]any{"field": "meta.x", "value": 1}}, "#1: value must be a string"},
		{[]any{map[string]any{"field": "meta.x", "value": "1", "wen": "true"}}, `#1: unknown key "wen" (want field, value and optionally when) (did you mean "when"?)`},
		{[]any{map[string]any{"field": "meta.x", "value": "1", "when": " "}}, "when is blank"},
	} {
		var s mapAssignments
		if err := s.DecodeConfig(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.raw, err, c.want)
		}
	}
}

// What only the record can tell fails that record, naming the
// assignment: a prompt already generated from, a value of the wrong type
// or that is no JSON value, an expression that errs, a prompt.text that is
// a tool's result. The others go on.
func TestMapRunTimeErrors(t *testing.T) {
	m := openMap(t,
		mapAssignment{Field: "meta.first", Value: `meta.n`},
		mapAssignment{Field: "prompt.system", Value: `meta.system`, When: `meta.set_system`},
		mapAssignment{Field: "meta.ratio", Value: `meta.n / meta.d`, When: `meta.d != nil`},
		mapAssignment{Field: "prompt.text", Value: `prompt.text + "!"`, When: `meta.set_text`},
	)
	generated := prompt("generated", "user", "q")
	generated.Completion = &record.Completion{Answer: "a", FinishReason: "stop"}
	generated.Meta = map[string]any{"set_system": true, "system": "be brief"}
	unchanged := prompt("unchanged", "system", "be brief", "user", "q")
	unchanged.Completion = &record.Completion{Answer: "a", FinishReason: "stop"}
	unchanged.Meta = map[string]any{"set_system": true, "system": "be brief"}
	row := prompt("row", "user", "q")
	row.Tokens = &record.Tokens{NumTokens: 3}
	row.Meta = map[string]any{"set_text": true}
	notString := prompt("not_string", "user", "q")
	notString.Meta = map[string]any{"set_system": true, "system": 3}
	missing := prompt("missing", "user", "q")
	missing.Meta = map[string]any{"set_system": true}
	badDiv := prompt("bad_div", "user", "q")
	badDiv.Meta = map[string]any{"n": "x", "d": 2}
	tool := prompt("tool", "user", "q", "assistant", "", "tool", "42")
	tool.Meta = map[string]any{"set_text": true}
	badWhen := prompt("bad_when", "user", "q")
	badWhen.Meta = map[string]any{"set_system": "yes"}
	notJSON := prompt("not_json", "user", "q")
	notJSON.Meta = map[string]any{"n": struct{ A int }{1}}

	for _, c := range []struct {
		rec  *record.Record
		want string // "" goes on
	}{
		{generated, "set #2 (prompt.system): the record has a completion or a training row: the prompt it was made from cannot change (set the prompt before generate)"},
		{unchanged, ""},
		{row, "set #4 (prompt.text): the record has a completion or a training row"},
		{notString, "set #2 (prompt.system): value is int 3, want a string"},
		{missing, "set #2 (prompt.system): value is nil, want a string"},
		{badDiv, "set #3 (meta.ratio): value: invalid operation: string / int (1:8)\n | meta.n / meta.d\n | .......^"},
		{tool, "set #4 (prompt.text): prompt.text of this record is a tool's result"},
		{badWhen, "set #2 (prompt.system): when: invalid operation: bool(string)"},
		{notJSON, "set #1 (meta.first): a meta field holds a string, number, bool, list or map, not struct { A int }"},
	} {
		em := &mapTestEmitter{thinkTestEmitter: newThinkTestEmitter()}
		if err := m.Process(context.Background(), c.rec, em); err != nil {
			t.Fatal(err)
		}
		switch {
		case c.want == "" && (len(em.failed) > 0 || len(em.emitted["out"]) != 1):
			t.Errorf("%s: failed %v, want it sent on", c.rec.ID, em.failed)
		case c.want != "" && (len(em.failed) != 1 || len(em.emitted["out"]) != 0):
			t.Errorf("%s: failed %v and sent %d, want it failed with %q", c.rec.ID, em.failed, len(em.emitted["out"]), c.want)
		case c.want != "" && !strings.Contains(em.failed[0].Error(), c.want):
			t.Errorf("%s: %v, want %q", c.rec.ID, em.failed[0], c.want)
		}
	}
	if len(generated.Messages) != 1 || len(row.Messages) != 1 || row.Messages[0].Content != "q" {
		t.Errorf("a made prompt changed: %+v %+v", generated.Messages, row.Messages)
	}
	if got := m.errors.Load(); got != 8 {
		t.Errorf("%d errors counted, want 8", got)
	}
}

const mapPipeline = `
[pipeline]
name    = "map"
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id      = "shape"
kind    = "map"
input   = "prompts"
workers = %d
set = [
  {field = "meta.lang",     value = 'script(prompt.text)'},
  {field = "prompt.system", value = %s, when = 'prompt.system == ""'},
  {field = "meta.long",     value = 'len(prompt.text) > 30'},
]

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "shape"
path  = "out.jsonl"
`

func mapPrompts() string {
	var lines strings.Builder
	for i := range 40 {
		text := "Why is the sky blue?"
		if i%4 == 0 {
			text = "天空为什么是蓝色的？请详细解释瑞利散射的原理和日落时天空为什么变红。"
		}
		fmt.Fprintf(&lines, `{"id":"p%02d","prompt":%q,"source":"s%d"}`+"\n", i, text, i%2)
	}
	return lines.String()
}

// A map in a run, with workers in parallel: every record is shaped and
// written, and the run's figures count the changes.
func TestMapInAPipeline(t *testing.T) {
	dir, sum, err := runTestPipeline(t, fmt.Sprintf(mapPipeline, 4, `'"Answer in " + meta.lang'`), map[string]string{"p.jsonl": mapPrompts()})
	if err != nil {
		t.Fatal(err)
	}
	out := readRecords(t, filepath.Join(dir, "out.jsonl"))
	if len(out) != 40 {
		t.Fatalf("%d records written, want 40", len(out))
	}
	for _, r := range out {
		lang := map[bool]string{true: "Han", false: "Latin"}[strings.HasPrefix(r.Messages[1].Content, "天")]
		if r.Meta["lang"] != lang || r.Meta["long"] != (lang == "Han") || r.Meta["source"] == nil ||
			r.Messages[0].Role != "system" || r.Messages[0].Content != "Answer in "+lang {
			t.Fatalf("%s: %+v %v", r.ID, r.Messages, r.Meta)
		}
	}
	st := stageSummary(t, sum, "shape")
	if st.In != 40 || st.Out != 40 || st.Failed != 0 {
		t.Fatalf("shape: %+v", st.StageCounts)
	}
	for set, want := range map[string]float64{"#1 meta.lang": 40, "#2 prompt.system": 40, "#3 meta.long": 40} {
		if f, ok := figure.Find(st.Figures, "fields_changed", "set", set); !ok || f.Value != want {
			t.Errorf("%s: %+v, want %v changed", set, f, want)
		}
	}
}

// The assignments define the data: a resumed run whose assignments
// changed is refused like any other data-defining change, while the
// workers (how the run goes) may change.
func TestMapSettingsDefineTheRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.jsonl"), []byte(mapPrompts()), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func(workers int, system string) *pipeline.Plan {
		t.Helper()
		path := filepath.Join(dir, "p.toml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf(mapPipeline, workers, system)), 0o644); err != nil {
			t.Fatal(err)
		}
		f, probs := pipefile.Load(path, pipefile.Options{})
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		p, probs := pipeline.Build(f, pipeline.DefaultRegistry)
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		return p
	}
	first := plan(1, `'"Answer in " + meta.lang'`)
	if _, _, err := rundir.Check(first.File.RunDir, first, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Run(context.Background(), first, engine.Options{}); err != nil {
		t.Fatal(err)
	}

	again := plan(2, `'"Answer in " + meta.lang'`)
	if _, diffs, err := rundir.Check(again.File.RunDir, again, false, nil); err != nil || len(diffs) > 0 {
		t.Fatalf("the same assignments with other workers: %v %v", diffs, err)
	}
	changed := plan(2, `'"Reply in " + meta.lang'`)
	_, diffs, err := rundir.Check(changed.File.RunDir, changed, false, nil)
	var cc *rundir.ConfigChangedError
	if !errors.As(err, &cc) || len(diffs) != 1 || !strings.HasPrefix(diffs[0], "shape.set: ") || !strings.Contains(diffs[0], "Reply in") {
		t.Fatalf("changed assignments: %v %v, want a refusal naming shape.set", diffs, err)
	}
}

// BenchmarkMap shapes a record by three assignments (a script, a
// conditional system prompt built from it, a length flag): go test
// -bench Map ./stages. One record's Process is one core's work.
func BenchmarkMap(b *testing.B) {
	m := openMap(b,
		mapAssignment{Field: "meta.lang", Value: `script(prompt.text)`},
		mapAssignment{Field: "prompt.system", Value: `"Answer in " + meta.lang`, When: `prompt.system == ""`},
		mapAssignment{Field: "meta.long", Value: `len(prompt.text) > 2000`},
	)
	text := strings.Repeat("Why is the sky blue at noon and red at dusk? ", 10)
	em := newThinkTestEmitter()
	b.ReportAllocs()
	for b.Loop() {
		r := &record.Record{ID: "a", Messages: []record.Message{{Role: "user", Content: text}}}
		em.emitted["out"] = em.emitted["out"][:0]
		if err := m.Process(context.Background(), r, em); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// stoppingEmitter is an emitter of a run that is stopping.
type stoppingEmitter struct{ *thinkTestEmitter }

var errStopping = errors.New("stopping")

func (stoppingEmitter) Emit(string, *record.Record) error     { return errStopping }
func (stoppingEmitter) Fail(*record.Record, error, int) error { return errStopping }

// A stop in the middle: Process returns the emitter's error, from a
// record sent on and from one failed, so the stage ends with the run.
func TestMapStopsWithTheRun(t *testing.T) {
	m := openMap(t, mapAssignment{Field: "prompt.system", Value: `meta.system`})
	ok, bad := prompt("ok", "user", "q"), prompt("bad", "user", "q")
	ok.Meta, bad.Meta = map[string]any{"system": "s"}, map[string]any{"system": 1}
	for _, r := range []*record.Record{ok, bad} {
		if err := m.Process(context.Background(), r, stoppingEmitter{newThinkTestEmitter()}); !errors.Is(err, errStopping) {
			t.Errorf("%s: %v, want the emitter's error", r.ID, err)
		}
	}
}
