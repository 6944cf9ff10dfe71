package stages

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// runTestPipeline writes src as DIR/p.toml beside files (name → content),
// checks it like pipe check and runs it.
func runTestPipeline(t *testing.T, src string, files map[string]string) (string, *engine.Summary, error) {
	t.Helper()
	return runTestPipelineWith(t, context.Background(), src, files, engine.Options{})
}

// runTestPipelineWith is runTestPipeline with a context and run options.
func runTestPipelineWith(t *testing.T, ctx context.Context, src string, files map[string]string, opts engine.Options) (string, *engine.Summary, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	f, probs := pipefile.Load(path, pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	probs = append(probs, plan.CheckOutputs()...)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	sum, err := engine.Run(ctx, plan, opts)
	return dir, sum, err
}

// readRecords reads a JSONL file of records.
func readRecords(t *testing.T, path string) []*record.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*record.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r record.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, &r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func stageSummary(t *testing.T, sum *engine.Summary, id string) engine.StageSummary {
	t.Helper()
	for _, s := range sum.Stages {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no stage %q in summary", id)
	return engine.StageSummary{}
}

const readCompletionsPipeline = `
[[stage]]
id          = "in"
kind        = "read-completions"
path        = "c.jsonl"
on_bad_line = "%s"

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "in"
path  = "out/good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "in.rejected"
path  = "out/bad.jsonl"
`

func completionLine(t *testing.T, rec *record.Record) string {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadCompletions(t *testing.T) {
	good := completionRecord(goodCompletion())
	good.Completion.OutputIDs = []int{151667, 198, 151668, 271, 9454, 13, 151645}
	good.Meta = map[string]any{"source": "run-7"}
	wasRejected := completionRecord(goodCompletion())
	wasRejected.ID = "q-0002"
	wasRejected.Completion.Answer = ""
	wasRejected.Reject = &record.Rejection{Stage: "check", Reason: "empty_answer", Detail: "answer is empty"}
	lines := []string{
		completionLine(t, good),
		"",
		`{"id": "q-0003", "messages": [{"role": "user", "content": "hi"}], "completion": {"answer": "hello", "finish_reason": "stop"`, // torn tail of a killed writer
		`{"id": "q-0004", "messages": [{"role": "user", "content": "hi"}]}`,
		`{"messages": [{"role": "user", "content": "hi"}], "completion": {"answer": "hello"}}`,
		`{"id": "q-0006", "completion": {"answer": "hello", "output_ids": "1 2 3"}}`,
		`["not", "a", "record"]`,
		completionLine(t, wasRejected),
	}
	files := map[string]string{"c.jsonl": strings.Join(lines, "\n") + "\n"}

	t.Run("skip", func(t *testing.T) {
		dir, sum, err := runTestPipeline(t, strings.Replace(readCompletionsPipeline, "%s", "skip", 1), files)
		if err != nil {
			t.Fatal(err)
		}
		s := stageSummary(t, sum, "in")
		if s.In != 7 || s.Out != 2 || s.Rejected != 5 || s.Reasons["bad_line"] != 5 {
			t.Fatalf("in %d out %d rejected %d reasons %v; want 7 = 2 + 5 bad lines", s.In, s.Out, s.Rejected, s.Reasons)
		}
		got := readRecords(t, filepath.Join(dir, "out/good.jsonl"))
		if len(got) != 2 {
			t.Fatalf("%d records out, want 2", len(got))
		}
		if got[0].ID != "q-0001" || got[0].Completion.Answer != goodAnswer || len(got[0].Completion.OutputIDs) != 7 || got[0].Meta["source"] != "run-7" {
			t.Errorf("record not read back whole: %+v", got[0])
		}
		if got[1].Reject != nil || got[1].Meta["previous_reject"] == nil {
			t.Errorf("earlier rejection not moved to meta.previous_reject: reject %+v meta %v", got[1].Reject, got[1].Meta)
		}
		bad := readRecords(t, filepath.Join(dir, "out/bad.jsonl"))
		wantDetail := []string{"c.jsonl:3: invalid JSON", `c.jsonl:4: no "completion"`, `c.jsonl:5: no "id"`,
			`c.jsonl:6: field "completion.output_ids" must be []int, got JSON string`, "c.jsonl:7: not a JSON object"}
		if len(bad) != len(wantDetail) {
			t.Fatalf("%d bad lines, want %d", len(bad), len(wantDetail))
		}
		for i, w := range wantDetail {
			if !strings.Contains(bad[i].Reject.Detail, w) {
				t.Errorf("bad line %d: detail %q, want it to contain %q", i, bad[i].Reject.Detail, w)
			}
		}
	})
	t.Run("fail", func(t *testing.T) {
		_, _, err := runTestPipeline(t, strings.Replace(readCompletionsPipeline, "%s", "fail", 1), files)
		if err == nil || !strings.Contains(err.Error(), "c.jsonl:3: invalid JSON") {
			t.Fatalf("err = %v, want one naming c.jsonl:3", err)
		}
	})
}

func TestReadCompletionsRequireOutputIDs(t *testing.T) {
	noIDs := completionRecord(goodCompletion())
	src := strings.Replace(readCompletionsPipeline, "%s", "skip", 1)
	src = strings.Replace(src, `on_bad_line = "skip"`, "on_bad_line = \"skip\"\nrequire_output_ids = true", 1)
	_, sum, err := runTestPipeline(t, src, map[string]string{"c.jsonl": completionLine(t, noIDs) + "\n"})
	// Its only record rejected, the output of accepted records is empty:
	// the run did not make what it was for.
	if !errors.Is(err, engine.ErrNoTrainingRows) {
		t.Fatalf("err = %v, want ErrNoTrainingRows", err)
	}
	if s := stageSummary(t, sum, "in"); s.Rejected != 1 || s.Out != 0 {
		t.Fatalf("completion without output_ids: out %d rejected %d", s.Out, s.Rejected)
	}
}

// stopAfter is a test sink that asks the run to stop (like Ctrl-C) when its
// n-th record arrives.
type stopAfter struct {
	n    int
	seen int
	stop chan struct{}
}

type stopAfterConfig struct{}

func (s *stopAfter) Process(_ context.Context, _ *record.Record, _ pipeline.Emitter) error {
	s.seen++
	if s.seen == s.n {
		close(s.stop)
	}
	return nil
}

// TestReadCompletionsStopInTheMiddle stops a run after 10 records of 20,000:
// reading stops instead of running through the file, and every record read
// is accounted for.
func TestReadCompletionsStopInTheMiddle(t *testing.T) {
	const lines = 20000
	var b strings.Builder
	for i := range lines {
		rec := completionRecord(goodCompletion())
		rec.ID = "q" + strings.Repeat("0", 6-len(itoa(i))) + itoa(i)
		b.WriteString(completionLine(t, rec))
		b.WriteByte('\n')
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	sink := &stopAfter{n: 10, stop: stop}
	reg := pipeline.NewRegistry()
	reg.Register(*pipeline.DefaultRegistry.Lookup("read-completions"))
	reg.Register(pipeline.Spec{Kind: "stop-after", Summary: "test sink", New: pipeline.NewProcessor(func(c *stopAfterConfig) (pipeline.Processor, error) { return sink, nil })})
	src := "[[stage]]\nid = \"in\"\nkind = \"read-completions\"\npath = \"c.jsonl\"\n\n[[stage]]\nid = \"sink\"\nkind = \"stop-after\"\ninput = \"in\"\n"
	path := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	f, probs := pipefile.Load(path, pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, reg)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	sum, err := engine.Run(context.Background(), plan, engine.Options{Stop: stop, EdgeBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	in := stageSummary(t, sum, "in")
	if !sum.Drained || in.In >= lines/2 || in.In < 10 || !in.Balanced() {
		t.Fatalf("drained %v; read %d of %d lines (out %d, rejected %d); want an early, balanced stop", sum.Drained, in.In, lines, in.Out, in.Rejected)
	}
	if s := stageSummary(t, sum, "sink"); s.In != in.Out || int64(sink.seen) != in.Out {
		t.Fatalf("sink got %d (%d counted), reader sent %d", sink.seen, s.In, in.Out)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
