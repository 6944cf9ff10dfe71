package stages

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline/record"
	"golang.org/x/time/rate"
)

// execChild is one start of an exec stage's program: its process, the
// lines waiting to be written to its stdin, and whether it was retired
// (died, or killed and replaced). Its fields other than cmd, stdin and
// exited are guarded by the stage's mu.
type execChild struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	toWrite []*execCall   // queued for the writer, in order
	wake    chan struct{} // a send tells the writer toWrite has lines
	exited  chan struct{} // closed when the process was waited for
	killed  bool
	retired bool
	// hung: killed because a record got no answer within the timeout.
	hung bool
}

// send queues call's line for the writer; the caller holds the stage's mu.
func (c *execChild) send(call *execCall) {
	c.toWrite = append(c.toWrite, call)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// kill ends the program and everything it started: it runs in a process
// group of its own (so that a Ctrl-C at the terminal, which pipe answers
// by draining, does not reach it either). The caller holds the stage's
// mu, or the program is its own.
func (c *execChild) kill() {
	c.killed = true
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

// execMaxAnswer is the longest answer line read: a changed record with
// a long conversation is megabytes.
const execMaxAnswer = 64 << 20

// startLocked starts the program and the goroutines that write its
// stdin, read its stdout and stderr and wait for its end; the caller
// holds mu. Every record not answered yet is sent to the new start, in
// the order first sent.
func (s *execStage) startLocked() error {
	cmd := exec.Command(s.program, s.args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", termsafe.Line(strings.Join(s.cfg.Command.Args(), " ")), err)
	}
	c := &execChild{cmd: cmd, stdin: stdin, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	s.child = c
	s.starts++
	calls := make([]*execCall, 0, len(s.pending))
	for _, call := range s.pending {
		calls = append(calls, call)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].seq < calls[j].seq })
	for _, call := range calls {
		s.sendLocked(call)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	s.wg.Add(2) // the writer and the waiter; the readers end before the waiter
	go func() {
		defer s.wg.Done()
		s.writeLoop(c)
	}()
	go func() {
		defer readers.Done()
		s.readLoop(c, stdout)
	}()
	go func() {
		defer readers.Done()
		s.log.stderr(c, stderr)
	}()
	go func() {
		defer s.wg.Done()
		readers.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		close(c.exited)
		s.died(c, err)
	}()
	return nil
}

// writeLoop writes the queued lines to c's stdin until c exits or its
// stdin fails (the program died: died sends the lines to a new start).
func (s *execStage) writeLoop(c *execChild) {
	var buf []byte
	for {
		s.mu.Lock()
		calls := c.toWrite
		c.toWrite = nil
		s.mu.Unlock()
		if len(calls) == 0 {
			select {
			case <-c.wake:
				continue
			case <-c.exited:
				return
			}
		}
		buf = buf[:0]
		for _, call := range calls {
			buf = append(buf, call.line...)
		}
		if _, err := c.stdin.Write(buf); err != nil {
			return
		}
	}
}

// readLoop reads c's answers, one a line, and hands each to the Process
// waiting for it. A line that breaks the protocol fails the stage.
func (s *execStage) readLoop(c *execChild, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), execMaxAnswer)
	n := 0
	for sc.Scan() {
		n++
		if err := s.answer(c, n, sc.Bytes()); err != nil {
			s.fail(err)
			return
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		s.fail(fmt.Errorf("the program's output line %d is longer than %d MiB: %w", n+1, execMaxAnswer>>20, errExecProtocol))
	}
}

// answer matches line n of c's output to the record it answers.
func (s *execStage) answer(c *execChild, n int, line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("the program's output line %d %s: %s: %w", n, fmt.Sprintf(format, args...), quoteLine(line), errExecProtocol)
	}
	var v struct {
		ID     *string         `json:"id"`
		Accept *bool           `json:"accept"`
		Reason string          `json:"reason"`
		Detail string          `json:"detail"`
		Record json.RawMessage `json:"record"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return bad("is not an answer (%s; the program's other output belongs on stderr)", jsonErrText(err))
	}
	switch {
	case v.ID == nil:
		return bad(`has no "id"`)
	case v.Accept == nil:
		return bad(`has no "accept" (true or false)`)
	}
	a := execAnswer{accept: *v.Accept, reason: v.Reason, detail: v.Detail, line: n}
	if len(v.Record) > 0 && string(v.Record) != "null" {
		var r record.Record
		if err := json.Unmarshal(v.Record, &r); err != nil {
			return bad(`has a "record" that is not a record (%s)`, jsonErrText(err))
		}
		if r.ID != *v.ID {
			return bad("changes the record's id %q to %q", termsafe.Cut(*v.ID, 100), termsafe.Cut(r.ID, 100))
		}
		a.record = &r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.retired {
		return nil // what it had not answered went to the new start
	}
	call := s.pending[*v.ID]
	if call == nil {
		if s.abandoned[*v.ID] {
			delete(s.abandoned, *v.ID)
			return nil
		}
		return bad("answers id %q, which is not with the program (unknown, or answered already)", termsafe.Cut(*v.ID, 100))
	}
	delete(s.pending, *v.ID)
	call.answer <- a
	return nil
}

// quoteLine is an answer line for a message: cut, and terminal-safe.
func quoteLine(line []byte) string {
	const max = 200
	s := string(line)
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + fmt.Sprintf("… (%d bytes)", len(line))
	}
	return termsafe.Line(s)
}

// died is called when c's process has ended: unless the stage is
// closing, it starts the program again (which sends it every record not
// answered), or fails the stage after max_restarts restarts.
func (s *execStage) died(c *execChild, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.retired {
		return
	}
	c.retired = true
	status := "exited"
	switch {
	case c.hung:
		status = fmt.Sprintf("hung (a record got no answer within timeout = %s) and was killed", s.cfg.Timeout.Duration)
	case err != nil:
		status = err.Error() // "exit status 1", "signal: killed"
	}
	if s.closing || s.err != nil {
		if err != nil && !c.killed && s.err == nil {
			s.log.printf("the program (pid %d) ended at the end of its input: %s", c.cmd.Process.Pid, status)
		}
		return
	}
	deaths := s.starts // each start ends once: this is its last one's end
	if deaths > s.cfg.MaxRestarts {
		msg := fmt.Sprintf("the program died %d times (max_restarts = %d); the last time: %s", deaths, s.cfg.MaxRestarts, status)
		if last := s.log.lastLines(); last != "" {
			msg += "; its last stderr: " + last
		}
		s.failLocked(errors.New(msg))
		return
	}
	s.restarts.Add(1)
	s.log.printf("the program (pid %d) %s with %d records unanswered: starting it again (restart %d of at most %d)",
		c.cmd.Process.Pid, status, len(s.pending), deaths, s.cfg.MaxRestarts)
	if err := s.startLocked(); err != nil {
		s.failLocked(err)
	}
}

// execLog writes the program's stderr to the run log: line by line, each
// line cut at maxLine bytes and terminal-safe, at most 20 lines a second
// (200 at once: limit) and maxBytes in all; what is over is counted in
// dropped.
type execLog struct {
	w     io.Writer
	stage string

	mu       sync.Mutex
	limit    *rate.Limiter
	written  int64    // bytes of stderr written
	skipped  int64    // lines dropped since the last one written
	full     bool     // maxBytes was reached (and said)
	tail     []string // the last lines, for the error when the program dies too often
	dropped  atomic.Int64
	maxLine  int
	maxBytes int64
	now      func() time.Time
}

func newExecLog(w io.Writer, stage string) *execLog {
	return &execLog{w: w, stage: stage, maxLine: 1 << 10, maxBytes: 4 << 20, limit: rate.NewLimiter(20, 200), now: time.Now}
}

// printf writes a line of pipe's own about the program.
func (l *execLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "stage %q: %s\n", l.stage, fmt.Sprintf(format, args...))
}

// stderr reads the program's stderr to its end, logging its lines. It
// always reads on: a program blocked on a full stderr pipe would hang.
func (l *execLog) stderr(c *execChild, r io.Reader) {
	br := bufio.NewReaderSize(r, 4<<10)
	var line []byte
	cut := false
	for {
		frag, more, err := br.ReadLine()
		if room := l.maxLine - len(line); room > 0 {
			if len(frag) > room {
				frag, cut = frag[:room], true
			}
			line = append(line, frag...)
		} else if len(frag) > 0 {
			cut = true
		}
		if err == nil && more {
			continue
		}
		if len(line) > 0 {
			l.line(c.cmd.Process.Pid, line, cut)
		}
		if err != nil {
			return
		}
		line, cut = line[:0], false
	}
}

// line logs one line of stderr, within the bounds.
func (l *execLog) line(pid int, b []byte, cut bool) {
	for i := 0; cut && i < utf8.UTFMax-1 && len(b) > 0; i++ {
		// Cut at a character's start, not in its middle.
		if r, n := utf8.DecodeLastRune(b); r != utf8.RuneError || n > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	text := termsafe.Line(string(b))
	if cut {
		text += " [cut at 1 KiB]"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail = append(l.tail, text)
	if len(l.tail) > 3 {
		l.tail = l.tail[1:]
	}
	switch {
	case l.full:
		l.dropped.Add(1)
		return
	case l.written+int64(len(b)) > l.maxBytes:
		l.full = true
		l.dropped.Add(1)
		fmt.Fprintf(l.w, "stage %q: the program's stderr passed %d MiB: further lines are counted (stderr_lines_dropped), not logged\n", l.stage, l.maxBytes>>20)
		return
	case !l.limit.AllowN(l.now(), 1):
		l.skipped++
		l.dropped.Add(1)
		return
	}
	l.written += int64(len(b))
	if l.skipped > 0 {
		fmt.Fprintf(l.w, "stage %q: %d lines of the program's stderr not logged (over %g lines a second)\n", l.stage, l.skipped, float64(l.limit.Limit()))
		l.skipped = 0
	}
	fmt.Fprintf(l.w, "stage %q: program [pid %d]: %s\n", l.stage, pid, text)
}

// lastLines are the last lines of stderr, for an error message.
func (l *execLog) lastLines() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.tail, " | ")
}
