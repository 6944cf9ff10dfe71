package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// The test binary is also the server the fleet launches (TestMain runs it
// when testServerEnv is set): an HTTP server speaking the part of SGLang's
// /generate a probe uses, misbehaving on cue. Each mode is a way real
// servers fail (fleet-facts.md).
const testServerEnv = "FLEET_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(testServerEnv); ok {
		testServer(mode, os.Args[len(os.Args)-1])
		return
	}
	os.Exit(m.Run())
}

// testServer serves on port. Modes (comma-separated):
//   - ok: answers every generation;
//   - crash-after=N: exits 1 after N generations (a scheduler crash);
//   - exit0-after=N: exits 0 after N (an engine death reported as success);
//   - hang-after=N: after N, accepts and never answers (health too);
//   - oom-after=N: after N, prints a CUDA out-of-memory line and goes on;
//   - never-ready: listens, answers 503 for ever;
//   - orphan: starts a child in a session of its own that outlives it
//     (a scheduler re-parented away), its pid in $FLEET_TEST_ORPHANS.
//
// A mode with a suffix "@start=K" applies at its K-th start only (the
// start count is kept in a file beside the orphans file).
func testServer(mode, port string) {
	starts := 1
	if f := os.Getenv("FLEET_TEST_STARTS"); f != "" {
		b, _ := os.ReadFile(f)
		starts, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		starts++
		os.WriteFile(f, []byte(strconv.Itoa(starts)), 0o644)
	}
	opts := map[string]int{}
	for _, m := range strings.Split(mode, ",") {
		spec, at := m, 0
		if i := strings.Index(m, "@start="); i >= 0 {
			spec = m[:i]
			at, _ = strconv.Atoi(m[i+len("@start="):])
		}
		if at != 0 && starts != at {
			continue
		}
		k, v, _ := strings.Cut(spec, "=")
		n, _ := strconv.Atoi(v)
		opts[k] = n
	}
	if _, ok := opts["orphan"]; ok {
		c := exec.Command("sleep", "300")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if c.Start() == nil {
			f, _ := os.OpenFile(os.Getenv("FLEET_TEST_ORPHANS"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			fmt.Fprintln(f, c.Process.Pid)
			f.Close()
		}
	}
	var mu sync.Mutex
	served := 0
	fmt.Println("server starting on port", port)
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(3)
	}
	http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := opts["never-ready"]; ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		served++
		n := served
		mu.Unlock()
		check := func(k string) bool { v, ok := opts[k]; return ok && n > v }
		switch {
		case check("crash-after"):
			fmt.Println("Scheduler hit an exception")
			os.Exit(1)
		case check("exit0-after"):
			os.Exit(0)
		case check("hang-after"):
			select {}
		case check("oom-after"):
			fmt.Println("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
		}
		json.NewEncoder(w).Encode(map[string]any{"text": "x", "meta_info": map[string]any{"completion_tokens": 1}})
	}))
}

type rig struct {
	t            *testing.T
	dir, orphans string
	mu           sync.Mutex
	events       []string
	ready        []string // the URLs Config.Ready was called with
}

func newRig(t *testing.T) *rig {
	dir := t.TempDir()
	return &rig{t: t, dir: dir, orphans: filepath.Join(dir, "orphans")}
}

func (r *rig) config(mode string, count int) Config {
	exe, _ := os.Executable()
	port := testenv.LaunchPorts(r.t, count)
	return Config{
		Name: "gen", Count: count, Port: port, LogDir: filepath.Join(r.dir, "servers"),
		Command:      fmt.Sprintf("%s={mode} exec %s -test.run=NONE {port}", testServerEnv, exe),
		Env:          map[string]string{"FLEET_TEST_ORPHANS": r.orphans, "FLEET_TEST_STARTS": filepath.Join(r.dir, "starts")},
		ReadyTimeout: 5 * time.Second, ProbeEvery: 200 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond,
		HangProbes: 3, Restarts: 3, Backoff: 100 * time.Millisecond, StopGrace: time.Second,
		Event: func(_, server, text string) {
			r.mu.Lock()
			r.events = append(r.events, server+": "+text)
			r.mu.Unlock()
		},
		Ready: func(url string) {
			r.mu.Lock()
			r.ready = append(r.ready, url)
			r.mu.Unlock()
		},
	}.withMode(mode)
}

func (c Config) withMode(mode string) Config {
	c.Command = strings.ReplaceAll(c.Command, "{mode}", "'"+mode+"'")
	return c
}

func (r *rig) eventText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "\n")
}

// waitFor polls ok for up to limit.
func (r *rig) waitFor(what string, limit time.Duration, ok func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			r.t.Fatalf("waited %s for %s; events:\n%s", limit, what, r.eventText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// generate asks the server at url for a generation, as the client would.
func generate(url string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Post(url+"/generate", "application/json", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// alive lists the processes of this test's servers still running: the
// guards, the servers and their orphans (by the test server's marker in
// their environment or their pid in the orphans file).
func (r *rig) alive() []string {
	var out []string
	b, _ := os.ReadFile(r.orphans)
	for _, p := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(p)
		if _, st, ok := procStat(pid); ok && st != "Z" {
			out = append(out, "orphan "+p)
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes := string(env); strings.Contains(bytes, "FLEET_TEST_ORPHANS="+r.orphans) {
			if _, st, ok := procStat(pid); ok && st != "Z" {
				out = append(out, "process "+e.Name())
			}
		}
	}
	return out
}

func (r *rig) checkNothingLeft() {
	r.t.Helper()
	r.waitFor("no process of the fleet left", 10*time.Second, func() bool { return len(r.alive()) == 0 })
}

// A server that crashes (exit 1), exits 0 unasked, hangs (its probes too)
// or prints a CUDA out-of-memory line is ended and started again, and
// answers generations again; every event is told; after Close no process
// of any server is left, an orphan in a session of its own included.
func TestFleetRestartsWhatBreaks(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
	}{
		{"crash-after=3@start=1,ok@start=2", "exited (status 1) though nobody asked it to: a crash"},
		{"exit0-after=3@start=1,ok@start=2", "exited (status 0) though nobody asked it to: a crash"},
		{"hang-after=3@start=1,ok@start=2", "hung: 3 one-token generations in a row went unanswered"},
		{"oom-after=3@start=1,ok@start=2,orphan", `printed "torch.OutOfMemoryError: CUDA out of memory.`},
	} {
		t.Run(strings.SplitN(tc.mode, "-", 2)[0], func(t *testing.T) {
			r := newRig(t)
			f, err := Start(context.Background(), r.config(tc.mode, 1))
			if err != nil {
				t.Fatal(err)
			}
			url := f.URLs()[0]
			r.waitFor("the event", 20*time.Second, func() bool { return strings.Contains(r.eventText(), tc.want) })
			r.waitFor("the second start to be ready", 20*time.Second, func() bool { return f.Stats()[0].Starts == 2 && f.Stats()[0].State == StateReady })
			if err := generate(url); err != nil {
				t.Fatalf("after the restart: %v\n%s", err, r.eventText())
			}
			if !strings.Contains(r.eventText(), "restarting in ") || !strings.Contains(r.eventText(), "its last lines:") {
				t.Errorf("events:\n%s", r.eventText())
			}
			// Each start's readiness is handed to the client (Config.Ready).
			r.mu.Lock()
			ready := slices.Clone(r.ready)
			r.mu.Unlock()
			if !slices.Equal(ready, []string{url, url}) {
				t.Errorf("Config.Ready was called with %q, want %s once a start", ready, url)
			}
			f.Close()
			r.checkNothingLeft()
			t.Logf("events:\n%s", r.eventText())
		})
	}
}

// A server that never answers a generation is ended at ready_timeout and,
// past its restarts, given up; a run's fleet of two goes on with the other.
func TestFleetGivesUpOnANeverReadyServer(t *testing.T) {
	r := newRig(t)
	cfg := r.config("never-ready", 1)
	cfg.ReadyTimeout, cfg.Restarts = 700*time.Millisecond, 1
	f, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor("given up", 20*time.Second, func() bool { return f.Stats()[0].State == StateGivenUp })
	st := f.Stats()[0]
	if st.Starts != 2 || st.NeverReady != 2 || !strings.Contains(r.eventText(), "no generation answered within 700ms (ready_timeout)") {
		t.Errorf("%+v\n%s", st, r.eventText())
	}
	f.Close()
	r.checkNothingLeft()
}

// When pipe dies (kill -9), every guard sees its stdin end and ends its
// server and the server's orphans: nothing holds a GPU after it.
func TestFleetDiesWithPipe(t *testing.T) {
	if spec, ok := os.LookupEnv("FLEET_TEST_PARENT"); ok {
		// The stand-in for pipe: launches and waits to be killed.
		cfg := Config{}
		if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
			t.Fatal(err)
		}
		f, err := Start(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for f.Stats()[0].State != StateReady || f.Stats()[1].State != StateReady {
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Println("READY")
		select {}
	}
	r := newRig(t)
	cfg := r.config("ok,orphan", 2)
	cfg.Event = nil
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	parent := exec.Command(exe, "-test.run=TestFleetDiesWithPipe$")
	parent.Env = append(os.Environ(), "FLEET_TEST_PARENT="+string(b))
	out, _ := parent.StdoutPipe()
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	deadline := time.Now().Add(30 * time.Second)
	var got string
	for !strings.Contains(got, "READY") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		got += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got, "READY") {
		t.Fatalf("the parent never got its fleet ready: %s", got)
	}
	if n := len(r.alive()); n < 4 {
		t.Fatalf("%d processes before the kill, want 2 guards, 2 servers and their orphans: %v", n, r.alive())
	}
	parent.Process.Kill()
	parent.Wait()
	r.checkNothingLeft()
}

// A port something else listens on is never probed as the server's own:
// the start fails saying so, and with the port still taken the server is
// given up, not "ready" on another process's answers.
func TestFleetRefusesATakenPort(t *testing.T) {
	defer func(d time.Duration) { portWait = d }(portWait)
	portWait = 300 * time.Millisecond
	r := newRig(t)
	cfg := r.config("ok", 1)
	other, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", cfg.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go http.Serve(other, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"text": "an impostor"})
	}))
	f, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor("given up", 20*time.Second, func() bool { return f.Stats()[0].State == StateGivenUp })
	if st := f.Stats()[0]; st.Starts != 0 || !strings.Contains(r.eventText(), fmt.Sprintf("could not start: port %d is in use by another process", cfg.Port)) {
		t.Errorf("%+v\n%s", st, r.eventText())
	}
	f.Close()
}
