//go:build e2e

package stages

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
)

// pipeBinary builds cmd/pipe once per test binary.
func pipeBinary(t *testing.T) string { return testenv.PipeBinary(t) }

func startSimProc(t *testing.T, bin string, args ...string) *simProc {
	t.Helper()
	p := &simProc{t: t, bin: bin, args: args, addr: "127.0.0.1:0"}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

func TestGenerateFaultsAgainstPipeSim(t *testing.T) {
	bin := pipeBinary(t)
	var urls []string
	for range 3 {
		p := startSimProc(t, bin, "--speed", "200", "--think-mean", "60", "--answer-mean", "20",
			"--fault", "503:0.05", "--fault", "reset:0.01")
		urls = append(urls, p.url)
	}
	const n = 600
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(urls)+fastGenKeys+readyKey+"concurrency = 8\nmax_attempts = 8\n"), genPrompts(n), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := mustAllOut(t, dir, sum, n)
	retried := 0
	for _, r := range recs {
		if r.Completion.Attempts > 1 {
			retried++
		}
	}
	total := fleetErrors(stageSummary(t, sum, "gen").Figures)
	t.Logf("%d of %d records needed a retry; %s", retried, n, total)
	if retried == 0 || !strings.Contains(total, "http_503=") {
		t.Errorf("no fault hit a request (%s): the test proves nothing", total)
	}
}

func TestGenerateServerKilledAndRevived(t *testing.T) {
	bin := pipeBinary(t)
	var procs []*simProc
	var urls []string
	for range 3 {
		p := startSimProc(t, bin, "--speed", "100", "--think-mean", "60", "--answer-mean", "20")
		procs = append(procs, p)
		urls = append(urls, p.url)
	}
	victim := procs[0]
	const n = 1500
	var phase atomic.Int32 // 0 running, 1 killed, 2 revived
	var restartErr error
	var wg sync.WaitGroup
	defer wg.Wait()
	dir, sum, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(urls)+fastGenKeys+readyKey+"concurrency = 8\n"), genPrompts(n),
		engine.Options{ProgressEvery: 5 * time.Millisecond, Progress: func(s *engine.Summary) {
			out := stageSummary(t, s, "gen").Out
			switch {
			case out >= n/5 && phase.CompareAndSwap(0, 1):
				victim.kill()
			case out >= 2*n/5 && phase.CompareAndSwap(1, 2):
				wg.Go(func() { restartErr = victim.start() })
			}
		}})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	if phase.Load() != 2 {
		t.Fatalf("the run ended before the kill and revival (phase %d)", phase.Load())
	}
	recs := mustAllOut(t, dir, sum, n)
	onVictim, retried := 0, 0
	for _, r := range recs {
		if r.Completion.Server == victim.url {
			onVictim++
		}
		if r.Completion.Attempts > 1 {
			retried++
		}
	}
	figs := stageSummary(t, sum, "gen").Figures
	t.Logf("%d records on the victim, %d re-sent; %v", onVictim, retried, figs)
	if ej, _ := figure.Find(figs, "ejections"); retried == 0 || ej.Value != 1 {
		t.Errorf("the victim's requests were not re-sent or it was not ejected once: %v", figs)
	}
	victimName := strings.TrimPrefix(victim.url, "http://")
	state, _ := figure.Find(figs, "state", "server", victimName)
	inFlight, _ := figure.Find(figs, "in_flight", "server", victimName)
	if state.Text != "ready" || inFlight.Value != 0 {
		t.Errorf("victim not re-admitted: state %s, in flight %v", state.FormatValue(), inFlight.Value)
	}
	// The restarted process counts only what it served since: its share of
	// the rest of the run, beyond the readiness probe.
	if served := simRequests(t, victim.url); served < 10 {
		t.Errorf("the revived server served %d requests: it was not used again", served)
	}
}

// simRequests reads a simulated server's request counter from /metrics.
func simRequests(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "sglang:num_requests_total") {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return int(f)
		}
	}
	t.Fatalf("no num_requests_total in %s/metrics", url)
	return 0
}

func TestGenerateAllDownExitsOne(t *testing.T) {
	bin := pipeBinary(t)
	p := startSimProc(t, bin)
	url := p.url
	p.kill()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(genPrompts(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	src := genPipeline(serversKey([]string{url}) + fastGenKeys + "ready_timeout = \"200ms\"\n")
	if err := os.WriteFile(filepath.Join(dir, "p.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", filepath.Join(dir, "p.toml"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("pipe run: %v, want exit 1\n%s", err, out)
	}
	if !strings.Contains(string(out), "no server ready for 200ms: "+url+": unreachable") {
		t.Errorf("output does not say clearly what is wrong:\n%s", out)
	}
}
