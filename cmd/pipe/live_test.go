package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.uber.org/goleak"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// On a terminal, pipe run draws the live display (mpb): the input read of
// its size, each stage, the fleet's tokens/s and each server's state; a
// notice appears above it, and the last frame stays above the summary.
func TestLiveDisplayOnTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a real process on a pseudo-terminal")
	}
	t.Parallel() // a process of its own: waits on simulated time, not CPU
	bin := testenv.PipeBinary(t)
	// Slow enough (about 5 s) for several frames on a fast machine: the
	// display redraws once a second.
	path, out := genPipelineFile(t, "servers = [\"sim:2?speed=8&think_mean=200&answer_mean=40&faults=empty-answer:0.5\"]\nconcurrency = 8\nmax_output_tokens = 4096")
	cmd := exec.Command(bin, "run", path)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&screen, ptmx); close(copied) }() // EIO once the process is gone
	if err := waitCmd(cmd, 2*time.Minute); err != nil {
		t.Fatalf("pipe run on a terminal: %v\n%s", err, screen.String())
	}
	<-copied
	got := screen.String()
	for _, want := range []*regexp.Regexp{
		// A redraw moves the cursor up over the display and clears it.
		regexp.MustCompile(`\x1b\[\d+A\x1b\[J`),
		regexp.MustCompile(`running \d+s(\x1b\[0m)?  (\x1b\[1m)?ETA `),
		regexp.MustCompile(`prompts \d+ of ~?\d+ read +\[[=>-]+\] +\d+% of [\d.]+ KiB`),
		regexp.MustCompile(`gen +generate +\d+ of \d+`),
		regexp.MustCompile(`tokens [\d.K]+ of at most [\d.KM]+ \([\d.]+%\)  [\d.K]+ tok/s 1m  (\x1b\[2m)?in flight \d+/16`),
		regexp.MustCompile(`127\.0\.0\.1:\d+ +(\x1b\[32m)?ready(\x1b\[0m)?  \d+/8  [\d.]+/s`),
		// The final frame: everything read.
		regexp.MustCompile(`prompts 122 of 122 read +\[=+\] +100% of `),
		regexp.MustCompile(`\n *out +write-jsonl +122 +122 +0 +0 +0 +yes`),
	} {
		if !want.MatchString(got) {
			t.Errorf("the terminal never showed %q:\n%s", want, tail(got, 4000))
		}
	}
	// Lines printed during the run (the first one, the early warning of
	// empty answers) are whole on their own lines above the display, not
	// cut by a redraw.
	for _, line := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^pipe: running \S+p\.toml; log in \S+run\.log\r$`),
		regexp.MustCompile(`(?m)^(\x1b\[\d+A\x1b\[J)?pipe: warning \[\d+s\]: \d+% of answers so far are tiny \(under 8 characters; \d+ of \d+\): check the servers and the prompts \(pipe inspect the output\)\r$`),
	} {
		if !line.MatchString(got) {
			t.Errorf("%q is not whole on its own line:\n%s", line, tail(got, 3000))
		}
	}
	if n := len(readJSONL(t, out)); n != 122 {
		t.Errorf("%d records written, want 122", n)
	}
}

func waitCmd(cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not exit within %s", limit)
	}
}

// A run where 60% of the answers are empty warns on the terminal and in
// the log within the first minute of simulated time — and long before it
// ends — instead of after two days.
func TestEarlyWarningOfEmptyAnswers(t *testing.T) {
	defer goleak.VerifyNone(t)
	const speed = 10 // simulated seconds a wall second
	path, _ := genPipelineFile(t, fmt.Sprintf("servers = [\"sim:2?speed=%d&think_mean=100&answer_mean=30&faults=empty-answer:0.6\"]\nconcurrency = 8\nmax_output_tokens = 4096", speed))
	var stderr syncBuffer
	code := run([]string{"run", "--progress-every", "200ms", path}, &stdio{Out: io.Discard, Err: &stderr, Signals: make(chan os.Signal)})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	m := regexp.MustCompile(`pipe: warning \[(\d+)s\]: (\d+)% of answers so far are tiny \(under 8 characters; (\d+) of (\d+)\): check the servers and the prompts`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no early warning of tiny answers:\n%s", stderr.String())
	}
	at, _ := strconv.Atoi(m[1])
	share, _ := strconv.Atoi(m[2])
	of, _ := strconv.Atoi(m[4])
	t.Logf("warned after %ds (%d simulated): %s%% of %s answers tiny", at, at*speed, m[2], m[4])
	if at*speed > 60 {
		t.Errorf("warned after %d simulated seconds, want within the first minute", at*speed)
	}
	if share < 40 || share > 80 || of >= 122 {
		t.Errorf("warned at %d%% of %d answers: want about 60%%, before the run's end", share, of)
	}
	logData, err := os.ReadFile(filepath.Join(filepath.Dir(path), "run", "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`level=WARN msg="\d+% of answers so far are tiny .*" kind=tiny_answers elapsed_s=`).Match(logData) {
		t.Errorf("run.log lacks the warning:\n%s", logData)
	}
	// One warning while the condition lasts, not one a second.
	if n := strings.Count(stderr.String(), "of answers so far are tiny"); n != 1 {
		t.Errorf("%d tiny-answer warnings, want 1", n)
	}
}

// --metrics-addr serves the run's figures to Prometheus; after a known run
// the series hold its exact counts.
func TestMetricsAfterRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	path, out := genPipelineFile(t, "servers = [\"sim:2?speed=200&think_mean=60&answer_mean=20&faults=empty-answer:0.25\"]\nconcurrency = 4\nmax_output_tokens = 4096")
	var scraped string
	runEnded = func(addr string) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Errorf("scrape: %v", err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		scraped = string(b)
	}
	defer func() { runEnded = nil }()
	var stderr syncBuffer
	code := run([]string{"run", "--metrics-addr", "127.0.0.1:0", path}, &stdio{Out: io.Discard, Err: &stderr, Signals: make(chan os.Signal)})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if !regexp.MustCompile(`pipe: metrics on http://127\.0\.0\.1:\d+/metrics`).MatchString(stderr.String()) {
		t.Errorf("stderr does not say where the metrics are:\n%s", stderr.String())
	}
	series := parseMetrics(t, scraped)
	recs := readJSONL(t, out)
	var tokens, tiny float64
	for _, r := range recs {
		c, _ := r["completion"].(map[string]any)
		n, _ := c["completion_tokens"].(float64)
		tokens += n
		if a, _ := c["answer"].(string); len(strings.TrimSpace(a)) < 8 {
			tiny++
		}
	}
	want := map[string]float64{
		`pipe_run_state{state="finished"}`: 1,
		`pipe_run_state{state="running"}`:  0,
		`pipe_run_finished_ids`:            122,
		`pipe_stage_records_total{kind="read-prompts",outcome="out",stage="prompts"}`:      122,
		`pipe_stage_records_total{kind="generate",outcome="in",stage="gen"}`:               122,
		`pipe_stage_records_total{kind="generate",outcome="out",stage="gen"}`:              122,
		`pipe_stage_records_total{kind="write-jsonl",outcome="in",stage="out"}`:            122,
		`pipe_stage_records_total{kind="write-jsonl",outcome="failed",stage="out"}`:        0,
		`pipe_edge_queue_depth{from="gen",port="out"}`:                                     0,
		`pipe_edge_queue_depth{from="prompts",port="out"}`:                                 0,
		`pipe_generate_answers_total{stage="gen"}`:                                         122,
		`pipe_generate_tiny_answers_total{stage="gen"}`:                                    tiny,
		`pipe_write_jsonl_committed_records_total{stage="out"}`:                            122,
		`pipe_read_prompts_input_bytes{stage="prompts"}`:                                   fileSize(t, filepath.Join(testenv.RepoRoot(t), "testdata/prompts/demo.jsonl")),
		`sum pipe_generate_completions_total`:                                              122,
		`sum pipe_generate_output_tokens_total`:                                            tokens,
		`sum pipe_generate_in_flight`:                                                      0,
		`sum pipe_generate_latency_seconds_count`:                                          122,
		`count pipe_generate_state_info{state="ready"}`:                                    2,
		`count pipe_generate_concurrency`:                                                  2,
		`pipe_read_prompts_input_bytes_read_total{stage="prompts"}`:                        fileSize(t, filepath.Join(testenv.RepoRoot(t), "testdata/prompts/demo.jsonl")),
		`pipe_stage_records_total{kind="generate",outcome="rejected",stage="gen"}`:         0,
		`pipe_stage_records_total{kind="read-prompts",outcome="rejected",stage="prompts"}`: 0,
	}
	if tiny == 0 || tokens == 0 {
		t.Fatalf("the run proves nothing: %v tiny answers, %v tokens", tiny, tokens)
	}
	for k, v := range want {
		got, ok := series[k]
		if !ok {
			t.Errorf("no series %s in:\n%s", k, scraped)
			continue
		}
		if got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
}

// parseMetrics reads the text exposition into "name{labels}" → value, plus
// "sum NAME" and "count NAME{label="v"}" over a name's series.
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	line := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("metrics line %q", sc.Text())
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		out[m[1]+m[2]] = v
		out["sum "+m[1]] += v
		out["count "+m[1]]++
		for _, l := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(m[2], -1) {
			if l[1] != "stage" && l[1] != "server" {
				out[fmt.Sprintf("count %s{%s=%q}", m[1], l[1], l[2])]++
			}
		}
	}
	return out
}

func fileSize(t *testing.T, path string) float64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return float64(st.Size())
}

// status.json is replaced while the run goes on (state running, this
// process's pid, figures that grow) and says finished at the end; pipe
// status reads it and the lock: alive during the run, not after, and
// "process gone" for a run killed with -9.
func TestStatusDuringAndAfterRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	t.Parallel() // processes of its own: waits on simulated time, not CPU
	bin := testenv.PipeBinary(t)
	path, _ := genPipelineFile(t, "servers = [\"sim:1?speed=5&think_mean=200&answer_mean=40\"]\nconcurrency = 4\nmax_output_tokens = 4096")
	runDir := filepath.Join(filepath.Dir(path), "run")
	statusPath := filepath.Join(runDir, "status.json")

	start := func(extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"run", path}, extra...)...)
		cmd.Stderr = io.Discard
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmd := start()
	var doc statusDoc
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) { // polling for a state, not timing
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("status.json never showed completions while running: %+v", doc)
		}
		data, err := os.ReadFile(statusPath)
		if err != nil || json.Unmarshal(data, &doc) != nil {
			continue // not written yet (a reader never sees a part: it is replaced atomically)
		}
		if doc.State == stateRunning && doc.PID == cmd.Process.Pid && doc.Fleet != nil && doc.Fleet.Servers != nil && len(doc.Stages) == 3 && doc.Stages[1].Out > 0 {
			break
		}
	}
	if doc.Fingerprint == "" || doc.Started == "" || doc.Input == nil || doc.Input.Bytes == 0 {
		t.Errorf("status.json lacks the fingerprint, start or input: %+v", doc)
	}
	status := func(args ...string) string {
		out, err := exec.Command(bin, append([]string{"status"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("pipe status %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	got := status(runDir)
	for _, want := range []string{
		"\nstate      running (updated ",
		fmt.Sprintf("\nprocess    pid %d on ", cmd.Process.Pid),
		": alive, started ",
		"\nconfig     " + doc.Fingerprint,
		"\n  gen      generate      in ",
		" ready\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("pipe status during the run lacks %q:\n%s", want, got)
		}
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(status("--json", runDir)), &raw); err != nil || raw["alive"] != true || raw["state"] != "running" {
		t.Errorf("pipe status --json: alive %v, state %v (%v)", raw["alive"], raw["state"], err)
	}

	// Killed: the status still says running, the lock is free: gone.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	got = status(runDir)
	if !strings.Contains(got, "\nstate      process gone (updated ") || !strings.Contains(got, "the process ended without finishing (killed or crashed); run the same command again to continue") {
		t.Errorf("pipe status after kill -9:\n%s", got)
	}

	// Run again (faster servers: an operational setting) to the end:
	// finished, not alive.
	cmd = start("--set", `gen.servers=["sim:1?speed=100&think_mean=200&answer_mean=40"]`)
	if err := waitCmd(cmd, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	got = status(runDir)
	for _, want := range []string{"\nstate      finished (updated ", fmt.Sprintf("pid %d on ", cmd.Process.Pid), ": not running, started ", "\nfinished   122 ids ("} {
		if !strings.Contains(got, want) {
			t.Errorf("pipe status after the run lacks %q:\n%s", want, got)
		}
	}
}
