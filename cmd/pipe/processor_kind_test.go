package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// A processor kind is one file: reject-long-answers below is a whole
// processor (registration, a config whose tags state each key's default,
// range, allowed values and doc, a constructor that judges what only it
// can, parallel processing with a reason code, a figure of its own),
// registered from this test alone. pipe stages documents it, pipe check
// checks a pipeline using it and its example (each problem at its
// file:line:col), the dry run and pipe graph show it with its settings,
// pipe run runs it against the simulator, the run's summary, status.json,
// pipe status, the metrics, inspect and report count it and show its
// figure, a replay from it (--from) reads what it sent on back from the
// writer it fed, and a resume records its keys in run.json (a data key's
// change refused, an operational one's taken): issue 23's "a new processor
// kind needs one new file plus its test".
func TestNewProcessorKindNeedsNoOtherFile(t *testing.T) {
	registerLongAnswers()
	dir := t.TempDir()
	var prompts strings.Builder
	const n = 24
	for i := range n {
		fmt.Fprintf(&prompts, `{"id":"p%02d","prompt":"Question %d: say something"}`+"\n", i, i)
	}
	writeFile(t, filepath.Join(dir, "p.jsonl"), prompts.String())
	const pipelineFile = `[pipeline]
name    = "cut"
run_dir = "runs/cut"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["sim:1?speed=5000&think_mean=10&answer_mean=40"]
api               = "chat"
max_output_tokens = 1024

[[stage]]
id    = "cut"
kind  = "reject-long-answers"
input = "gen"
max   = %d
unit  = "words"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "cut"
path  = "out/rows.jsonl"
`
	const maxWords = 30
	writeFile(t, filepath.Join(dir, "cut.toml"), fmt.Sprintf(pipelineFile, maxWords))
	t.Chdir(dir)
	// run2 runs a command and returns its stdout and stderr; stdout
	// returns the first alone, pipe both.
	run2 := func(want int, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, &stdio{Out: &out, Err: &errb, Signals: make(chan os.Signal)}); code != want {
			t.Fatalf("pipe %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	stdout := func(want int, args ...string) string {
		t.Helper()
		out, _ := run2(want, args...)
		return out
	}
	pipe := func(want int, args ...string) string {
		t.Helper()
		out, errs := run2(want, args...)
		return out + errs
	}

	// pipe stages: listed with its summary; documented from its tags.
	if out := pipe(0, "stages"); !regexp.MustCompile(`(?m)^reject-long-answers +reject completions whose answer is longer than max`).MatchString(out) {
		t.Errorf("pipe stages does not list the kind:\n%s", out)
	}
	doc := pipe(0, "stages", "reject-long-answers")
	for _, re := range []string{
		`(?m)^outputs: +out, rejected`,
		`(?m)^needs: +completion`,
		`(?m)^  max +integer +400 +>= 1 +the longest answer kept, in unit$`,
		`(?m)^  unit +string +"runes" +runes \| bytes \| words +what max counts$`,
		`(?m)^  reason +string +"answer_too_long" +- +the reason code of a rejection$`,
		`(?m)^  workers +integer +2 +>= 1 +records checked at once$`,
		`kind += "reject-long-answers"`, // the example
	} {
		if !regexp.MustCompile(re).MatchString(doc) {
			t.Errorf("pipe stages reject-long-answers lacks %s:\n%s", re, doc)
		}
	}

	// pipe check: the pipeline, and the kind's own example, pass; bad
	// values are reported at their key, the constructor's judgement too.
	pipe(0, "check", "cut.toml")
	spec := pipeline.DefaultRegistry.Lookup("reject-long-answers")
	if got := spec.OperationalKeys(); len(got) != 1 || got[0] != "workers" {
		t.Errorf("operational keys %q, want workers alone", got)
	}
	writeFile(t, "example.toml", "[pipeline]\nname = \"example\"\nrun_dir = \"runs/example\"\n\n"+spec.Example)
	writeFile(t, "completions.jsonl", "")
	pipe(0, "check", "example.toml")
	bad := strings.NewReplacer("max   = 30", "max   = 0", `unit  = "words"`, "unit  = \"lines\"\nmaxx = 3").
		Replace(fmt.Sprintf(pipelineFile, maxWords))
	writeFile(t, "bad.toml", bad)
	out := pipe(2, "check", "bad.toml")
	for _, want := range []string{
		`bad.toml:22:1: stage "cut" (reject-long-answers): max must be >= 1, got 0`,
		`bad.toml:23:1: stage "cut" (reject-long-answers): unit must be one of "runes", "bytes", "words", got "lines"`,
		`bad.toml:24:1: stage "cut" (reject-long-answers): unknown key "maxx" (did you mean "max"?); reject-long-answers takes: max, unit, reason, workers`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pipe check of bad values lacks %q:\n%s", want, out)
		}
	}
	writeFile(t, "bad2.toml", strings.Replace(fmt.Sprintf(pipelineFile, maxWords), `unit  = "words"`, "unit  = \"words\"\nreason = \"Too Long\"", 1))
	if out := pipe(2, "check", "bad2.toml"); !strings.Contains(out, `bad2.toml:24:1: stage "cut" (reject-long-answers): reason "Too Long": lower case letters, digits and _`) {
		t.Errorf("pipe check does not report the constructor's judgement at its key:\n%s", out)
	}

	// The dry run and pipe graph: the stage, its kind and its settings.
	if out := pipe(0, "run", "--dry-run", "cut.toml"); !regexp.MustCompile(`cut +reject-long-answers +≤ 30 words\n +└ out → rows\n +└ rejected → RUN_DIR/rejected/cut.jsonl`).MatchString(out) {
		t.Errorf("the dry run does not show the stage with its settings:\n%s", out)
	}
	if out := pipe(0, "graph", "cut.toml"); !regexp.MustCompile(`cut +reject-long-answers +≤ 30 words`).MatchString(out) || !strings.Contains(out, "gen") {
		t.Errorf("pipe graph:\n%s", out)
	}
	if out := pipe(0, "graph", "--format", "mermaid", "cut.toml"); !strings.Contains(out, "reject-long-answers") || !strings.Contains(out, "≤ 30 words") {
		t.Errorf("pipe graph --format mermaid:\n%s", out)
	}

	// pipe run: every answer kept is at most 30 words, every one rejected
	// longer, with the kind's reason; some of each. The summary counts the
	// stage and shows its figure.
	summary := pipe(0, "run", "cut.toml")
	kept := readLines(t, filepath.Join("out", "rows.jsonl"))
	rejected := readLines(t, filepath.Join("runs", "cut", "rejected", "cut.jsonl"))
	if len(kept) == 0 || len(rejected) == 0 || len(kept)+len(rejected) != n {
		t.Fatalf("%d rows kept and %d rejected, want some of each and %d in all", len(kept), len(rejected), n)
	}
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^  cut +reject-long-answers +%d +%d +%d +0 +0 +yes$`, n, len(kept), len(rejected))).MatchString(summary) ||
		!strings.Contains(summary, fmt.Sprintf("rejected by cut: answer_too_long %d", len(rejected))) || !regexp.MustCompile(`(?m)^cut: longest answer \d+`).MatchString(summary) {
		t.Errorf("the run's summary does not count the stage or show its figure:\n%s", summary)
	}
	for _, line := range kept {
		if w := answerWords(t, line); w > maxWords {
			t.Errorf("kept a %d-word answer: %s", w, line)
		}
	}
	for _, line := range rejected {
		var rec struct{ Reject *record.Rejection }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if w := answerWords(t, line); w <= maxWords || rec.Reject == nil || rec.Reject.Stage != "cut" || rec.Reject.Reason != "answer_too_long" ||
			rec.Reject.Detail != fmt.Sprintf("%d words > 30", w) {
			t.Errorf("rejected a %d-word answer as %+v", w, rec.Reject)
		}
	}

	// status.json (through its one type), pipe status, inspect and report
	// count the stage: in = out + rejected, by reason, with its figure.
	st, err := rundir.ReadStatus[json.RawMessage](filepath.Join("runs", "cut"))
	if err != nil || st == nil {
		t.Fatalf("status.json: %v, %v", st, err)
	}
	var cut *rundir.Stage
	for i := range st.Stages {
		if st.Stages[i].ID == "cut" {
			cut = &st.Stages[i]
		}
	}
	if cut == nil || cut.Kind != "reject-long-answers" || cut.In != n || cut.Out != int64(len(kept)) || cut.Rejected != int64(len(rejected)) ||
		cut.Reasons["answer_too_long"] != int64(len(rejected)) {
		t.Fatalf("status.json's stage cut: %+v", cut)
	}
	if f, ok := figure.Find(cut.Figures, "longest_answer"); !ok || f.Unit != "words" || f.Value <= maxWords {
		t.Errorf("status.json: the stage's figure longest_answer: %+v, %v", f, ok)
	}
	counts := fmt.Sprintf(`cut +reject-long-answers +in %d +out %d .*rejected %d = \d+%% \(answer_too_long`, n, len(kept), len(rejected))
	if out := pipe(0, "status", filepath.Join("runs", "cut")); !regexp.MustCompile(counts).MatchString(out) {
		t.Errorf("pipe status lacks %s:\n%s", counts, out)
	}
	table := fmt.Sprintf(`(?m)^  cut +reject-long-answers +%d +%d +%d +0 +0`, n, len(kept), len(rejected))
	if out := pipe(0, "inspect", filepath.Join("runs", "cut")); !regexp.MustCompile(table).MatchString(out) ||
		!strings.Contains(out, fmt.Sprintf("cut.jsonl: %d lines, %d committed", len(rejected), len(rejected))) {
		t.Errorf("pipe inspect lacks the stage's counts (%s) or its rejects:\n%s", table, out)
	}
	// The metrics endpoint (pipe run --metrics-addr) serves what status.json
	// holds: here the finished run's, read back typed.
	m, err := startMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	typed, err := readStatus(filepath.Join("runs", "cut"))
	if err != nil {
		t.Fatal(err)
	}
	m.set(typed.Doc.State, &typed.Doc.Live)
	resp, err := http.Get("http://" + m.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`pipe_reject_long_answers_longest_answer{stage="cut"} `,
		fmt.Sprintf(`pipe_stage_records_total{kind="reject-long-answers",outcome="rejected",stage="cut"} %d`, len(rejected)),
		fmt.Sprintf(`pipe_stage_rejected_by_reason_total{reason="answer_too_long",stage="cut"} %d`, len(rejected)),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	var ins inspectDoc
	if err := json.Unmarshal([]byte(stdout(0, "inspect", "--json", filepath.Join("runs", "cut"))), &ins); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range ins.Run.Stages {
		found = found || s.ID == "cut" && s.Kind == "reject-long-answers" && s.Rejected == int64(len(rejected))
	}
	if !found || len(ins.Run.Rejected) != 1 || ins.Run.Rejected[0].Lines != int64(len(rejected)) {
		t.Errorf("inspect: stages %+v, rejected %+v", ins.Run.Stages, ins.Run.Rejected)
	}
	var rep runreport.Report
	if err := json.Unmarshal([]byte(stdout(0, "report", "--json", filepath.Join("runs", "cut"))), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rejected) != 1 || rep.Rejected[0] != (runreport.Reason{Stage: "cut", Reason: "answer_too_long", Count: int64(len(rejected))}) {
		t.Errorf("report: rejected %+v", rep.Rejected)
	}

	// A replay from the stage (--from): what it sent on is read back from
	// the writer it fed alone.
	if out := pipe(0, "run", "--dry-run", "--from", "cut="+filepath.Join("runs", "cut"), "cut.toml"); !strings.Contains(out, "rows.jsonl (written by rows)") {
		t.Errorf("a replay from cut does not read the output it fed:\n%s", out)
	}

	// A resume: its keys are in run.json's settings; a data key's change
	// is refused, naming it, an operational key's (workers) is taken.
	run, err := rundir.ReadRun(filepath.Join("runs", "cut"))
	if err != nil || run == nil {
		t.Fatal(run, err)
	}
	if s, _ := run.Settings["cut"].(map[string]any); s["kind"] != "reject-long-answers" || fmt.Sprint(s["max"]) != "30" || s["reason"] != "answer_too_long" {
		t.Errorf("run.json's settings of cut: %v", run.Settings["cut"])
	}
	writeFile(t, "cut.toml", fmt.Sprintf(pipelineFile, maxWords+10))
	if out := pipe(2, "run", "cut.toml"); !strings.Contains(out, "cut.max: 30 → 40") {
		t.Errorf("a resume with another max:\n%s", out)
	}
	writeFile(t, "cut.toml", strings.Replace(fmt.Sprintf(pipelineFile, maxWords), `unit  = "words"`, "unit  = \"words\"\nworkers = 5", 1))
	if out := pipe(0, "run", "cut.toml"); !strings.Contains(out, "this is start 2") ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^  cut +reject-long-answers +%d +%d +%d +0 +0 +yes$`, n, len(kept), len(rejected))).MatchString(out) {
		t.Errorf("a resume with other workers:\n%s", out)
	}
}

func answerWords(t *testing.T, line string) int {
	t.Helper()
	var rec struct{ Completion *record.Completion }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Completion == nil {
		t.Fatalf("%v: %s", err, line)
	}
	return len(strings.Fields(rec.Completion.Answer))
}

// ---- reject-long-answers: a whole processor kind, as a stage file would hold it ----

var longAnswersOnce sync.Once

func registerLongAnswers() {
	longAnswersOnce.Do(func() {
		pipeline.Register(pipeline.Spec{
			Kind:    "reject-long-answers",
			Summary: "reject completions whose answer is longer than max (a test's processor)",
			Description: `Counts each completion's answer in runes, bytes or words and sends it on,
or, when it is longer than max, to "rejected" with the reason code (a
record without a completion too).`,
			Outputs: []string{"out", pipeline.RejectedPort},
			Needs:   []string{record.FieldCompletion},
			KeySettings: pipeline.SettingsFor(func(c *longAnswersConfig) string {
				return fmt.Sprintf("≤ %d %s", c.Max, c.Unit)
			}),
			Example: `[[stage]]
id   = "completions"
kind = "read-completions"
path = "completions.jsonl"

[[stage]]
id    = "short"
kind  = "reject-long-answers"
input = "completions"
max   = 2000
unit  = "bytes"

[[stage]]
id    = "rows"
kind  = "write-jsonl"
input = "short"
path  = "out/short.jsonl"
`,
			New: pipeline.NewProcessor(newLongAnswers),
		})
	})
}

// longAnswersConfig: each key says whether a resume may change it (op),
// as stages/operational_keys_test.go asks of a kind it does not pin.
type longAnswersConfig struct {
	Max     int    `toml:"max" default:"400" min:"1" op:"false" doc:"the longest answer kept, in unit"`
	Unit    string `toml:"unit" default:"runes" enum:"runes|bytes|words" op:"false" doc:"what max counts"`
	Reason  string `toml:"reason" default:"answer_too_long" op:"false" doc:"the reason code of a rejection"`
	Workers int    `toml:"workers" default:"2" min:"1" op:"true" doc:"records checked at once"`
}

var reasonCode = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// newLongAnswers has no side effects: pipe check calls it.
func newLongAnswers(c *longAnswersConfig) (pipeline.Processor, error) {
	if !reasonCode.MatchString(c.Reason) {
		return nil, &config.FieldError{Key: "reason", Msg: fmt.Sprintf("%q: lower case letters, digits and _, as the other reason codes", c.Reason)}
	}
	return &longAnswers{cfg: *c}, nil
}

type longAnswers struct {
	cfg     longAnswersConfig
	longest atomic.Int64
}

func (l *longAnswers) Workers() int { return l.cfg.Workers }

func (l *longAnswers) Process(_ context.Context, rec *record.Record, out pipeline.Emitter) error {
	if rec.Completion == nil {
		return out.Reject(rec, l.cfg.Reason, "no completion")
	}
	a := rec.Completion.Answer
	n := int64(len(a))
	switch l.cfg.Unit {
	case "runes":
		n = int64(utf8.RuneCountInString(a))
	case "words":
		n = int64(len(strings.Fields(a)))
	}
	for {
		m := l.longest.Load()
		if n <= m || l.longest.CompareAndSwap(m, n) {
			break
		}
	}
	if n > int64(l.cfg.Max) {
		return out.Reject(rec, l.cfg.Reason, fmt.Sprintf("%d %s > %d", n, l.cfg.Unit, l.cfg.Max))
	}
	return out.Emit("", rec)
}

// Report is the longest answer seen, in its unit.
func (l *longAnswers) Report() []figure.Figure {
	f := figure.NewGauge("longest_answer", float64(l.longest.Load()))
	f.Unit = l.cfg.Unit
	return []figure.Figure{f}
}
