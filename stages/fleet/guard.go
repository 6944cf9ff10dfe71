package fleet

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The guard is the process between pipe and one launched server: pipe
// re-executes its own binary with guardEnv set, and this package's init
// runs the guard instead of the program. It exists because nothing else
// reaches every process a server leaves: SGLang's launcher forks
// schedulers and detokenizers, which outlive it re-parented to PID 1 and
// keep their GPU memory (sglang #23627). The guard
//   - is a child subreaper (PR_SET_CHILD_SUBREAPER), so every orphan of
//     the server is re-parented to it, not to PID 1;
//   - starts the server in a process group of its own, its output on the
//     guard's (which pipe reads for the log);
//   - ends the server and every descendant (SIGTERM, the grace, SIGKILL)
//     when pipe asks (SIGTERM), when pipe dies (its stdin, a pipe whose
//     other end only pipe held, reads EOF: kill -9 of pipe included), and
//     when the server's main process exits (what it left goes too);
//   - exits with the server's status: its exit code, or 128 + the signal
//     that ended it.
const (
	guardEnv      = "PIPE_FLEET_GUARD"       // the command, run by /bin/sh -c
	guardGraceEnv = "PIPE_FLEET_GUARD_GRACE" // the grace before SIGKILL
)

func init() {
	cmd, ok := os.LookupEnv(guardEnv)
	if !ok {
		return
	}
	grace, err := time.ParseDuration(os.Getenv(guardGraceEnv))
	if err != nil {
		grace = 30 * time.Second
	}
	os.Unsetenv(guardEnv)
	os.Unsetenv(guardGraceEnv)
	os.Exit(runGuard(cmd, grace))
}

const prSetChildSubreaper = 36 // linux/prctl.h

func runGuard(command string, grace time.Duration) int {
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.Stderr.WriteString("pipe fleet guard: " + err.Error() + "\n")
		return 127
	}
	pgid := cmd.Process.Pid
	parentGone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(parentGone)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-exited:
		// The main process is gone; what it left is ended with it.
		endTree(pgid, min(grace, 5*time.Second), nil)
	case <-stop:
		werr = endTree(pgid, grace, exited)
	case <-parentGone:
		werr = endTree(pgid, grace, exited)
	}
	return statusOf(werr)
}

// endTree sends SIGTERM to the group pgid and every descendant of the
// guard, waits up to grace for them (and for the main process on exited,
// when it still runs), then SIGKILLs what is left and reaps it.
func endTree(pgid int, grace time.Duration, exited <-chan error) error {
	signalTree(pgid, syscall.SIGTERM)
	// A stopped process (SIGSTOP, a debugger) acts on SIGTERM only once
	// it runs again.
	signalTree(pgid, syscall.SIGCONT)
	var werr error
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if exited != nil {
			select {
			case werr = <-exited:
				exited = nil
			default:
			}
		}
		reap()
		if exited == nil && len(descendants()) == 0 {
			return werr
		}
		time.Sleep(50 * time.Millisecond)
	}
	signalTree(pgid, syscall.SIGKILL)
	if exited != nil {
		werr = <-exited
	}
	for i := 0; i < 100 && len(descendants()) > 0; i++ {
		signalTree(pgid, syscall.SIGKILL)
		reap()
		time.Sleep(20 * time.Millisecond)
	}
	reap()
	return werr
}

func signalTree(pgid int, sig syscall.Signal) {
	syscall.Kill(-pgid, sig)
	for _, pid := range descendants() {
		syscall.Kill(pid, sig)
	}
}

// reap collects the exit status of every child that ended (orphans
// re-parented to the guard become its children).
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// descendants are the processes under this one, read from /proc: the
// children of it and of each one found, not yet reaped zombies left out.
func descendants() []int {
	self := os.Getpid()
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, ok := procStat(pid)
		if ok && state != "Z" {
			parent[pid] = ppid
		}
	}
	in := map[int]bool{self: true}
	for grew := true; grew; {
		grew = false
		for pid, pp := range parent {
			if in[pp] && !in[pid] {
				in[pid], grew = true, true
			}
		}
	}
	var out []int
	for pid := range in {
		if pid != self {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's parent and state from /proc/PID/stat (the
// name in parentheses may hold spaces and parentheses: fields are counted
// after the last ')').
func procStat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// statusOf is the guard's exit code for the server's end.
func statusOf(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			return 127
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
