// Package view declares the typed views a stage gives of itself beside
// its figures (pipeline.FleetViewer, pipeline.InputViewer): what the live
// display, status.json, the warnings, pipe plan and the timeline read of a
// fleet of servers or of an input's position. A reader reaches a kind
// only through these types, never through the kind's own.
package view

import "time"

// FleetViewer is implemented by a stage that generates through a fleet of
// servers: its view of them, for a reader that shows more than figures can
// say (the live display, status.json, pipe plan, the timeline), which
// never parses figures back by name. It is nil before the stage has
// servers. It must be safe to call concurrently with the stage's work and
// return a value the stage no longer writes to.
type FleetViewer interface {
	FleetView() *Fleet
}

// InputViewer is implemented by a source that reads an input file: how far
// it is into it (the input bar, the ETA's total), with FleetViewer's
// contract.
type InputViewer interface {
	InputView() *Input
}

// Input is a source's position in its input file: the live display's
// input bar and the ETA's total come from it.
type Input struct {
	// BytesRead of Bytes, the file's size.
	BytesRead, Bytes int64
	// Lines is the file's lines to read once the pass ahead of the reader
	// counted them; 0 until then.
	Lines int64
}

// Fleet is a generating stage's servers, as the live display, the
// warnings, notifications and status.json show them. The JSON names are
// status.json's.
type Fleet struct {
	InFlight int64 `json:"in_flight"`
	Capacity int64 `json:"capacity"`
	Tokens   int64 `json:"output_tokens"`
	Answers  int64 `json:"answers"`
	Tiny     int64 `json:"tiny_answers"` // answers under 8 characters
	// MaxOutputTokens is the setting; RequestCap bounds one completion
	// (with [trainer], the trainer's max_length bounds it too): the
	// input's prompts times it is the most the run can decode.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	RequestCap      int64 `json:"request_cap,omitempty"`
	// Waiting says what the stage waits for while no server is ready.
	Waiting    string   `json:"waiting_for_servers,omitempty"`
	Servers    []Server `json:"servers"`
	P95Seconds float64  `json:"latency_p95_s"`
	// Lengths are the output tokens and latencies of the completions sent
	// on in this start (nil before the first).
	Lengths *Lengths `json:"lengths,omitempty"`
	// Launched are the servers the stage launched, each with its starts
	// and ends; Events what happened to them (for the timeline, not
	// status.json).
	Launched []Launched    `json:"launched,omitempty"`
	Events   []ServerEvent `json:"-"`
}

// Server states as figures and views show them.
const (
	ServerReady   = "ready"
	ServerEjected = "ejected" // taken out of rotation mid-run; probed to come back
	ServerProbing = "probing" // not (yet) ready since the start
	// ServerNeverReady: not ready since the start, for over a minute
	// while the others work (warned about); still probed.
	ServerNeverReady = "never_ready"
	// ServerSuspect: a request of its stalled; no new requests until a
	// probe answers (then ready) or fails (then ejected).
	ServerSuspect = "suspect"
)

// Server is one server of a Fleet.
type Server struct {
	Name        string           `json:"name"`  // its URL without the scheme or credentials
	State       string           `json:"state"` // ServerReady, ServerEjected, …
	Reason      string           `json:"reason,omitempty"`
	InFlight    int64            `json:"in_flight"`
	Concurrency int64            `json:"concurrency"`
	Completions int64            `json:"completions"`
	Tokens      int64            `json:"output_tokens"`
	PerSecond   float64          `json:"completions_per_second"`
	P95Seconds  float64          `json:"latency_p95_s"`
	Errors      map[string]int64 `json:"errors,omitempty"` // failed attempts by class
	ErrorsTotal int64            `json:"errors_total"`
	Ejections   int64            `json:"ejections"`
	Accept      float64          `json:"spec_accept_length,omitempty"`
	// QuietSeconds is how long ago it last completed a request.
	QuietSeconds float64 `json:"quiet_s,omitempty"`
	// LatencyMean is its completions' mean seconds; LatencyRecent that of
	// its last 1024 (a server that slows down shows in it first).
	LatencyMean   float64 `json:"latency_mean_s,omitempty"`
	LatencyRecent float64 `json:"latency_recent_s,omitempty"`
	// TTFTSeconds is its mean time to first token as its /metrics report
	// it (SGLang's --enable-metrics), since the run first read them.
	TTFTSeconds float64 `json:"ttft_mean_s,omitempty"`
}

// Lengths is the completions' output tokens and latencies (status.json's
// "generation.lengths").
type Lengths struct {
	Completions int64   `json:"completions"`
	Mean        float64 `json:"mean"`
	SD          float64 `json:"sd"`
	P50         int     `json:"p50"`
	P90         int     `json:"p90"`
	P99         int     `json:"p99"`
	Max         int     `json:"max"`
	// Cut are completions stopped by the length limit.
	Cut int64 `json:"cut_at_limit"`
	// LatencyMean and LatencyP99 are the completions' seconds.
	LatencyMean float64 `json:"latency_mean_s"`
	LatencyP99  float64 `json:"latency_p99_s"`
}

// Launched is one server a stage launched: its starts and ends. Its JSON
// names are its field names (status.json's "launched").
type Launched struct {
	Name, URL, State string
	Starts           int // processes started
	Crashes          int // exits nobody asked for, whatever the code
	Hangs            int // killed after unanswered probes
	Fatal            int // killed after a fatal line in its output
	NeverReady       int // killed after its ready timeout without a generation
	Breaker          int // ended for its answers' quality
	LastExit         string
	ReadyAfter       time.Duration // the last start's time to its first generation
}

// ServerEvent is what happened to a launched server: a start, its
// readiness, an end and why.
type ServerEvent struct {
	Seq    int // 1, 2, … over the fleet's life
	T      time.Time
	Server string
	Start  int    // which start of the server (1: the first)
	Kind   string // "started", "ready", "crash", …
	Text   string
	// Tail is the server's last lines of output, for an end not asked for.
	Tail []string
}
