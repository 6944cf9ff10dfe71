package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// `pipe run --detach` starts the same command again as a child in its own
// session (setsid: no controlling terminal, so neither a closed terminal nor
// the end of an SSH session reaches it), and returns once the child holds
// the run directory's lock and has checked its settings. Until then the
// child's stdout and stderr come to this process and are shown, so a bad
// pipeline file, a busy run directory or changed settings are reported here
// with the child's exit code; from then on the child writes them to
// RUN_DIR/detached.log and tells this process, through an inherited pipe,
// that it is on its own.

// detachNotifyEnv names the child's inherited descriptor for "ready".
const detachNotifyEnv = "PIPE_DETACH_NOTIFY"

// detachedLog is the detached run's stdout and stderr, in its run directory.
const detachedLog = layout.DetachedLog

// detachReady is what the detached child sends once it holds the lock.
type detachReady struct {
	PID    int    `json:"pid"`
	RunDir string `json:"run_dir"`
}

// startDetached runs `pipe ARGS` (args as typed after "pipe", --detach
// included) as a detached child.
func startDetached(std *stdio, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--detach: cannot find the pipe executable: %w", err)
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("--detach: %w", err)
	}
	defer ready.Close()
	out, outW, err := os.Pipe()
	if err != nil {
		readyW.Close()
		return fmt.Errorf("--detach: %w", err)
	}
	defer out.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		readyW.Close()
		outW.Close()
		return fmt.Errorf("--detach: %w", err)
	}
	// argv[0] as this process got it: the same command, however it was named.
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        append([]string{os.Args[0]}, withoutDetach(args)...),
		Env:         append(os.Environ(), detachNotifyEnv+"=3"),
		Stdin:       null,
		Stdout:      outW,
		Stderr:      outW,
		ExtraFiles:  []*os.File{readyW}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	readyW.Close()
	outW.Close()
	null.Close()
	if err != nil {
		return fmt.Errorf("--detach: starting %s: %w", exe, err)
	}
	relayed := make(chan struct{})
	go func() {
		io.Copy(std.Err, out) // a closed terminal is not an error
		close(relayed)
	}()
	// A Ctrl-C while the child starts is passed on to it: it stops as
	// `pipe run` does on the first one.
	got := make(chan struct{})
	defer close(got)
	go func() {
		select {
		case <-std.Signals:
			cmd.Process.Signal(syscall.SIGTERM)
		case <-got:
		}
	}()
	var msg detachReady
	line, _ := bufio.NewReader(ready).ReadBytes('\n')
	if len(line) == 0 || json.Unmarshal(line, &msg) != nil {
		// The child ended (or broke the pipe) before taking the lock: what
		// it printed was relayed; its exit code is ours.
		werr := cmd.Wait()
		<-relayed
		var ee *exec.ExitError
		if errors.As(werr, &ee) && ee.ExitCode() > 0 {
			return &exitError{code: ee.ExitCode()}
		}
		return fmt.Errorf("--detach: the run (pid %d) ended before it started: %v", cmd.Process.Pid, werr)
	}
	select {
	case <-relayed:
	case <-time.After(2 * time.Second): // a grandchild kept the pipe: stop relaying
	}
	cmd.Process.Release()
	dir := pipeline.DisplayPath(msg.RunDir)
	fmt.Fprintf(std.Out, `pipe: running in the background as pid %d, in its own session (closing this terminal or SSH session does not stop it)
  run directory: %s
  output:        %s (progress and summary), log in %s
  watch it:      pipe status %s
  stop it:       pipe stop %s   (commits and drains; --now stops at once)
`, msg.PID, dir, filepath.Join(dir, detachedLog), filepath.Join(dir, runLogFile), cmdline.Join([]string{dir}), cmdline.Join([]string{dir}))
	return nil
}

// withoutDetach drops --detach (in any spelling) from args.
func withoutDetach(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "detach" && strings.HasPrefix(a, "-") {
			if on, err := strconv.ParseBool(val); !hasVal || (err == nil && on) {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// notifyDetached is called by `pipe run` once it holds the run directory
// and has accepted its settings. In a child started by --detach it moves
// stdout and stderr to RUN_DIR/detached.log and tells the parent it is
// running; otherwise it does nothing.
func notifyDetached(runDir string) error {
	fd := os.Getenv(detachNotifyEnv)
	if fd == "" {
		return nil
	}
	os.Unsetenv(detachNotifyEnv)
	notify := os.NewFile(3, "detach-notify")
	if fd != "3" || notify == nil {
		return fmt.Errorf("--detach: %s=%q: want 3", detachNotifyEnv, fd)
	}
	defer notify.Close()
	path := filepath.Join(runDir, detachedLog)
	// 0600: a run's output can quote what servers and S3 answered.
	logf, err := commitlog.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("--detach: %w", err)
	}
	fmt.Fprintf(logf, "==== %s pid %d: %s\n", time.Now().UTC().Format(time.RFC3339), os.Getpid(), cmdline.Join(cmdline.Redacted(os.Args)))
	for _, target := range []int{1, 2} {
		if err := unix.Dup2(int(logf.Fd()), target); err != nil {
			logf.Close()
			return fmt.Errorf("--detach: redirecting output to %s: %w", path, err)
		}
	}
	logf.Close()
	abs, err := filepath.Abs(runDir)
	if err != nil {
		abs = runDir
	}
	// A parent gone already (its terminal closed) does not stop the run.
	_ = json.NewEncoder(notify).Encode(detachReady{PID: os.Getpid(), RunDir: abs})
	return nil
}
