//go:build e2e

package stages

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// slowFirstAnswer is a proxy in front of target whose first POST (the
// server's 1-token probe) waits delay before it is passed on, like a
// server still compiling its graphs at the first request.
func slowFirstAnswer(t *testing.T, target string, delay time.Duration) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var posts atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) == 1 {
			// With the body read, the server notices the client leaving
			// (its context ends) while the answer waits.
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// `pipe run` on four servers of which only one can work at the start: one
// whose first answer takes 40 s, one needing an API key not sent (401),
// one never reachable. The run starts at once on the working one, says why
// the others are left out, and finishes every record exactly once, on the
// working server, long before the slow one would have answered.
func TestGenerateStartsWithoutWaitingForTheOthersProcess(t *testing.T) {
	bin := testenv.PipeBinary(t)
	simArgs := []string{"--speed", "200", "--think-mean", "60", "--answer-mean", "20"}
	plain := testenv.StartSim(t, bin, 2, simArgs...)
	keyed := testenv.StartSim(t, bin, 1, append([]string{"--api-key", randomSecret(t, "sk-")}, simArgs...)...)
	slow := slowFirstAnswer(t, plain.URLs[1], 40*time.Second)
	gone := testenv.DeadURL(t)
	servers := []string{slow.URL, keyed.URLs[0], gone, plain.URLs[0]}
	const n = 200
	dir := writeGenRun(t, genPipeline(serversKey(servers)+fastGenKeys+readyKey+"concurrency = 4\n"), n)
	start := time.Now()
	out, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
	el := time.Since(start)
	if err != nil {
		t.Fatalf("pipe run: %v\n%s", err, out)
	}
	t.Logf("the run took %v", el)
	if el > 30*time.Second {
		t.Errorf("the run took %v: it waited for the slow server's first answer (40 s)", el)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.ID] {
			t.Fatalf("%s written twice", r.ID)
		}
		seen[r.ID] = true
		if r.Completion == nil || r.Completion.Server != plain.URLs[0] {
			t.Fatalf("%s: completion %+v, want one from %s", r.ID, r.Completion, plain.URLs[0])
		}
	}
	if len(seen) != n {
		t.Errorf("%d records out, want %d", len(seen), n)
	}
	want := `: stage "gen": server ` + keyed.URLs[0] + " refused the credentials: /server_info answers 401: Unauthorized (no API key was sent)"
	if !strings.Contains(out, want) || !strings.Contains(out, "the run goes on with the other servers") {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	mustWarned(t, dir, "server_refused", keyed.URLs[0]+" refused the credentials")
}

// `pipe run` on three servers of which one needs an API key that is not
// sent (401): that one is ejected at the start with the reason and a
// warning, and the run finishes every record exactly once on the other
// two, both of which do work.
func TestGenerateOneRefusingServerOfThreeProcess(t *testing.T) {
	bin := testenv.PipeBinary(t)
	simArgs := []string{"--speed", "200", "--think-mean", "60", "--answer-mean", "20"}
	plain := testenv.StartSim(t, bin, 2, simArgs...)
	keyed := testenv.StartSim(t, bin, 1, append([]string{"--api-key", randomSecret(t, "sk-")}, simArgs...)...)
	servers := []string{plain.URLs[0], keyed.URLs[0], plain.URLs[1]}
	const n = 200
	dir := writeGenRun(t, genPipeline(serversKey(servers)+fastGenKeys+readyKey+"concurrency = 4\n"), n)
	out, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
	if err != nil {
		t.Fatalf("pipe run: %v\n%s", err, out)
	}
	seen, by := map[string]bool{}, map[string]int{}
	for _, r := range readRecords(t, filepath.Join(dir, "out/completions.jsonl")) {
		if seen[r.ID] {
			t.Fatalf("%s written twice", r.ID)
		}
		seen[r.ID] = true
		if r.Completion == nil {
			t.Fatalf("%s: no completion", r.ID)
		}
		by[r.Completion.Server]++
	}
	if len(seen) != n {
		t.Errorf("%d records out, want %d", len(seen), n)
	}
	if by[keyed.URLs[0]] != 0 || by[plain.URLs[0]] == 0 || by[plain.URLs[1]] == 0 || by[plain.URLs[0]]+by[plain.URLs[1]] != n {
		t.Errorf("records by server %v: want all %d from %s and %s, some from each", by, n, plain.URLs[0], plain.URLs[1])
	}
	want := `: stage "gen": server ` + keyed.URLs[0] + " refused the credentials: /server_info answers 401: Unauthorized (no API key was sent)"
	if !strings.Contains(out, want) || !strings.Contains(out, "the run goes on with the other servers") {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	mustWarned(t, dir, "server_refused", keyed.URLs[0]+" refused the credentials")
}

// Every server refusing the credentials stops the run at once with exit
// code 2 (a configuration mistake, like a bad pipeline file).
func TestGenerateAllRefusedExitsTwoProcess(t *testing.T) {
	bin := testenv.PipeBinary(t)
	keyed := testenv.StartSim(t, bin, 2, "--api-key", randomSecret(t, "sk-"), "--speed", "200")
	dir := writeGenRun(t, genPipeline(serversKey(keyed.URLs)+fastGenKeys+"ready_timeout = \"10m\"\n"), 5)
	out, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("pipe run: %v, want exit 2\n%s", err, out)
	}
	for _, want := range []string{"credentials refused", keyed.URLs[0], keyed.URLs[1], "401"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A server never reachable while the other works is warned about within a
// minute of the start, and the summary names it never_ready.
func TestGenerateNeverReadyServerWarnedProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a minute and a half")
	}
	bin := testenv.PipeBinary(t)
	// Real time: the run lasts well beyond the minute.
	plain := testenv.StartSim(t, bin, 1, "--speed", "1", "--think-mean", "200", "--answer-mean", "50")
	gone := testenv.DeadURL(t)
	dir := writeGenRun(t, genPipeline(serversKey([]string{plain.URLs[0], gone})+fastGenKeys+readyKey+"concurrency = 2\n"), 2000)
	cmd := exec.Command(bin, "run", filepath.Join(dir, "p.toml"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var mu sync.Mutex
	var all strings.Builder
	warned := make(chan time.Duration, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			all.WriteString(line + "\n")
			mu.Unlock()
			if strings.HasPrefix(line, "pipe: warning [") && strings.Contains(line, `: stage "gen": server `+gone+" has not been ready") {
				select {
				case warned <- time.Since(start):
				default:
				}
			}
		}
	}()
	select {
	case at := <-warned:
		if at > 75*time.Second {
			t.Errorf("warned after %v, want within about a minute", at)
		}
	case <-time.After(90 * time.Second):
		mu.Lock()
		t.Fatalf("no warning about %s in 90 s:\n%s", gone, all.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	if s := all.String(); !strings.Contains(s, "state never_ready") {
		t.Errorf("the summary does not name the server never_ready:\n%s", s)
	}
	// The run's warner took it: the run log with its kind, status.json.
	mustWarned(t, dir, "server_never_ready", gone+" has not been ready")
}

// mustWarned checks that the run in dir recorded a warning of kind about
// text the way the run's warner does: run.log's WARN line with the kind,
// and status.json's warnings.
func mustWarned(t *testing.T, dir, kind, text string) {
	t.Helper()
	log, err := os.ReadFile(filepath.Join(dir, "runs", "p", "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "kind="+kind) && strings.Contains(line, text) {
			found = true
		}
	}
	if !found {
		t.Errorf("run.log has no %s warning about %q:\n%s", kind, text, log)
	}
	status, err := os.ReadFile(filepath.Join(dir, "runs", "p", "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), `"kind": "`+kind+`"`) {
		t.Errorf("status.json has no %s warning:\n%s", kind, status)
	}
}

// `pipe run` on three `pipe sim` servers of which one stops answering
// mid-run (it accepts requests and never answers, from its 60th request on:
// a time would fall before the run's start on a loaded machine): its stuck requests are sent to the others after stall_timeout (2 s)
// with a warning, long before request_timeout (10 min), and the run
// finishes with every id exactly once.
func TestGenerateStalledServerProcess(t *testing.T) {
	bin := testenv.PipeBinary(t)
	s := testenv.StartSim(t, bin, 3, "--speed", "200", "--think-mean", "60", "--answer-mean", "20", "--fault", "hang@60req#2")
	const n = 2000
	dir := writeGenRun(t, genPipeline(serversKey(s.URLs)+fastGenKeys+readyKey+"concurrency = 4\nstall_timeout = \"2s\"\nrequest_timeout = \"10m\"\n"), n)
	start := time.Now()
	out, err := pipeCmd(t, nil, "run", filepath.Join(dir, "p.toml"))
	el := time.Since(start)
	if err != nil {
		t.Fatalf("pipe run: %v\n%s", err, out)
	}
	t.Logf("the run took %v", el)
	if el > 2*time.Minute {
		t.Errorf("the run took %v: the stuck requests waited for request_timeout", el)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	seen := map[string]bool{}
	again := 0
	for _, r := range recs {
		if seen[r.ID] {
			t.Fatalf("%s written twice", r.ID)
		}
		seen[r.ID] = true
		if r.Completion.Attempts > 1 {
			again++
		}
	}
	if len(seen) != n {
		t.Errorf("%d records out, want %d", len(seen), n)
	}
	if again == 0 {
		t.Error("no record counts the attempt sent again")
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "warning:") || strings.Contains(line, "ejected") || strings.Contains(line, "gen: server") {
			t.Log(line)
		}
	}
	want := `]: stage "gen": server ` + s.URLs[2] + ": a request has been in flight for "
	if !strings.Contains(out, want) || !strings.Contains(out, "sent again to another server") {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	mustWarned(t, dir, "server_stalled", s.URLs[2]+": a request has been in flight")
}
