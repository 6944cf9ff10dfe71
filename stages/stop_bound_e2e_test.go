//go:build e2e

package stages

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// stopRig is two simulated servers of 48 slots with a reasoning model's
// lengths (thousands of tokens an output) and 2,000 prompts.
type stopRig struct {
	t   *testing.T
	bin string
	sim *testenv.Sim
	dir string
}

func newStopRig(t *testing.T, speed string, extra string) *stopRig {
	t.Helper()
	if testing.Short() {
		t.Skip("real processes")
	}
	bin := testenv.PipeBinary(t)
	r := &stopRig{t: t, bin: bin}
	r.sim = testenv.StartSim(t, bin, 2, "--lengths", "reasoning", "--speed", speed)
	src := "[pipeline]\nrun_dir = \"runs\"\n" + extra + genPipeline(serversKey(r.sim.URLs)+readyKey+"concurrency = 48\nmax_output_tokens = 16384\nmax_attempts = 3\n")
	r.dir = writeGenRun(t, src, 2000)
	return r
}

func (r *stopRig) start(args ...string) (*exec.Cmd, *strings.Builder) {
	var out strings.Builder
	cmd := exec.Command(r.bin, append([]string{"run"}, append(args, filepath.Join(r.dir, "p.toml"))...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd, &out
}

func (r *stopRig) completions() int {
	return len(readRecords(r.t, filepath.Join(r.dir, "out/completions.jsonl")))
}

// runLogLine returns the first line of the run's log holding msg.
func (r *stopRig) runLogLine(msg string) string {
	f, err := os.Open(filepath.Join(r.dir, "runs", "run.log"))
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), msg) {
			return sc.Text()
		}
	}
	return ""
}

func field(t *testing.T, line, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(` ` + name + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", name, line)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// A budget of output tokens sends nothing once it is reached: the run's
// completions are those done when it was reached plus those then in
// flight, no more (the requests taken in but not sent go back), and the
// closing message's figure is the one the next start reads.
func TestBudgetSpendsNothingPastWhatIsInFlight(t *testing.T) {
	r := newStopRig(t, "20", "budget = {output_tokens = 300_000}\n")
	cmd, out := r.start()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("pipe run: %v, want exit 4\n%s", err, out)
	}
	reached := r.runLogLine("budget reached while running")
	answers, inFlight := field(t, reached, "answers"), field(t, reached, "in_flight")
	got := r.completions()
	if int64(got) > answers+inFlight {
		t.Fatalf("%d completions; when the budget was reached %d were done and %d in flight: %d were sent after it", got, answers, inFlight, int64(got)-answers-inFlight)
	}
	if st, _ := os.ReadFile(filepath.Join(r.dir, "runs", "status.json")); !strings.Contains(string(st), `"state": "budget reached"`) {
		t.Errorf("status.json does not say the budget was reached:\n%.300s", st)
	}
	closing := regexp.MustCompile(`output_tokens (\d+) decoded of 300000`).FindStringSubmatch(out.String())
	if closing == nil {
		t.Fatalf("no closing figure:\n%s", out)
	}
	again, err := exec.Command(r.bin, "run", filepath.Join(r.dir, "p.toml")).CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("the next start: %v, want exit 4\n%s", err, again)
	}
	if want := fmt.Sprintf("output_tokens %s decoded of 300000 by its earlier starts", closing[1]); !strings.Contains(string(again), want) {
		t.Fatalf("the closing message said %s tokens; the next start says:\n%s", closing[1], again)
	}
	if st, _ := os.ReadFile(filepath.Join(r.dir, "runs", "status.json")); !strings.Contains(string(st), `"state": "budget reached"`) || !strings.Contains(string(st), "by its earlier starts") {
		t.Errorf("status.json after the refused start does not say why:\n%.400s", st)
	}
	t.Logf("reached with %d done and %d in flight; %d completions in the end, %s tokens decoded", answers, inFlight, got, closing[1])
}

// A wall budget ends the run within the grace of its limit; pipe stop
// during long requests ends it within the grace too (what was in flight
// is cancelled, and the next start does it); and a stop while every
// server is down ends at once instead of waiting for one.
func TestStopsEndWithinTheGrace(t *testing.T) {
	const grace = 3 * time.Second
	t.Run("wall budget", func(t *testing.T) {
		r := newStopRig(t, "2", "budget = {wall = \"4s\"}\n")
		start := time.Now()
		cmd, out := r.start("--drain-timeout", grace.String())
		err := cmd.Wait()
		took := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 {
			t.Fatalf("pipe run: %v, want exit 4\n%s", err, out)
		}
		if limit := 4*time.Second + grace + 5*time.Second; took > limit { // + start-up, commit and verification
			t.Fatalf("a 4s wall budget with a %s grace ended after %s", grace, took)
		}
	})
	t.Run("pipe stop", func(t *testing.T) {
		r := newStopRig(t, "1", "")
		cmd, out := r.start("--drain-timeout", grace.String())
		time.Sleep(4 * time.Second) // requests of minutes are in flight
		asked := time.Now()
		stop, err := exec.Command(r.bin, "stop", filepath.Join(r.dir, "runs")).CombinedOutput()
		if err != nil {
			t.Fatalf("pipe stop: %v\n%s", err, stop)
		}
		cmd.Wait()
		if took := time.Since(asked); took > grace+5*time.Second {
			t.Fatalf("pipe stop took %s with a %s grace\n%s", took, grace, out)
		}
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Fatalf("exit %d after pipe stop, want 130\n%s", code, out)
		}
	})
	t.Run("every server down", func(t *testing.T) {
		r := newStopRig(t, "20", "")
		cmd, out := r.start("--drain-timeout", "10m")
		time.Sleep(3 * time.Second)
		r.sim.Stop()
		time.Sleep(time.Second)
		asked := time.Now()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		if took := time.Since(asked); took > 10*time.Second {
			t.Fatalf("with every server down, SIGTERM took %s to end the run\n%s", took, out)
		}
	})
}
