package rundir_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/rundir"
)

// helperEnv makes the test binary a process that takes the lock of the
// directory named, says "locked" and waits to be killed.
const helperEnv = "RUNDIR_TEST_HOLD_LOCK"

// TestMain runs the test binary as TestLockStale's helper when helperEnv
// names a directory, and the tests otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		holdLock(dir)
	}
	os.Exit(m.Run())
}

func holdLock(dir string) {
	l, err := rundir.Lock(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	l.Release()
	os.Exit(3) // not killed: the parent failed
}

func TestLockTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	l, err := rundir.Lock(dir) // creates dir
	if err != nil {
		t.Fatal(err)
	}
	if l.TookOver != "" {
		t.Errorf("first lock of a new directory: TookOver = %q", l.TookOver)
	}
	b, _ := os.ReadFile(filepath.Join(dir, rundir.LockFile))
	host, _ := os.Hostname()
	for _, want := range []string{fmt.Sprint(os.Getpid()), host, `"started"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("lock file lacks %q: %s", want, b)
		}
	}

	_, err = rundir.Lock(dir)
	var busy *rundir.BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("second Lock: err = %v, want a BusyError", err)
	}
	if busy.PID != os.Getpid() || busy.Host != host || time.Since(busy.Started) > time.Minute {
		t.Errorf("BusyError = %+v", busy)
	}
	for _, want := range []string{
		"run directory " + dir + " is in use by pid " + fmt.Sprint(os.Getpid()) + " on host " + host + " (started 20",
		"stop it with pipe stop " + dir + " (or Ctrl-C in its terminal), or wait for it to end",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %s", want, err)
		}
	}

	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, rundir.LockFile)); err != nil {
		t.Errorf("Release removed the lock file: %v", err)
	}
	l2, err := rundir.Lock(dir)
	if err != nil {
		t.Fatalf("Lock after Release: %v", err)
	}
	defer l2.Release()
	if l2.TookOver != "" {
		t.Errorf("Lock after a clean Release: TookOver = %q", l2.TookOver)
	}
}

// TestLockFileStates: a lock file left behind by an earlier process, not
// held, is taken over; the message says so only when that run did not
// release it.
func TestLockFileStates(t *testing.T) {
	tests := []struct {
		name    string
		content string // "" for no file
		want    string // substring of TookOver; "" for none
	}{
		{"no lock file", "", ""},
		{"empty lock file", "\x00", ""},
		{"unreadable lock file", "garbage", "lock file of the previous run is damaged"}, // taken as an unclean end
		{"released", `{"pid":99,"host":"h","started":"2026-11-30T16:40:00Z","released":"2026-11-30T17:00:00Z"}`, ""},
		{"died", `{"pid":99,"host":"h","started":"2026-11-30T16:40:00Z"}`,
			"previous run (pid 99 on host h, started 2026-11-30T16:40:00Z) did not finish cleanly; resuming from its committed state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			switch tt.content {
			case "":
			case "\x00":
				os.WriteFile(filepath.Join(dir, rundir.LockFile), nil, 0o644)
			default:
				os.WriteFile(filepath.Join(dir, rundir.LockFile), []byte(tt.content), 0o644)
			}
			l, err := rundir.Lock(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			if (tt.want == "") != (l.TookOver == "") || !strings.Contains(l.TookOver, tt.want) {
				t.Errorf("TookOver = %q, want %q", l.TookOver, tt.want)
			}
			b, _ := os.ReadFile(filepath.Join(dir, rundir.LockFile))
			if !strings.Contains(string(b), fmt.Sprintf(`"pid":%d`, os.Getpid())) || strings.Contains(string(b), "released") {
				t.Errorf("lock file after Lock: %s", b)
			}
		})
	}
}

// TestLockStale: a process holding the lock is named while it lives; after
// a SIGKILL its lock is taken over with a message.
func TestLockStale(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	_, err = rundir.Lock(dir)
	var busy *rundir.BusyError
	if !errors.As(err, &busy) || busy.PID != cmd.Process.Pid {
		t.Fatalf("Lock while the helper (pid %d) holds it: %v", cmd.Process.Pid, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true

	l, err := rundir.Lock(dir)
	if err != nil {
		t.Fatalf("Lock after the holder was killed: %v", err)
	}
	defer l.Release()
	want := fmt.Sprintf("previous run (pid %d, started ", cmd.Process.Pid)
	if !strings.Contains(l.TookOver, want) || !strings.Contains(l.TookOver, "did not finish cleanly") {
		t.Errorf("TookOver = %q, want it to contain %q", l.TookOver, want)
	}
}
