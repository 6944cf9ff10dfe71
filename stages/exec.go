package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
)

func init() {
	pipeline.Register(pipeline.Spec{
		Kind:    "exec",
		Summary: "judge or change records with a program of your own, which reads them as JSON lines and answers a verdict a line",
		Description: `Starts command once, in the pipeline file's directory, and keeps it
running. Each record goes to its stdin as one line of JSON, the record as
write-jsonl writes it. The program answers one line on its stdout for each
record:

  {"id": "q-1", "accept": true}
  {"id": "q-2", "accept": false, "reason": "short_answer", "detail": "12 chars"}
  {"id": "q-3", "accept": true, "record": {...the record, changed...}}

Accepted records go to "accepted". Rejected ones go to "rejected" with the
reason: a code of lowercase letters, digits and _. With "record" the
program changes the record; its id must stay. Answers may come in any
order: they are matched by id. The program must flush each answer.

Up to in_flight records are with the program at once. More wait, and the
stage slows its input down. A record without an answer after timeout means
the program hung: pipe kills it and starts it again. The program's death
does the same. Records it had not answered are sent to the new start.
After max_restarts restarts the run stops. What it committed is kept, and
a resume sends the rest again. The stage keeps nothing on disk. A record
not committed when pipe or the program is killed is sent again. So the
program must judge a record alike each time it sees it.

A rejection without a valid reason fails the record. A line that is not an
answer stops the run, naming the line. Such a line is not JSON, has no id
or accept, has an id pipe did not send, or changes the record's id. The
program's stderr goes to the run log a line at a time. Each line is cut at
1 KiB. At most 20 lines a second and 4 MiB in all are logged; the rest is
counted.

pipe check finds the program on PATH, or, with a /, against the pipeline
file's directory. It checks that an argument naming a script exists (.py,
.sh, .js, .rb, .pl, .lua, .R, .jl). Such a script's content is one of the
run's settings, as the command is. A resume with the script changed is
refused without --force-new-config. pipelines/answer_rules.py is a sample
program. The run summary and the report count accepted and rejected
records by reason, restarts and timeouts.`,
		Outputs: []string{"accepted", pipeline.RejectedPort},
		KeySettings: pipeline.SettingsFor(func(cfg *execConfig) string {
			return strings.Join(cfg.Command.Args(), " ")
		}),
		Example: `[[stage]]
id   = "completions"
kind = "read-completions"
path = "completions.jsonl"

[[stage]]
id      = "rules"
kind    = "exec"
input   = "completions"
# Usually a script beside the pipeline file: ["python3", "answer_rules.py"].
command = ["python3", "-c", """
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    short = len(r["completion"]["answer"]) < 20
    print(json.dumps({"id": r["id"], "accept": not short, "reason": "short_answer"}), flush=True)
"""]

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "rules.accepted"
path  = "out/good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = "rules.rejected"
path  = "out/rejected.jsonl"
`,
		New: pipeline.NewProcessor(newExec),
	})
}

// execConfig configures exec.
type execConfig struct {
	Command     execCommand     `toml:"command" required:"true" op:"false" doc:"The program and its arguments, e.g. [\"python3\", \"rules.py\"]. It runs in the pipeline file's directory."`
	InFlight    int             `toml:"in_flight" op:"true" default:"64" min:"1" max:"4096" doc:"Records with the program at once: sent and not answered."`
	Timeout     config.Duration `toml:"timeout" op:"true" default:"30s" doc:"How long a record may wait for its answer, from when it is sent. Then the program counts as hung and is restarted. A program that answers in turn must answer in_flight records within it."`
	MaxRestarts int             `toml:"max_restarts" op:"true" default:"3" min:"0" max:"1000" doc:"Restarts of the program (it died or hung) before the run stops."`
}

// execCommand is the command key's value: the program and its
// arguments as the file gives them, and the directory they run in (the
// pipeline file's, set by the decoder through ResolveDir).
type execCommand struct {
	args []string
	dir  string
}

// execCommandOf is the command args run in dir.
func execCommandOf(dir string, args ...string) execCommand {
	return execCommand{args: args, dir: dir}
}

// ResolveDir sets the directory the program runs in.
func (c *execCommand) ResolveDir(dir string) { c.dir = dir }

// ConfigTypeName names the shape in docs and messages.
func (execCommand) ConfigTypeName() string { return "array of strings" }

// DecodeConfig reads the program and its arguments from the file's value.
func (c *execCommand) DecodeConfig(raw any) error {
	list, ok := raw.([]any)
	if !ok {
		return fmt.Errorf(`must be an array of strings, the program and its arguments (["python3", "rules.py"]), got %T`, raw)
	}
	if len(list) == 0 {
		return fmt.Errorf(`must name the program: ["python3", "rules.py"]`)
	}
	args := make([]string, len(list))
	for i, el := range list {
		s, ok := el.(string)
		if !ok {
			return fmt.Errorf("item %d must be a string, got %T", i+1, el)
		}
		args[i] = s
	}
	if args[0] == "" {
		return fmt.Errorf("item 1, the program, is empty")
	}
	c.args = args
	return nil
}

// Dir is the directory the program runs in: the pipeline file's.
func (c execCommand) Dir() string { return c.dir }

// Args are the program and its arguments as the file gives them.
func (c execCommand) Args() []string { return c.args }

// String is the command as the run's settings record it: the arguments
// (not the directory: moving the pipeline file changes no setting), and
// the SHA-256 of each script they name. The script makes the verdicts as
// a chat template makes the rows, so a resume with the script changed is
// a change of settings (pipe run --force-new-config accepts it).
func (c execCommand) String() string {
	args := c.Args()
	b, _ := json.Marshal(args)
	out := string(b)
	for _, a := range scriptArgs(args) {
		data, err := os.ReadFile(inDir(c.Dir(), a))
		if err != nil {
			continue // pipe check names it
		}
		sum := sha256.Sum256(data)
		out += " " + a + " sha256:" + hex.EncodeToString(sum[:8])
	}
	return out
}

// scriptExts are the extensions of an argument pipe check expects to be
// a file: the script an interpreter runs.
var scriptExts = []string{".py", ".sh", ".js", ".mjs", ".rb", ".pl", ".lua", ".r", ".jl"}

// scriptArgs are the arguments after the program that name a script.
func scriptArgs(args []string) []string {
	var out []string
	for _, a := range args[min(1, len(args)):] {
		if !strings.HasPrefix(a, "-") && slices.Contains(scriptExts, strings.ToLower(filepath.Ext(a))) {
			out = append(out, a)
		}
	}
	return out
}

// inDir is path p resolved against dir.
func inDir(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Validate finds the program and the script it runs: pipe check says a
// missing one at the command key, before anything runs.
func (c *execConfig) Validate() []error {
	var errs []error
	if c.Timeout.Duration <= 0 {
		errs = append(errs, &config.FieldError{Key: "timeout", Msg: fmt.Sprintf("must be more than 0, got %s", c.Timeout.Duration)})
	}
	args, dir := c.Command.Args(), c.Command.Dir()
	if len(args) == 0 {
		return errs // missing or malformed: reported at the key
	}
	if _, err := lookProgram(args[0], dir); err != nil {
		errs = append(errs, &config.FieldError{Key: "command", Msg: err.Error()})
	}
	for _, a := range scriptArgs(args) {
		p := inDir(dir, a)
		if st, err := os.Stat(p); err != nil {
			errs = append(errs, &config.FieldError{Key: "command", Msg: fmt.Sprintf("script %s: no such file (relative names are in the pipeline file's directory, %s)", termsafe.Line(a), termsafe.Line(dir))})
		} else if st.IsDir() {
			errs = append(errs, &config.FieldError{Key: "command", Msg: fmt.Sprintf("script %s is a directory", termsafe.Line(p))})
		}
	}
	return errs
}

// lookProgram is the program's path: found on PATH for a bare name, else
// resolved against dir; it must be an executable file.
func lookProgram(name, dir string) (string, error) {
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("program %s is not on PATH", termsafe.Line(name))
		}
		return p, nil
	}
	p := inDir(dir, name)
	if _, err := exec.LookPath(p); err != nil {
		if _, serr := os.Stat(p); serr != nil {
			return "", fmt.Errorf("program %s: no such file", termsafe.Line(p))
		}
		return "", fmt.Errorf("program %s is not an executable file", termsafe.Line(p))
	}
	return p, nil
}

// execStage is an exec stage: one program at a time (see execChild), the
// records it has not answered yet, and the figures.
type execStage struct {
	cfg     *execConfig
	program string   // the program's path
	args    []string // its arguments, after the program
	dir     string
	stage   string // the stage id, for log lines and errors
	log     *execLog

	// window holds a token for each record with the program: Process
	// blocks while it is full.
	window chan struct{}

	mu        sync.Mutex
	child     *execChild // the program's current start; nil before Open
	starts    int        // how many times it was started
	pending   map[string]*execCall
	abandoned map[string]bool // ids sent whose Process returned unanswered: their answers are dropped
	seq       uint64
	closing   bool
	err       error         // set once, with failed closed: the stage failed
	failed    chan struct{} // closed when err is set
	wg        sync.WaitGroup
	rejected  map[string]int64 // by reason

	accepted, restarts, timeouts, badAnswers atomic.Int64
}

// execCall is one record with the program.
type execCall struct {
	id     string
	line   []byte // the record's JSON line, newline included
	seq    uint64 // order of sending, kept when a new start gets it again
	sentAt time.Time
	sentTo *execChild
	answer chan execAnswer // buffered: one answer, sent by the reader that matched it
}

// execAnswer is the program's answer for a record, and where it was.
type execAnswer struct {
	accept         bool
	reason, detail string
	record         *record.Record // the changed record, or nil
	line           int            // the line of the program's output, counted from its start
}

var (
	_ pipeline.Processor = (*execStage)(nil)
	_ pipeline.Parallel  = (*execStage)(nil)
	_ pipeline.Opener    = (*execStage)(nil)
	_ pipeline.Closer    = (*execStage)(nil)
	_ pipeline.Reporter  = (*execStage)(nil)
)

func newExec(c *execConfig) (pipeline.Processor, error) {
	return &execStage{cfg: c}, nil
}

// Workers is in_flight: each record in flight waits for its answer in a
// Process call of its own.
func (s *execStage) Workers() int { return s.cfg.InFlight }

// Open starts the program. It is not bound to ctx: a stop request ends
// intake, and the records in flight still need their answers.
func (s *execStage) Open(_ context.Context, env *pipeline.Env) error {
	args := s.cfg.Command.Args()
	prog, err := lookProgram(args[0], s.cfg.Command.Dir())
	if err != nil {
		return err
	}
	s.program, s.args, s.dir = prog, args[1:], s.cfg.Command.Dir()
	s.stage = "exec"
	var w io.Writer = io.Discard
	if env != nil {
		s.stage = env.StageID
		if env.Log != nil {
			w = env.Log
		}
	}
	s.log = newExecLog(w, s.stage)
	s.window = make(chan struct{}, s.cfg.InFlight)
	s.pending = map[string]*execCall{}
	s.abandoned = map[string]bool{}
	s.rejected = map[string]int64{}
	s.failed = make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked()
}

// Close closes the program's stdin, which ends a program that reads to
// the end, and kills it if it has not exited a few seconds later.
func (s *execStage) Close() error {
	s.mu.Lock()
	s.closing = true
	c := s.child
	s.mu.Unlock()
	if c != nil {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(execCloseGrace):
			s.log.printf("the program (pid %d) did not exit %s after its input ended: killed", c.cmd.Process.Pid, execCloseGrace)
			s.mu.Lock()
			c.kill()
			s.mu.Unlock()
		}
	}
	s.wg.Wait()
	return nil
}

// execCloseGrace is how long Close waits for the program to exit.
const execCloseGrace = 5 * time.Second

// Process sends rec to the program and routes it by the answer. It waits
// for a place in the window (in_flight), then for the answer; a record
// whose answer is late makes the program restart (expire) and is sent
// again, and so is every other one it had not answered.
func (s *execStage) Process(ctx context.Context, rec *record.Record, out pipeline.Emitter) error {
	select {
	case s.window <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.failed:
		return s.err
	}
	defer func() { <-s.window }()
	line, err := record.AppendJSON(nil, rec)
	if err != nil {
		return out.Fail(rec, fmt.Errorf("encoding the record for the program: %w", err), 1)
	}
	call := &execCall{id: rec.ID, line: append(line, '\n'), answer: make(chan execAnswer, 1)}
	s.mu.Lock()
	if _, dup := s.pending[rec.ID]; dup {
		s.mu.Unlock()
		// Answers are matched by id: two records with one id cannot be
		// told apart.
		return out.Fail(rec, fmt.Errorf("a record with id %q is with the program already", rec.ID), 1)
	}
	s.seq++
	call.seq = s.seq
	s.pending[rec.ID] = call
	s.sendLocked(call)
	s.mu.Unlock()

	timer := time.NewTimer(s.cfg.Timeout.Duration)
	defer timer.Stop()
	for {
		select {
		case a := <-call.answer:
			return s.route(rec, a, out)
		case <-timer.C:
			timer.Reset(s.expire(call))
		case <-ctx.Done():
			s.abandon(call)
			return ctx.Err()
		case <-s.failed:
			return s.err
		}
	}
}

// route sends rec on by its answer: accepted, rejected with its reason,
// or failed when a rejection's reason is not a code.
func (s *execStage) route(rec *record.Record, a execAnswer, out pipeline.Emitter) error {
	if a.record != nil {
		ticket := rec.Ticket // the engine's, not part of the record's JSON
		*rec = *a.record
		rec.Ticket = ticket
	}
	if a.accept {
		s.accepted.Add(1)
		return out.Emit("accepted", rec)
	}
	if !validReason(a.reason) {
		s.badAnswers.Add(1)
		return out.Fail(rec, fmt.Errorf("the program rejected it (output line %d) with reason %q: a reason must be a code of lowercase letters, digits and _ (e.g. short_answer)",
			a.line, termsafe.Line(termsafe.Cut(a.reason, 80))), 1)
	}
	s.mu.Lock()
	s.rejected[a.reason]++
	s.mu.Unlock()
	return out.Reject(rec, a.reason, termsafe.Cut(a.detail, 1000))
}

// sendLocked queues call's line for the program's current start.
func (s *execStage) sendLocked(call *execCall) {
	call.sentAt, call.sentTo = time.Now(), s.child
	s.child.send(call)
}

// expire is called when call's timer fired: it returns how long to wait
// next. A call answered meanwhile, or sent again since (to a new start),
// waits on; one that waited the whole timeout on its start kills it: the
// program is hung. Its death restarts it (died), and the call is sent
// again.
func (s *execStage) expire(call *execCall) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	timeout := s.cfg.Timeout.Duration
	if s.pending[call.id] != call {
		return timeout
	}
	if left := timeout - time.Since(call.sentAt); left > 0 {
		return left
	}
	if c := call.sentTo; c == s.child && !c.killed {
		s.timeouts.Add(1)
		s.log.printf("record %s got no answer in %s: the program (pid %d) is hung; killing it to start it again",
			termsafe.Line(termsafe.Cut(call.id, 100)), timeout, c.cmd.Process.Pid)
		c.hung = true
		c.kill()
	}
	return timeout
}

// abandon forgets call, whose Process returns without its answer (the
// run is stopping); an answer that still comes is dropped.
func (s *execStage) abandon(call *execCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[call.id] == call {
		delete(s.pending, call.id)
		s.abandoned[call.id] = true
	}
}

// fail stops the stage with err: every Process returns it, and the
// program is killed.
func (s *execStage) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(err)
}

func (s *execStage) failLocked(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	close(s.failed)
	if s.child != nil {
		s.child.kill()
	}
}

// Report gives the answers by verdict, the restarts and the timeouts.
func (s *execStage) Report() []figure.Figure {
	out := []figure.Figure{
		figure.NewCounter("accepted", s.accepted.Load()),
		figure.NewCounter("restarts", s.restarts.Load()),
		figure.NewCounter("timeouts", s.timeouts.Load()),
		figure.NewCounter("bad_answers", s.badAnswers.Load()),
	}
	if s.log != nil {
		out = append(out, figure.NewCounter("stderr_lines_dropped", s.log.dropped.Load()))
	}
	s.mu.Lock()
	reasons := make([]string, 0, len(s.rejected))
	for r := range s.rejected {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		out = append(out, figure.NewCounter("rejected", s.rejected[r], "reason", r))
	}
	s.mu.Unlock()
	return out
}

// errExecProtocol marks an answer line that breaks the protocol.
var errExecProtocol = errors.New("not an answer")
