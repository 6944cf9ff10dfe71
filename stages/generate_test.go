package stages

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/sglang"
	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// The generate stage's tests run whole pipelines (read-prompts → generate →
// write-jsonl) against simulated SGLang servers on loopback TCP: in-process
// fleets through the sim package, or real `pipe sim` processes where a
// server has to die like a process does (SIGKILL).

// genPrompts is a JSONL file of n single-turn prompts with ids p0…p(n-1).
func genPrompts(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p%d","prompt":"Question %d: what is %d + %d?"}`+"\n", i, i, i, i)
	}
	return b.String()
}

// genPipeline is read-prompts → generate → write-jsonl (out and rejected),
// with genKeys added to the generate stage.
func genPipeline(genKeys string) string {
	return `
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
` + genKeys + `

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out/completions.jsonl"

[[stage]]
id    = "rej"
kind  = "write-jsonl"
input = "gen.rejected"
path  = "out/rejected.jsonl"
`
}

// fastGenKeys are quick retries and probes for tests; add readyKey unless
// the test sets its own ready_timeout.
const fastGenKeys = `
max_output_tokens = 2048
backoff_min       = "5ms"
backoff_max       = "50ms"
probe_interval    = "20ms"
`

const readyKey = "ready_timeout = \"10s\"\n"

func serversKey(urls []string) string {
	return `servers = ["` + strings.Join(urls, `", "`) + `"]` + "\n"
}

// runGenPipeline checks and runs src beside prompts like pipe run does.
func runGenPipeline(t *testing.T, ctx context.Context, src, prompts string, opts engine.Options) (string, *engine.Summary, error) {
	t.Helper()
	return runTestPipelineWith(t, ctx, src, map[string]string{"prompts.jsonl": prompts}, opts)
}

func startTestFleet(t *testing.T, cfg sim.Config) *sim.Fleet {
	t.Helper()
	f, err := sim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// quickSim runs a simulated minute in a quarter second, with short outputs.
func quickSim(n int) sim.Config {
	return sim.Config{Count: n, Speed: 200, ThinkTokensMean: 60, AnswerTokensMean: 20}
}

// mustAllOut checks that ids p0…p(n-1) each left on out exactly once with a
// full completion, and that the stage's accounting balances.
func mustAllOut(t *testing.T, dir string, sum *engine.Summary, n int) []*record.Record {
	t.Helper()
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.ID] {
			t.Fatalf("record %s written twice", r.ID)
		}
		seen[r.ID] = true
		c := r.Completion
		if c == nil || c.Reasoning == "" || c.Answer == "" || c.FinishReason == "" || c.CompletionTokens == 0 || c.Server == "" || c.Attempts < 1 || c.Request["max_tokens"] == nil {
			t.Fatalf("record %s: incomplete completion %+v", r.ID, c)
		}
	}
	for i := range n {
		if !seen[fmt.Sprintf("p%d", i)] {
			t.Fatalf("record p%d lost (%d of %d written)", i, len(recs), n)
		}
	}
	g := stageSummary(t, sum, "gen")
	if g.In != int64(n) || g.Out != int64(n) || g.Rejected != 0 || g.Failed != 0 {
		t.Errorf("gen accounting %+v, want %d in and out", g, n)
	}
	return recs
}

func TestGenerateNormalRun(t *testing.T) {
	f := startTestFleet(t, quickSim(3))
	const n = 300
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"concurrency = 4\ntemperature = 0.6\nsystem_prompt = \"Be brief.\"\n"), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := mustAllOut(t, dir, sum, n)
	byServer := map[string]int{}
	for _, r := range recs {
		byServer[r.Completion.Server]++
		c := r.Completion
		if c.SystemPrompt != "Be brief." || r.Messages[0].Role != "system" || r.Messages[1].Role != "user" {
			t.Fatalf("record %s: system prompt not applied/recorded: %+v %q", r.ID, r.Messages, c.SystemPrompt)
		}
		if c.Request["temperature"] != 0.6 || c.Request["api"] != "chat" || c.Request["model"] != sim.DefaultModel {
			t.Fatalf("record %s: request settings %v", r.ID, c.Request)
		}
		if c.MatchedStop != float64(151645) || c.FinishReason != "stop" || c.LatencySeconds <= 0 {
			t.Fatalf("record %s: %+v", r.ID, c)
		}
	}
	if len(byServer) != 3 {
		t.Errorf("records by server %v, want all three used", byServer)
	}
	stats := stageSummary(t, sum, "gen").Figures
	if c, _ := figure.Find(stats, "completions"); c.Value != float64(n) {
		t.Errorf("fleet completions %v, want %d; figures %v", c.Value, n, stats)
	}
	if a, _ := figure.Find(stats, "answers"); a.Value != float64(n) {
		t.Errorf("answers %v, want %d", a.Value, n)
	}
	servers := 0
	for _, f := range stats {
		if f.Name == "state" {
			servers++
			if f.Text != "ready" {
				t.Errorf("server %s: state %s", f.Label("server"), f.FormatValue())
			}
		}
	}
	if servers != 3 {
		t.Errorf("%d servers have a state, want 3: %v", servers, stats)
	}
	t.Logf("figures: %v", stats)
}

func TestGenerateMultiTurn(t *testing.T) {
	f := startTestFleet(t, quickSim(2))
	prompts := `{"id":"m1","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"old answer","reasoning_content":"old thinking"},{"role":"user","content":"And then?"},{"role":"assistant","content":"old final"}]}
{"id":"m2","messages":[{"role":"system","content":"S"},{"role":"user","content":"one"},{"role":"user","content":"two"},{"role":"assistant","content":"x"},{"role":"user","content":"three"}]}
`
	for _, turns := range []string{"last", "all"} {
		t.Run(turns, func(t *testing.T) {
			dir, sum, err := runGenPipeline(t, context.Background(),
				genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"turns = \""+turns+"\"\n"), prompts, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if g := stageSummary(t, sum, "gen"); g.Out != 2 {
				t.Fatalf("gen %+v", g)
			}
			got := map[string]*record.Record{}
			for _, r := range readRecords(t, filepath.Join(dir, "out/completions.jsonl")) {
				got[r.ID] = r
			}
			roles := func(r *record.Record) string {
				var s []string
				for _, m := range r.Messages {
					s = append(s, m.Role)
				}
				return strings.Join(s, ",")
			}
			m1, m2 := got["m1"], got["m2"]
			switch turns {
			case "last":
				// History as given (its thinking kept: the template
				// decides what it renders), the trailing assistant turn
				// replaced by the new completion.
				if roles(m1) != "user,assistant,user" || m1.Messages[1].Content != "old answer" || m1.Messages[1].ReasoningContent != "old thinking" {
					t.Errorf("m1 messages %+v", m1.Messages)
				}
				if roles(m2) != "system,user,user,assistant,user" {
					t.Errorf("m2 roles %s", roles(m2))
				}
			case "all":
				// Every assistant turn regenerated, on one server, each
				// kept with its reasoning in the history it sent.
				if roles(m1) != "user,assistant,user" || m1.Messages[1].Content == "old answer" || m1.Messages[1].Content == "" || m1.Messages[1].ReasoningContent == "" {
					t.Errorf("m1 messages %+v", m1.Messages)
				}
				if roles(m2) != "system,user,assistant,user,assistant,user" || m2.Messages[3].Content != "two" || m2.Messages[2].Content == "x" {
					t.Errorf("m2 messages %+v", m2.Messages)
				}
			}
			for _, r := range []*record.Record{m1, m2} {
				if r.Completion == nil || r.Completion.Answer == "" || r.Messages[len(r.Messages)-1].Role != "user" {
					t.Errorf("%s: %+v", r.ID, r.Completion)
				}
			}
		})
	}
}

func TestGenerateBadRequestRejectedWithServerMessage(t *testing.T) {
	cfg := quickSim(2)
	cfg.ContextLength = 4000
	f := startTestFleet(t, cfg)
	prompts := genPrompts(50) + `{"id":"long","prompt":"` + strings.Repeat("a very long prompt ", 1500) + `"}` + "\n"
	dir, sum, err := runGenPipeline(t, context.Background(), genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey), prompts, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rej := readRecords(t, filepath.Join(dir, "out/rejected.jsonl"))
	if len(rej) != 1 || rej[0].ID != "long" || rej[0].Reject.Reason != "prompt_too_long" ||
		!strings.Contains(rej[0].Reject.Detail, "longer than the model's context length (4000 tokens)") {
		t.Fatalf("rejected %+v", rej)
	}
	g := stageSummary(t, sum, "gen")
	if g.Out != 50 || g.Rejected != 1 || g.Reasons["prompt_too_long"] != 1 {
		t.Errorf("gen %+v", g)
	}
	// One 400, not retried.
	if total := fleetErrors(g.Figures); total != "http_400=1" {
		t.Errorf("fleet errors %q, want exactly one failed attempt, the 400", total)
	}
}

func TestGenerateSlowServerGetsFewerRecords(t *testing.T) {
	// Two servers at full speed and one three times slower, through the
	// whole stage: the slow one gets fewer records, every record finishes.
	// (That the fleet runs at its full capacity meanwhile is a timing
	// property, checked exactly on a fake clock in stages/sglang.)
	fast, slow := quickSim(2), quickSim(1)
	fast.Speed = 60
	slow.Speed = fast.Speed / 3
	ff, fs := startTestFleet(t, fast), startTestFleet(t, slow)
	const n, conc = 600, 8
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(append(ff.URLs(), fs.URLs()...))+fastGenKeys+readyKey+fmt.Sprintf("concurrency = %d\n", conc)), genPrompts(n),
		engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := mustAllOut(t, dir, sum, n)
	count := map[string]int{}
	for _, r := range recs {
		count[r.Completion.Server]++
	}
	t.Logf("by server %v", count)
	if s := fs.URLs()[0]; count[s]*3 > count[ff.URLs()[0]]*2 {
		t.Errorf("the slow server did %d records, a fast one %d: want about a third", count[s], count[ff.URLs()[0]])
	}
}

func TestGenerateAllServersDownAtStart(t *testing.T) {
	f := startTestFleet(t, quickSim(2))
	urls := f.URLs()
	f.Close()
	start := time.Now()
	_, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(urls)+fastGenKeys+"ready_timeout = \"300ms\"\n"), genPrompts(10), engine.Options{})
	var down *sglang.AllDownError
	if !errors.As(err, &down) || !strings.Contains(err.Error(), `stage "gen" (generate): no server ready for 300ms`) ||
		!strings.Contains(err.Error(), urls[0]+": unreachable") {
		t.Fatalf("err = %v, want the stage named and each server's reason", err)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("gave up before ready_timeout")
	}
	if g := stageSummary(t, sum, "gen"); g.In != 0 {
		t.Errorf("records were taken with no server: %+v", g)
	}
}

func TestGenerateAllServersDieMidRun(t *testing.T) {
	// Both servers die for good once some completions are in (a condition,
	// not a time, so a slow -race build behaves the same); the run stops with
	// a clear error after ready_timeout, and what was completed before is
	// committed.
	cfg := quickSim(2)
	cfg.Speed = 20
	f := startTestFleet(t, cfg)
	var once sync.Once
	killed := make(chan struct{})
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(f.URLs())+fastGenKeys+"ready_timeout = \"300ms\"\nconcurrency = 4\n"), genPrompts(2000),
		engine.Options{ProgressEvery: 5 * time.Millisecond, Progress: func(s *engine.Summary) {
			if stageSummary(t, s, "gen").Out >= 10 {
				once.Do(func() {
					go func() {
						defer close(killed)
						for _, srv := range f.Servers() {
							srv.Kill()
						}
					}()
				})
			}
		}})
	if g := stageSummary(t, sum, "gen"); g.Out < 10 {
		t.Fatalf("the run ended before 10 completions (err %v); the servers were never killed", err)
	}
	<-killed
	if err == nil || !strings.Contains(err.Error(), "no server ready for 300ms") {
		t.Fatalf("err = %v, want no server ready", err)
	}
	g := stageSummary(t, sum, "gen")
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) < 10 || int64(len(recs)) != g.Out || g.Failed != 0 {
		t.Errorf("%d completions committed, gen %+v: want every completion before the outage kept, none failed", len(recs), g)
	}
	t.Logf("gen %+v; %d committed", g, len(recs))
}

func TestGenerateCancelInTheMiddle(t *testing.T) {
	cfg := quickSim(2)
	cfg.Speed = 20
	f := startTestFleet(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	_, sum, err := runGenPipeline(t, ctx, genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"concurrency = 4\n"), genPrompts(1000),
		engine.Options{ProgressEvery: 5 * time.Millisecond, Progress: func(s *engine.Summary) {
			if stageSummary(t, s, "gen").Out >= 20 {
				once.Do(cancel)
			}
		}})
	if !errors.Is(err, engine.ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", err)
	}
	if g := stageSummary(t, sum, "gen"); g.Out >= 1000 || g.Out < 20 {
		t.Errorf("gen %+v", g)
	}
	// goleak (TestMain) checks that no request or probe goroutine is left.
}

// --- real `pipe sim` processes ---

// simProc is one `pipe sim` process serving one server.
type simProc struct {
	t    *testing.T
	bin  string
	args []string
	addr string // fixed after the first start
	url  string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// start runs the process and waits for its "ready at URL" line.
func (p *simProc) start() error {
	cmd := exec.Command(p.bin, append([]string{"sim", "--listen", p.addr}, p.args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	_, url, ok := strings.Cut(strings.TrimSpace(line), " ready at ")
	if err != nil || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("pipe sim did not report ready: %q %v", line, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.url = url
	p.addr = strings.TrimPrefix(url, "http://")
	p.mu.Unlock()
	return nil
}

// kill SIGKILLs the process: connections drop, requests in flight are lost.
func (p *simProc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

func TestGenerateWithOurTokens(t *testing.T) {
	dir := testenv.TinyQwen3Dir(t)
	cfg := quickSim(2)
	cfg.ContextLength = 4000
	f := startTestFleet(t, cfg)
	prompts := genPrompts(20) + `{"id":"long","prompt":"` + strings.Repeat("a very long prompt ", 1500) + `"}` + "\n"
	tok := testTokenizer(t)
	for _, api := range []string{"generate", "chat"} {
		t.Run(api, func(t *testing.T) {
			out, sum, err := runGenPipeline(t, context.Background(),
				genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"api = \""+api+"\"\ntokenizer = \""+dir+"\"\nenable_thinking = true\n"), prompts, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range readRecords(t, filepath.Join(out, "out/completions.jsonl")) {
				c := r.Completion
				if c.Reasoning == "" || c.Answer == "" || strings.Contains(c.Answer, "</think>") || c.Request["api"] != api {
					t.Fatalf("%s: %+v", r.ID, c)
				}
				if api == "chat" {
					// The chat API returns the output ids (return_token_ids;
					// this fleet has no tokenizer, so they are its own); the
					// prompt ids are the server's rendering, not kept.
					if len(c.PromptIDs) != 0 || len(c.OutputIDs) == 0 {
						t.Fatalf("%s: chat completion's ids: %+v", r.ID, c)
					}
					continue
				}
				// Native: the prompt ids are our rendering of the template,
				// the output ids end with the EOS that stopped them.
				want := "<|im_start|>user\n" + r.Messages[0].Content + "<|im_end|>\n<|im_start|>assistant\n"
				if got := tok.Decode(c.PromptIDs); got != want {
					t.Fatalf("%s: prompt ids decode to %q, want %q", r.ID, got, want)
				}
				if len(c.OutputIDs) == 0 || c.OutputIDs[len(c.OutputIDs)-1] != 151645 || c.Request["max_new_tokens"] != float64(2048) || c.Request["enable_thinking"] != true {
					t.Fatalf("%s: %+v", r.ID, c)
				}
			}
			g := stageSummary(t, sum, "gen")
			if g.Out != 20 || g.Rejected != 1 || g.Reasons["prompt_too_long"] != 1 {
				t.Fatalf("gen %+v", g)
			}
			// The over-long prompt was caught before sending: no 400 from a server.
			if total := fleetErrors(g.Figures); strings.Contains(total, "http_400") {
				t.Errorf("the pre-check did not catch the long prompt: %s", total)
			}
			rej := readRecords(t, filepath.Join(out, "out/rejected.jsonl"))
			if len(rej) != 1 || !strings.Contains(rej[0].Reject.Detail, "context length 4000") {
				t.Errorf("rejected %+v", rej)
			}
		})
	}
}

func TestGenerateExhaustedAttemptsAreFailedAndKept(t *testing.T) {
	cfg := quickSim(2)
	cfg.Faults = []sim.Fault{{Kind: sim.FaultServerError, Rate: 0.5}}
	f := startTestFleet(t, cfg)
	const n = 100
	// max_failed allows them: this test is about where they go.
	_, sum, err := runGenPipeline(t, context.Background(),
		"[pipeline]\nmax_failed = \"100%\"\n"+genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"max_attempts = 2\nbreaker_failures = 1000\n"), genPrompts(n), engine.Options{})
	if !errors.Is(err, engine.ErrRecordsFailed) {
		t.Fatalf("%v; want the run to end saying records failed (they are not finished)", err)
	}
	g := stageSummary(t, sum, "gen")
	if g.Failed == 0 || g.Out+g.Failed != n || g.In != n {
		t.Fatalf("gen %+v: want some failed (about a quarter) and every record accounted for", g)
	}
	if len(sum.DeadLetters) != 1 || !strings.HasSuffix(sum.DeadLetters[0], filepath.Join("failed", "gen.jsonl")) {
		t.Fatalf("dead letters %v", sum.DeadLetters)
	}
	failed := readRecords(t, sum.DeadLetters[0])
	if int64(len(failed)) != g.Failed {
		t.Fatalf("%d failed records written, %d counted", len(failed), g.Failed)
	}
	for _, r := range failed {
		if r.Failure == nil || r.Failure.Attempts != 2 || !strings.Contains(r.Failure.Error, "HTTP 500") || !strings.HasPrefix(r.ID, "p") {
			t.Fatalf("failed record %+v", r.Failure)
		}
	}
	t.Logf("gen %+v; first failure: %s", g, failed[0].Failure.Error)
}

func TestGenerateWithSimServers(t *testing.T) {
	const n = 200
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(`servers = ["sim:3?speed=200&think_mean=60&answer_mean=20&spec_accept=3"]`+"\n"+fastGenKeys+readyKey+"concurrency = 4\n"), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := mustAllOut(t, dir, sum, n)
	servers := map[string]bool{}
	for _, r := range recs {
		servers[r.Completion.Server] = true
	}
	if len(servers) != 3 {
		t.Errorf("%d servers used, want the 3 simulated ones", len(servers))
	}
	// The fleet is closed with the run: goleak (TestMain) sees no server
	// goroutine left.
}

func TestGenerateConfig(t *testing.T) {
	for _, tc := range []struct {
		keys    string
		workers int
		problem string
	}{
		{`servers = ["http://a:30000", {url = "http://b:30001/", concurrency = 8}, "sim:2"]` + "\nmax_output_tokens = 10\nconcurrency = 16", 16 + 8 + 2*16, ""},
		{`servers = "http://a:30000"` + "\nmax_output_tokens = 10", 48, ""},
		{`servers = ["http://a:30000"]`, 0, `missing required key "max_output_tokens"`},
		{`servers = ["localhost:30000"]` + "\nmax_output_tokens = 10", 0, `not a server URL: want "http://HOST:PORT"`},
		{`servers = ["http://a:30000/generate"]` + "\nmax_output_tokens = 10", 0, `give the base URL without a path`},
		{`servers = ["http://a:1", "http://a:1"]` + "\nmax_output_tokens = 10", 0, `is listed twice`},
		{`servers = [{url = "http://a:1", concurency = 3}]` + "\nmax_output_tokens = 10", 0, `unknown key "concurency"`},
		{`servers = ["sim:0"]` + "\nmax_output_tokens = 10", 0, `want "sim:N" with N in 1..64`},
		{`servers = ["sim:2?sped=3"]` + "\nmax_output_tokens = 10", 0, `unknown sim option "sped"`},
		{`servers = []` + "\nmax_output_tokens = 10", 0, `at least one server`},
		{`servers = ["http://a:1"]` + "\nmax_output_tokens = 10\napi = \"generate\"", 0, `needs tokenizer`},
		{`servers = ["http://a:1"]` + "\nmax_output_tokens = 10\nbackoff_min = \"2s\"\nbackoff_max = \"1s\"", 0, `backoff_max must be at least backoff_min`},
		{`servers = ["http://a:1"]` + "\nmax_output_tokens = 10\nturns = \"every\"", 0, `turns must be one of "last", "all"`},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(genPrompts(1)), 0o644); err != nil {
			t.Fatal(err)
		}
		f, probs := pipefile.Parse(filepath.Join(dir, "p.toml"), []byte(genPipeline(tc.keys)), pipefile.Options{})
		if len(probs) == 0 {
			var plan *pipeline.Plan
			plan, probs = pipeline.Build(f, pipeline.DefaultRegistry)
			if len(probs) == 0 {
				st, err := plan.Lookup("gen").Spec.New.Processor(plan.Lookup("gen").Config)
				if err != nil {
					t.Fatal(err)
				}
				if w := st.(pipeline.Parallel).Workers(); w != tc.workers {
					t.Errorf("%s: %d workers, want %d", tc.keys, w, tc.workers)
				}
			}
		}
		got := fmt.Sprint(probs)
		if tc.problem == "" && len(probs) > 0 || tc.problem != "" && !strings.Contains(got, tc.problem) {
			t.Errorf("%s:\n got problems %s\nwant one with %q", tc.keys, got, tc.problem)
		}
	}
}

func TestGenerateDrainFinishesInFlight(t *testing.T) {
	cfg := quickSim(2)
	cfg.Speed = 20
	f := startTestFleet(t, cfg)
	stop := make(chan struct{})
	var once sync.Once
	_, sum, err := runGenPipeline(t, context.Background(), genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"concurrency = 4\n"), genPrompts(2000),
		engine.Options{Stop: stop, ProgressEvery: 5 * time.Millisecond, Progress: func(s *engine.Summary) {
			if stageSummary(t, s, "gen").Out >= 20 {
				once.Do(func() { close(stop) })
			}
		}})
	if err != nil {
		t.Fatalf("a drained run is not an error: %v", err)
	}
	g := stageSummary(t, sum, "gen")
	// in counts the records left waiting at the stop too (abandoned, never
	// started): every one gen started finished.
	if !sum.Drained || g.Out >= 2000 || g.In != g.Out+g.Abandoned || g.Abandoned != g.NotStarted || g.Failed != 0 {
		t.Errorf("gen %+v drained %v: want every record taken finished", g, sum.Drained)
	}
}

func TestGenerateSimServersUseTheTokenizer(t *testing.T) {
	dir := testenv.TinyQwen3Dir(t)
	tok := testTokenizer(t)
	out, _, err := runGenPipeline(t, context.Background(),
		genPipeline(`servers = ["sim:2?speed=200&think_mean=60&answer_mean=20"]`+"\n"+fastGenKeys+readyKey+"api = \"generate\"\ntokenizer = \""+dir+"\"\n"), genPrompts(10), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readRecords(t, filepath.Join(out, "out/completions.jsonl")) {
		c := r.Completion
		if text := tok.Decode(c.OutputIDs); !strings.Contains(text, c.Answer) || !strings.Contains(text, "</think>") {
			t.Fatalf("%s: output ids decode to %q, which does not hold the answer %q", r.ID, text, c.Answer)
		}
	}
}

// fleetErrors lists the fleet's failed attempts by class: "http_503=3 transport=1".
func fleetErrors(figs []figure.Figure) string {
	var parts []string
	for _, f := range figs {
		if f.Name == "errors" && f.Label("server") == "" {
			parts = append(parts, fmt.Sprintf("%s=%d", f.Label("class"), int64(f.Value)))
		}
	}
	return strings.Join(parts, " ")
}
