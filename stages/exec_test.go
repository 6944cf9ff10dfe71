package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"golang.org/x/time/rate"
)

// execLogBuffer is a run log the stage's goroutines write to.
type execLogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *execLogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *execLogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// execVerdicts is an Emitter that keeps every verdict by id, safe for the
// stage's concurrent Process calls.
type execVerdicts struct {
	mu    sync.Mutex
	by    map[string][]string // id → "accepted", "rejected:REASON", "failed:ERROR"
	recs  map[string]*record.Record
	fails []string
}

func newExecVerdicts() *execVerdicts {
	return &execVerdicts{by: map[string][]string{}, recs: map[string]*record.Record{}}
}

func (e *execVerdicts) add(rec *record.Record, v string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.by[rec.ID] = append(e.by[rec.ID], v)
	e.recs[rec.ID] = rec
}

func (e *execVerdicts) Emit(port string, rec *record.Record) error {
	e.add(rec, port)
	return nil
}

func (e *execVerdicts) Reject(rec *record.Record, reason, detail string) error {
	rec.Reject = &record.Rejection{Stage: "test", Reason: reason, Detail: detail}
	e.add(rec, "rejected:"+reason)
	return nil
}

func (e *execVerdicts) Fail(rec *record.Record, err error, _ int) error {
	e.add(rec, "failed:"+err.Error())
	return nil
}

func (e *execVerdicts) Took(int)                          {}
func (e *execVerdicts) SkipFinished(string) bool          { return false }
func (e *execVerdicts) Skip(*record.Record, string) error { return nil }

// needPython skips where python3 is missing (it is on every machine the
// suite runs on; the e2e test, in CI, fails instead).
func needPython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
}

// openExec writes each script (a name ending in .fifo: a named pipe)
// into a new directory, opens an exec stage
// running args there (the pipeline file's directory, as pipe check
// resolves it) and closes it at the end of the test.
func openExec(t testing.TB, scripts map[string]string, cfg execConfig, args ...string) (*execStage, *execLogBuffer, string) {
	t.Helper()
	needPython(t)
	dir := t.TempDir()
	for name, src := range scripts {
		if strings.HasSuffix(name, ".fifo") {
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Command = execCommandOf(dir, args...)
	if cfg.InFlight == 0 {
		cfg.InFlight = 8
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = 3
	}
	if cfg.Timeout.Duration == 0 {
		cfg.Timeout = config.Duration{Duration: time.Minute}
	}
	if errs := cfg.Validate(); errs != nil {
		t.Fatal(errs)
	}
	p, _ := newExec(&cfg)
	s := p.(*execStage)
	log := &execLogBuffer{}
	if err := s.Open(context.Background(), &pipeline.Env{StageID: "rules", Log: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, log, dir
}

// processAll runs Process for every record from as many goroutines as
// the stage has workers, as the engine does; it returns the first error.
func processAll(s *execStage, recs []*record.Record, out pipeline.Emitter) error {
	work := make(chan *record.Record)
	errs := make(chan error, s.Workers())
	var wg sync.WaitGroup
	for range s.Workers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if err := s.Process(context.Background(), r, out); err != nil {
					errs <- err
					for range work {
					}
					return
				}
			}
		}()
	}
	for _, r := range recs {
		work <- r
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func execRecs(n int) []*record.Record {
	out := make([]*record.Record, n)
	for i := range out {
		answer := "Because the air scatters blue light more than red light."
		switch i % 4 {
		case 1:
			answer = "Blue."
		case 2:
			answer = "As an AI, I cannot see the sky, but it is Rayleigh scattering."
		}
		out[i] = rec(fmt.Sprintf("r%03d", i), "Why is the sky blue?", answer)
	}
	return out
}

// mustEachOnce fails unless every record got exactly one verdict.
func mustEachOnce(t *testing.T, em *execVerdicts, recs []*record.Record) {
	t.Helper()
	em.mu.Lock()
	defer em.mu.Unlock()
	for _, r := range recs {
		if got := em.by[r.ID]; len(got) != 1 {
			t.Errorf("%s: verdicts %q, want exactly one", r.ID, got)
		}
	}
	if len(em.by) != len(recs) {
		t.Errorf("%d ids got verdicts, want %d", len(em.by), len(recs))
	}
}

// The sample program's verdicts reach the ports with their reasons; a
// record the program changes goes on changed; a rejection whose reason
// is not a code fails the record; the report counts each.
func TestExecVerdicts(t *testing.T) {
	prog, err := os.ReadFile("../pipelines/answer_rules.py")
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := openExec(t, map[string]string{"answer_rules.py": string(prog)}, execConfig{}, "python3", "answer_rules.py")
	recs := execRecs(40)
	em := newExecVerdicts()
	if err := processAll(s, recs, em); err != nil {
		t.Fatal(err)
	}
	mustEachOnce(t, em, recs)
	for i, r := range recs {
		want := []string{"accepted", "rejected:short_answer", "rejected:as_an_ai", "accepted"}[i%4]
		if got := em.by[r.ID][0]; got != want {
			t.Errorf("%s: %s, want %s", r.ID, got, want)
		}
	}
	figs := map[string]float64{}
	for _, f := range s.Report() {
		figs[f.Name+f.Labels["reason"]] = f.Value
	}
	if figs["accepted"] != 20 || figs["rejectedshort_answer"] != 10 || figs["rejectedas_an_ai"] != 10 || figs["restarts"] != 0 {
		t.Errorf("figures %v", figs)
	}

	// A program that changes records, and one that gives a bad reason.
	s, _, _ = openExec(t, map[string]string{"change.py": `
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["id"].endswith("0"):
        print(json.dumps({"id": r["id"], "accept": False, "reason": "Not A Code"}), flush=True)
        continue
    r.setdefault("meta", {})["score"] = 0.5
    r["completion"]["answer"] = r["completion"]["answer"].upper()
    print(json.dumps({"id": r["id"], "accept": True, "record": r}), flush=True)
`}, execConfig{}, "python3", "change.py")
	recs = execRecs(20)
	em = newExecVerdicts()
	if err := processAll(s, recs, em); err != nil {
		t.Fatal(err)
	}
	mustEachOnce(t, em, recs)
	for _, r := range recs {
		got := em.by[r.ID][0]
		if strings.HasSuffix(r.ID, "0") {
			if !strings.HasPrefix(got, "failed:") || !strings.Contains(got, `reason "Not A Code"`) {
				t.Errorf("%s: %s, want failed naming the reason", r.ID, got)
			}
			continue
		}
		out := em.recs[r.ID]
		if got != "accepted" || out.Meta["score"] != 0.5 || out.Completion.Answer != strings.ToUpper(out.Completion.Answer) || out.Messages[1].Content != "Why is the sky blue?" {
			t.Errorf("%s: %s, %+v, want accepted and changed", r.ID, got, out)
		}
	}
}

// Answers are matched by id, whatever their order: this program answers
// each batch of five backwards, each record rejected with its own id as
// the reason.
func TestExecAnswersOutOfOrder(t *testing.T) {
	s, _, _ := openExec(t, map[string]string{"rev.py": `
import json, sys
batch = []
for line in sys.stdin:
    batch.append(json.loads(line)["id"])
    if len(batch) == 5:
        for i in reversed(batch):
            print(json.dumps({"id": i, "accept": False, "reason": i}), flush=True)
        batch = []
`}, execConfig{InFlight: 5}, "python3", "rev.py")
	recs := execRecs(30)
	em := newExecVerdicts()
	if err := processAll(s, recs, em); err != nil {
		t.Fatal(err)
	}
	mustEachOnce(t, em, recs)
	for _, r := range recs {
		if got := em.by[r.ID][0]; got != "rejected:"+r.ID {
			t.Errorf("%s: %s", r.ID, got)
		}
	}
}

// A program that dies after seven answers is started again; the records
// it had not answered go to the new start, and every record gets exactly
// one verdict. The program finds its marker file in its working
// directory, the pipeline file's.
func TestExecRestartsADeadProgram(t *testing.T) {
	s, log, dir := openExec(t, map[string]string{"die.py": `
import json, os, sys
first = not os.path.exists("died")
n = 0
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "accept": True}), flush=True)
    n += 1
    if first and n == 7:
        open("died", "w").close()
        os._exit(3)
`}, execConfig{}, "python3", "die.py")
	recs := execRecs(60)
	em := newExecVerdicts()
	if err := processAll(s, recs, em); err != nil {
		t.Fatal(err)
	}
	mustEachOnce(t, em, recs)
	if _, err := os.Stat(filepath.Join(dir, "died")); err != nil {
		t.Fatal("the program did not run in the pipeline file's directory:", err)
	}
	if got := s.restarts.Load(); got != 1 {
		t.Errorf("%d restarts, want 1", got)
	}
	if !strings.Contains(log.String(), "exit status 3 with") || !strings.Contains(log.String(), "starting it again (restart 1 of at most 3)") {
		t.Errorf("the log does not say the program died and was started again:\n%s", log)
	}
}

// A program that stops answering (hung) is killed once a record waited
// timeout, and started again; its records are sent to the new start.
func TestExecHungProgramTimesOut(t *testing.T) {
	s, log, _ := openExec(t, map[string]string{"hang.py": `
import json, os, sys, time
first = not os.path.exists("hung")
n = 0
for line in sys.stdin:
    r = json.loads(line)
    n += 1
    if first and n == 4:
        open("hung", "w").close()
        time.sleep(3600)
    print(json.dumps({"id": r["id"], "accept": True}), flush=True)
`}, execConfig{Timeout: config.Duration{Duration: 2 * time.Second}}, "python3", "hang.py")
	recs := execRecs(20)
	em := newExecVerdicts()
	if err := processAll(s, recs, em); err != nil {
		t.Fatal(err)
	}
	mustEachOnce(t, em, recs)
	// At least: a loaded machine may make a healthy start late too.
	if s.timeouts.Load() < 1 || s.restarts.Load() < 1 {
		t.Errorf("%d timeouts, %d restarts; want the hang to count", s.timeouts.Load(), s.restarts.Load())
	}
	if !strings.Contains(log.String(), "got no answer in 2s: the program (pid") {
		t.Errorf("the log does not name the hang:\n%s", log)
	}
	if !strings.Contains(log.String(), "hung (a record got no answer within timeout = 2s) and was killed with") {
		t.Errorf("the restart does not say the program hung (not that it died of a signal):\n%s", log)
	}
}

// After max_restarts restarts the next death fails the stage, naming the
// program's last stderr.
func TestExecStopsAfterMaxRestarts(t *testing.T) {
	s, _, _ := openExec(t, map[string]string{"crash.py": `
import sys
sys.stdin.readline()
sys.stderr.write("ValueError: the model file is missing\n")
sys.exit(1)
`}, execConfig{MaxRestarts: 2}, "python3", "crash.py")
	err := processAll(s, execRecs(10), newExecVerdicts())
	if err == nil || !strings.Contains(err.Error(), "the program died 3 times (max_restarts = 2); the last time: exit status 1") ||
		!strings.Contains(err.Error(), "ValueError: the model file is missing") {
		t.Fatalf("got %v", err)
	}
	if got := s.restarts.Load(); got != 2 {
		t.Errorf("%d restarts, want 2", got)
	}
}

// The program's stderr reaches the log a line at a time, each line cut
// at 1 KiB and its escape sequences shown, not sent; past the rate and
// volume bounds lines are counted, not logged.
func TestExecStderrIsBoundedAndTerminalSafe(t *testing.T) {
	s, log, _ := openExec(t, map[string]string{"noisy.py": `
import json, sys
sys.stderr.write("loading \x1b]0;owned\x07 model\n")
sys.stderr.write("x" * 5000 + "\n")
sys.stderr.write("né" * 600 + "\n")
sys.stderr.flush()
for line in sys.stdin:
    r = json.loads(line)
    sys.stderr.write("judged %s\n" % r["id"])
    sys.stderr.flush()
    print(json.dumps({"id": r["id"], "accept": True}), flush=True)
`}, execConfig{InFlight: 1}, "python3", "noisy.py")
	// A clock that stands still: the burst is all there is.
	s.log.mu.Lock()
	s.log.now = func() time.Time { return time.Unix(1, 0) }
	s.log.limit = rate.NewLimiter(20, 13)
	s.log.mu.Unlock()
	recs := execRecs(20)
	if err := processAll(s, recs, newExecVerdicts()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	text := log.String()
	if strings.ContainsAny(text, "\x1b\x07") || !strings.Contains(text, `loading \u001b]0;owned\u0007 model`) {
		t.Errorf("an escape sequence reached the log raw, or was lost:\n%q", text)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if strings.Contains(l, "program [pid") {
			lines = append(lines, l)
		}
		if len(l) > 1200 {
			t.Errorf("a log line of %d bytes", len(l))
		}
	}
	if len(lines) != 13 || !strings.HasSuffix(lines[1], strings.Repeat("x", 1024)+" [cut at 1 KiB]") ||
		!strings.HasSuffix(lines[2], "n [cut at 1 KiB]") || !strings.HasSuffix(lines[12], "judged r009") {
		t.Errorf("%d lines logged, want 13 (3 then 10 judged):\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if got := s.log.dropped.Load(); got != 10 {
		t.Errorf("%d lines dropped, want 10", got)
	}
}

// A line that is not an answer stops the stage, naming the line.
func TestExecMalformedAnswers(t *testing.T) {
	for _, c := range []struct{ answer, want string }{
		{`print("Loading model...", flush=True)`, `output line 1 is not an answer (`},
		{`print('{"accept": true}', flush=True)`, `output line 1 has no "id": {"accept": true}`},
		{`print(json.dumps({"id": r["id"]}), flush=True)`, `output line 1 has no "accept" (true or false)`},
		{`print('{"id": "nobody", "accept": true}', flush=True)`, `output line 1 answers id "nobody", which is not with the program`},
		{`print(json.dumps({"id": r["id"], "accept": True, "record": {"id": "other"}}), flush=True)`, `output line 1 changes the record's id "r000" to "other"`},
		{`print('{"id": "\\u001b[2J", "accept": true}', flush=True)`, `answers id "\x1b[2J"`},
	} {
		s, _, _ := openExec(t, map[string]string{"bad.py": "import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    " + c.answer + "\n"},
			execConfig{InFlight: 1}, "python3", "bad.py")
		err := processAll(s, execRecs(1), newExecVerdicts())
		if err == nil || !errors.Is(err, errExecProtocol) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.answer, err, c.want)
		}
	}
}

// The window: with in_flight records sent and none answered, the next
// Process waits; a cancel ends every Process, and a late answer is
// dropped.
func TestExecWindowAndCancel(t *testing.T) {
	s, _, dir := openExec(t, map[string]string{"seen.fifo": "", "slow.py": `
import sys
seen = open("seen.fifo", "w")
for line in sys.stdin:
    seen.write(line)
    seen.flush()
`}, execConfig{InFlight: 3}, "python3", "slow.py")
	fifo, err := os.Open(filepath.Join(dir, "seen.fifo"))
	if err != nil {
		t.Fatal(err)
	}
	defer fifo.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 5)
	for _, r := range execRecs(5) {
		go func() { errs <- s.Process(ctx, r, newExecVerdicts()) }()
	}
	seen := bufio.NewScanner(fifo)
	seen.Buffer(nil, 1<<20)
	for range 3 {
		if !seen.Scan() {
			t.Fatal("the program's fifo ended")
		}
	}
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	if n != 3 || len(s.window) != 3 {
		t.Fatalf("%d records with the program, window %d; want 3 (in_flight)", n, len(s.window))
	}
	cancel()
	for range 5 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("Process returned %v, want the cancel", err)
		}
	}
}

// pipe check finds the program and the script, and names a missing one
// at the command key.
func TestExecCheck(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "rules.py"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "c.jsonl"), nil, 0o644)
	for _, c := range []struct{ command, want string }{
		{`["python3", "rules.py"]`, ""},
		{`["python3", "-u", "rules.py", "--min", "20"]`, ""},
		{`["python3", "rulez.py"]`, `p.toml:10:1: stage "rules" (exec): command script rulez.py: no such file (relative names are in the pipeline file's directory, ` + dir + `)`},
		{`["pyhton3", "rules.py"]`, `p.toml:10:1: stage "rules" (exec): command program pyhton3 is not on PATH`},
		{`["./rules.py"]`, `command program ` + dir + `/rules.py is not an executable file`},
		{`["./judge"]`, `command program ` + dir + `/judge: no such file`},
		{`[]`, `command must name the program`},
		{`"python3 rules.py"`, `command must be an array of strings`},
	} {
		src := `
[[stage]]
id   = "in"
kind = "read-completions"
path = "c.jsonl"

[[stage]]
id    = "rules"
kind  = "exec"
command = ` + c.command + `
input = "in"

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "rules.accepted"
path  = "good.jsonl"
`
		path := filepath.Join(dir, "p.toml")
		os.WriteFile(path, []byte(src), 0o644)
		f, probs := pipefile.Load(path, pipefile.Options{})
		if len(probs) == 0 {
			_, probs = pipeline.Build(f, pipeline.DefaultRegistry)
		}
		switch {
		case c.want == "" && len(probs) > 0:
			t.Errorf("%s: %v", c.command, probs)
		case c.want != "" && (len(probs) != 1 || !strings.Contains(probs[0].String(), c.want)):
			t.Errorf("%s: %v, want %q", c.command, probs, c.want)
		}
	}
}

// The command key keeps its arguments exactly, whatever they hold, and
// runs in the pipeline file's directory: a check names that directory.
func TestExecCommandRoundTrip(t *testing.T) {
	args := []string{"python3", "-c", "import sys; print('a/../b', 50%)", "", " x ", "../r.py", "./a//b/", "$ y", "%2F", "日本"}
	raw := make([]any, len(args))
	for i, a := range args {
		raw[i] = a
	}
	var c execCommand
	if err := c.DecodeConfig(raw); err != nil {
		t.Fatal(err)
	}
	c.ResolveDir("/data/pipelines")
	if got := c.Args(); fmt.Sprint(got) != fmt.Sprint(args) || len(got) != len(args) {
		t.Errorf("args %q, want %q", got, args)
	}
	if c.Dir() != "/data/pipelines" {
		t.Errorf("dir %q", c.Dir())
	}
}

// The run's settings hold the arguments and the script's digest: a
// changed script is a changed setting; a moved pipeline file is not.
func TestExecCommandSetting(t *testing.T) {
	dir, moved := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, moved} {
		if err := os.WriteFile(filepath.Join(d, "rules.py"), []byte("print('v1')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	was := execCommandOf(dir, "python3", "-u", "rules.py").String()
	if !strings.HasPrefix(was, `["python3","-u","rules.py"] rules.py sha256:`) {
		t.Fatalf("setting %q", was)
	}
	if now := execCommandOf(moved, "python3", "-u", "rules.py").String(); now != was {
		t.Errorf("moved: %q, was %q", now, was)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.py"), []byte("print('v2')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if now := execCommandOf(dir, "python3", "-u", "rules.py").String(); now == was {
		t.Errorf("the script changed, the setting did not: %q", now)
	}
}

// runExecPipeline checks and runs the pipeline file dir/p.toml.
func runExecPipeline(t *testing.T, dir string) (*engine.Summary, error) {
	t.Helper()
	f, probs := pipefile.Load(filepath.Join(dir, "p.toml"), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return engine.Run(context.Background(), plan, engine.Options{})
}

// In a run: the sample program's verdicts, each reason in the summary; a
// program that dies more than max_restarts times stops the run, what was
// committed stays, and the same run, with the program mended, ends with
// every id exactly once, judged as the program judges the input file by
// itself.
func TestExecInAPipeline(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	prog, err := os.ReadFile("../pipelines/answer_rules.py")
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for _, r := range execRecs(400) {
		b, _ := json.Marshal(r)
		lines.Write(append(b, '\n'))
	}
	for name, content := range map[string]string{
		"answer_rules.py": string(prog),
		"c.jsonl":         lines.String(),
		"limit":           "50",
		// Each start answers limit records at most, then dies.
		"gate.py": `import json, os, sys
import answer_rules
limit = int(open("limit").read()) if os.path.exists("limit") else None
for i, line in enumerate(sys.stdin):
    if limit is not None and i == limit:
        sys.stderr.write("gate: limit reached\n")
        os._exit(1)
    r = json.loads(line)
    accept, reason, detail = answer_rules.judge(r)
    print(json.dumps({"id": r["id"], "accept": accept, "reason": reason, "detail": detail}), flush=True)
`,
		"p.toml": `[pipeline]
name         = "exec"
run_dir      = "run"
max_rejected = "off"

[[stage]]
id   = "in"
kind = "read-completions"
path = "c.jsonl"

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "in"

[[stage]]
id           = "rules"
kind         = "exec"
input        = "todo"
command      = ["python3", "gate.py"]
max_restarts = 2

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "rules.accepted"
path  = "good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "rules.rejected"
path  = "bad.jsonl"
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := runExecPipeline(t, dir)
	if err == nil || !strings.Contains(err.Error(), `"rules"`) || !strings.Contains(err.Error(), "the program died 3 times (max_restarts = 2)") ||
		!strings.Contains(err.Error(), "gate: limit reached") {
		t.Fatalf("the first run: %v, want it stopped by the program's deaths", err)
	}
	if sum == nil || sum.Finished == 0 || sum.Finished > 150 {
		t.Fatalf("the first run finished %v ids, want some, at most the 150 answered", sum)
	}
	// Its accounting still holds: what each stage took in went somewhere
	// or was abandoned (records on their way when the program died too).
	for _, st := range sum.Stages {
		if !st.Balanced() {
			t.Errorf("after the program's deaths stage %s is not balanced: %+v", st.ID, st)
		}
	}
	first := sum.Finished

	if err := os.Remove(filepath.Join(dir, "limit")); err != nil {
		t.Fatal(err)
	}
	if sum, err = runExecPipeline(t, dir); err != nil {
		t.Fatal(err)
	}
	if sum.FinishedAtStart != first || sum.Finished != 400 {
		t.Errorf("the second run: %d finished at its start, %d at its end; want %d and 400", sum.FinishedAtStart, sum.Finished, first)
	}
	cmd := exec.Command("python3", "answer_rules.py")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(lines.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var a struct {
			ID     string `json:"id"`
			Accept bool   `json:"accept"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		want[a.ID] = map[bool]string{true: "accepted", false: a.Reason}[a.Accept]
	}
	got := map[string][]string{}
	for _, r := range readRecords(t, filepath.Join(dir, "good.jsonl")) {
		got[r.ID] = append(got[r.ID], "accepted")
	}
	for _, r := range readRecords(t, filepath.Join(dir, "bad.jsonl")) {
		got[r.ID] = append(got[r.ID], r.Reject.Reason)
	}
	if len(got) != 400 || len(want) != 400 {
		t.Fatalf("%d ids in the output, %d judged; want 400", len(got), len(want))
	}
	for id, w := range want {
		if g := got[id]; len(g) != 1 || g[0] != w {
			t.Errorf("%s: %q, want %s exactly once", id, g, w)
		}
	}
	if st := stageSummary(t, sum, "rules"); st.Reasons["short_answer"]+st.Reasons["as_an_ai"] == 0 {
		t.Errorf("the summary has no reasons: %v", st.Reasons)
	}
}
