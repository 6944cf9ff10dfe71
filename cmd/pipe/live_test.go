package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

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
