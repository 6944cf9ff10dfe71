package rundir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
	"github.com/pipe-dev/pipe/pipeline/tally"
)

// StatusFile is status.json's name inside the run directory.
const StatusFile = layout.Status

// Run states in status.json. A reader that finds StateRunning or
// StateDraining while no process holds the run directory's lock says the
// process is gone (killed or crashed): see ShownState.
const (
	StateRunning  = "running"
	StateDraining = "draining" // stop requested (or too many failures): in-flight work finishes
	StateFinished = "finished" // every input processed
	StateStopped  = "stopped"  // interrupted; the same command continues
	StateFailed   = "failed"
	StateBudget   = "budget reached" // stopped at its [pipeline] budget; raise it to go on
	StateGone     = "process gone"   // inferred by readers, never written
)

// ShownState is the state to show of a run whose status.json says
// written: one that says it goes on, with no process holding its lock
// (alive false), is gone.
func ShownState(written string, alive bool) string {
	if (written == StateRunning || written == StateDraining) && !alive {
		return StateGone
	}
	return written
}

// Status is RUN_DIR/status.json: the run's live figures, which pipe run
// replaces atomically every few seconds and at the end, and pipe status,
// inspect, report and the shards of a sharded run read. It is the one
// declaration of that file.
//
// F is the generation's figures ("generation"): the generating stage's
// own typed view with the rates the run measures over it, which this
// package does not know (pipe run's type); a reader that does not show
// it reads Status[json.RawMessage].
type Status[F any] struct {
	State   string `json:"state"`   // a State* constant
	Updated string `json:"updated"` // RFC 3339, UTC
	PID     int    `json:"pid"`
	Host    string `json:"host,omitempty"`
	Started string `json:"started"` // RFC 3339, UTC
	// Pipeline is the pipeline file's path, Name its name.
	Pipeline    string `json:"pipeline"`
	Name        string `json:"name"`
	RunDir      string `json:"run_dir"`
	Fingerprint string `json:"config_fingerprint"` // of run.json's settings (Fingerprint)
	Error       string `json:"error,omitempty"`
	// OutputsUnverified: the run's outputs were found, at its end, not as
	// it committed them. The next start reads them whole (repairing what
	// it can) before it builds on them, instead of failing the same way.
	OutputsUnverified bool `json:"outputs_unverified,omitempty"`
	Live[F]
	// Raw is the file as ReadStatus read it, keys this binary does not
	// know included (pipe status --json prints it); nil when written.
	Raw []byte `json:"-"`
}

// Live is the live part of Status: what pipe run's display, progress
// line, metrics and notifications show.
type Live[F any] struct {
	// State is the run's for the display (running, draining, and at the
	// end finished, stopped or failed); status.json has its own
	// (Status.State), which may say more (a failed verification after a
	// finished run).
	State    string    `json:"-"`
	ElapsedS float64   `json:"elapsed_s"`
	Stages   []Stage   `json:"stages"`
	Input    *Input    `json:"input,omitempty"`
	Fleet    *F        `json:"generation,omitempty"`
	ETA      *ETA      `json:"eta,omitempty"`
	Edges    []Edge    `json:"edges,omitempty"`
	Finished int       `json:"finished"`                 // ids finished (done.ids)
	Before   int       `json:"finished_before_this_run"` // of Finished, before this start
	Unfin    int64     `json:"unfinished"`               // ids in flight or abandoned
	Commit   string    `json:"last_commit,omitempty"`    // RFC 3339, UTC
	Dead     []string  `json:"dead_letters,omitempty"`   // the dead-letter files written
	Warnings []Warning `json:"warnings,omitempty"`       // the recent ones
	Economy  *Economy  `json:"economy,omitempty"`        // decoded against trained tokens
}

// Economy is how much of the GPUs' decoding ends in training rows, from
// the stages' figures (EconomyOf).
type Economy struct {
	// Decoded is the output tokens the servers generated in this run,
	// Trained the loss tokens of the training rows built in it, within
	// the trainer's max_length.
	Decoded int64 `json:"decoded_tokens"`
	Trained int64 `json:"trained_tokens"`
	// Ratio is Decoded / Trained: 1.0 when every decoded token is
	// trained; 0 while nothing is trained.
	Ratio float64 `json:"decoded_per_trained_token"`
	// KeptAtLength counts completions cut by the length limit and kept,
	// their rows filling the trainer's max_length.
	KeptAtLength int64 `json:"kept_at_length"`
}

// EconomyOf is the economy of this start of the run, from the stages'
// figures: decoded tokens summed over the stages that decode, trained
// tokens the most any one stage built (two stages building rows from the
// same completions, in two labellings say, build the same rows). Rows built from completions
// an earlier start decoded (taken from the journal) count as trained
// only: the report's figure, over every committed row, is the run's. A
// run with no stage that builds training rows has no economy (nil).
func EconomyOf(stages []tally.StageSummary) *Economy {
	var e Economy
	var seen bool
	for _, st := range stages {
		for _, f := range st.Figures {
			if len(f.Labels) > 0 {
				continue
			}
			switch f.Name {
			case figure.DecodedTokens:
				e.Decoded += int64(f.Value)
			case figure.TrainedTokens:
				e.Trained = max(e.Trained, int64(f.Value))
				seen = true
			case figure.KeptAtLength:
				e.KeptAtLength += int64(f.Value)
			}
		}
	}
	if !seen {
		return nil
	}
	if e.Trained > 0 {
		e.Ratio = float64(e.Decoded) / float64(e.Trained)
	}
	return &e
}

// String is the economy in one line: "1.01 decoded tokens per trained
// token (2.1M decoded, 2.08M trained; 31 kept at length)".
func (e *Economy) String() string {
	if e.Trained == 0 {
		return fmt.Sprintf("%d tokens decoded, none trained yet", e.Decoded)
	}
	s := fmt.Sprintf("%.2f decoded tokens per trained token (%d decoded, %d trained", e.Ratio, e.Decoded, e.Trained)
	if e.KeptAtLength > 0 {
		s += fmt.Sprintf("; %d kept at length", e.KeptAtLength)
	}
	return s + ")"
}

// Stage is one stage's accounting (tally.StageSummary) with its rates.
type Stage struct {
	tally.StageSummary
	// Done1m and Done15m are records finished (sent on, rejected or
	// failed) a second over the last minute and 15 minutes.
	Done1m  float64 `json:"done_per_second_1m"`
	Done15m float64 `json:"done_per_second_15m"`
	// RejectShare is rejected of what the stage finished, overall.
	RejectShare float64 `json:"reject_share"`
	// Expensive marks the stage whose work is the run's cost (its rate
	// makes the ETA; what it finished is what rejects are a share of).
	Expensive bool `json:"expensive,omitempty"`
}

// Input is the position of the run's input.
type Input struct {
	Stage     string  `json:"stage"`
	BytesRead int64   `json:"bytes_read"`
	Bytes     int64   `json:"bytes"`
	Records   int64   `json:"records_read"`
	Estimated int64   `json:"records_estimated"` // from the bytes read so far; exact once counted or read
	Counted   bool    `json:"records_counted"`   // the file's lines were counted ahead of the reader
	Complete  bool    `json:"read_complete"`
	Share     float64 `json:"share_read"`
}

// ETA is the time left, from the prompts left and the expensive stage's
// rate.
type ETA struct {
	Remaining int64   `json:"remaining"`
	PerSecond float64 `json:"per_second"`
	Seconds   float64 `json:"seconds"`
	Estimated bool    `json:"estimated"` // the total is estimated from the input's bytes
	// By says how Seconds was found: "fleet" from the servers'
	// concurrency and recent latencies (pipe plan's model: the records
	// not sent yet at the fleet's rate, then what it holds), "rate" from
	// the work stage's rate over the last minute.
	By string `json:"by,omitempty"`
	// Waiting, at the end of a run, says what the rest waits on when it
	// is requests a server has brought nothing back for a while: "3
	// requests on gpu4:30000, no output for 3m10s". No time is estimated
	// then: the stall timeout or the server decides it.
	Waiting string `json:"waiting,omitempty"`
}

// Edge is the records waiting on one output port.
type Edge struct {
	From  string `json:"from"`
	Port  string `json:"port"`
	Depth int    `json:"depth"`
}

// Warning is one warning of the run.
type Warning struct {
	At       string  `json:"at"`
	ElapsedS float64 `json:"elapsed_s"`
	Kind     string  `json:"kind"` // server_ejected, server_readmitted, server_stalled, server_never_ready, server_refused, rejects, tiny_answers, failures, disk
	Text     string  `json:"text"`
}

// UpdatedAt is Updated as a time (zero when unset or unreadable).
func (s *Status[F]) UpdatedAt() time.Time {
	t, _ := time.Parse(time.RFC3339, s.Updated)
	return t
}

// ReadStatus reads dir/status.json; it returns nil, nil when there is none
// (a directory whose run never started). A file it cannot read is
// os.ReadFile's *fs.PathError; one that is not a status names its path.
func ReadStatus[F any](dir string) (*Status[F], error) {
	path := filepath.Join(dir, StatusFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &Status[F]{Raw: data}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return st, nil
}

// Write replaces dir/status.json atomically (commitlog.WriteFileAtomic):
// a reader sees the old file or the new one, never part of one.
func (s *Status[F]) Write(dir string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<think>" stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	return commitlog.WriteFileAtomic(filepath.Join(dir, StatusFile), buf.Bytes())
}
