// Package tally declares a stage's accounting as a run reports it
// (status.json, the summary, inspect, the report, shard merges): the
// engine counts it, the run directory's readers read it without the
// engine.
package tally

import (
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/view"
)

// StageCounts are the counts of one stage that status.json holds and every
// reader of a run directory (inspect, the report, shard merges) shows: the
// one declaration of them (StageSummary embeds it, so the JSON is flat).
type StageCounts struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	In       int64  `json:"in"`
	Out      int64  `json:"out"`
	Rejected int64  `json:"rejected"`
	Failed   int64  `json:"failed"`
	Skipped  int64  `json:"skipped"`
	// Redone counts records an expensive stage did again because their
	// journal entries were found damaged (see commitlog.Journal): what
	// the damage cost. In the timeline too, so the report sums every start's.
	Redone int64 `json:"redone,omitempty"`
}

// StageSummary is one stage's accounting: In = Out + Rejected + Failed +
// Skipped + Abandoned, where Abandoned counts records dropped by a stop or a
// failure (the next run redoes them; zero when the run finished cleanly).
type StageSummary struct {
	StageCounts
	Abandoned int64 `json:"abandoned"`
	// NotStarted is the part of Abandoned that never reached an expensive
	// stage's work (no request was sent for it); the rest was in flight at
	// an expensive stage, or abandoned after one (taken from its journal
	// by the next run).
	NotStarted int64 `json:"not_started"`
	// Replayed counts records an expensive stage took from its journal
	// instead of redoing the work (they are also in Out or Rejected).
	Replayed int64            `json:"replayed"`
	Reasons  map[string]int64 `json:"reasons,omitempty"` // rejections by reason code
	Skips    map[string]int64 `json:"skips,omitempty"`   // skipped records by reason
	Queued   int              `json:"queued"`            // records waiting on this stage's output edges
	// QueuedByPort is Queued per connected output port (one edge, or the
	// fan-out feeding several).
	QueuedByPort map[string]int  `json:"queued_by_port,omitempty"`
	Figures      []figure.Figure `json:"figures,omitempty"`
	// Fleet and Input are the stage's views of itself
	// (view.FleetViewer, view.InputViewer), nil when it gives none.
	Fleet *view.Fleet `json:"-"`
	Input *view.Input `json:"-"`
}

// Balanced reports whether every record that came in went somewhere (or
// was abandoned, to be redone).
func (s StageSummary) Balanced() bool {
	return s.In == s.Out+s.Rejected+s.Failed+s.Skipped+s.Abandoned
}
