package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/view"
	"github.com/pipe-dev/pipe/stages"
)

// live turns the engine's snapshots of a run into what the terminal, the
// progress line, status.json and the warnings show: rates over the last
// minute and the last 15 minutes, the input read of its total, the fleet
// and each server, and an ETA. It is fed from one goroutine (the engine's
// Progress callback), then read by the caller that fed it.
type live struct {
	plan *pipeline.Plan
	// expensive marks the stages whose work is the run's cost (generate):
	// their rate makes the ETA.
	expensive map[string]bool
	// upstream are the stages before the first expensive one: what they
	// reject, fail or skip never reaches it.
	upstream map[string]bool
	hist     []sample
	last     *engine.Summary
}

// sample is the counters of one snapshot, kept for rates over windows.
type sample struct {
	at     time.Duration
	stages []engine.StageSummary // without figures
	// tokens, answers and tiny are the fleet's output tokens and answers
	// over every generate stage.
	tokens, answers, tiny float64
}

// Windows the rates are taken over.
const (
	window1m  = time.Minute
	window15m = 15 * time.Minute
)

func newLive(plan *pipeline.Plan) *live {
	l := &live{plan: plan, expensive: map[string]bool{}, upstream: map[string]bool{}}
	var mark func(s *pipeline.PlanStage)
	mark = func(s *pipeline.PlanStage) {
		for _, e := range s.Inputs {
			if !l.upstream[e.From.ID()] {
				l.upstream[e.From.ID()] = true
				mark(e.From)
			}
		}
	}
	for _, s := range plan.Stages {
		if s.Spec.Expensive {
			l.expensive[s.ID()] = true
			if len(l.upstream) == 0 {
				mark(s)
			}
		}
	}
	return l
}

// add records a snapshot. Samples older than 15 minutes (and one more, the
// window's start) are dropped.
func (l *live) add(s *engine.Summary) {
	l.last = s
	if len(l.hist) == 0 && s.Elapsed > 0 {
		// The run started from zero: rates are right from the first
		// snapshot.
		zero := sample{stages: make([]engine.StageSummary, len(s.Stages))}
		for i, st := range s.Stages {
			zero.stages[i] = engine.StageSummary{StageCounts: engine.StageCounts{ID: st.ID, Kind: st.Kind}}
		}
		l.hist = append(l.hist, zero)
	}
	smp := sample{at: s.Elapsed, stages: make([]engine.StageSummary, len(s.Stages))}
	for i, st := range s.Stages {
		st.Figures, st.Fleet, st.Input, st.Reasons, st.Skips, st.QueuedByPort = nil, nil, nil, nil, nil, nil
		smp.stages[i] = st
	}
	for _, st := range s.Stages {
		if v := st.Fleet; v != nil {
			smp.tokens += float64(v.Tokens)
			smp.answers += float64(v.Answers)
			smp.tiny += float64(v.Tiny)
		}
	}
	l.hist = append(l.hist, smp)
	cut := 0
	for cut+1 < len(l.hist) && s.Elapsed-l.hist[cut+1].at >= window15m {
		cut++
	}
	if cut > 0 {
		l.hist = append(l.hist[:0], l.hist[cut:]...)
	}
}

// since returns the newest sample and the oldest one at most w before it
// (the first sample when the run is younger than w).
func (l *live) since(w time.Duration) (from, to sample, ok bool) {
	if len(l.hist) < 2 {
		return sample{}, sample{}, false
	}
	to = l.hist[len(l.hist)-1]
	i := sort.Search(len(l.hist), func(i int) bool { return to.at-l.hist[i].at <= w })
	if i >= len(l.hist)-1 {
		i = len(l.hist) - 2
	}
	return l.hist[i], to, true
}

// rate is per second over w of what f picks from a sample.
func (l *live) rate(w time.Duration, f func(sample) float64) float64 {
	from, to, ok := l.since(w)
	if !ok {
		return 0
	}
	dt := (to.at - from.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return (f(to) - f(from)) / dt
}

func stageOf(s sample, i int) engine.StageSummary {
	if i < len(s.stages) {
		return s.stages[i]
	}
	return engine.StageSummary{}
}

// done is what a stage finished with: sent on, rejected or failed.
func done(st engine.StageSummary) int64 { return st.Out + st.Rejected + st.Failed }

// liveStatus is a run's live figures as status.json holds them
// (rundir.Live, declared once in pipeline/rundir), with the generation's
// figures as liveFleet.
type liveStatus = rundir.Live[liveFleet]

type (
	liveStage = rundir.Stage
	liveInput = rundir.Input
	liveETA   = rundir.ETA
	liveEdge  = rundir.Edge
)

// liveFleet is the generating stage's view of its fleet (view.Fleet) with
// the rates the run measures over its snapshots: status.json's "generation".
type liveFleet struct {
	Stage string `json:"stage"`
	view.Fleet
	Tokens1m  float64 `json:"output_tokens_per_second_1m"`
	Tokens15m float64 `json:"output_tokens_per_second_15m"`
}

type liveServer = view.Server

// status computes the live figures of the last snapshot.
func (l *live) status() *liveStatus {
	s := l.last
	if s == nil {
		return &liveStatus{}
	}
	ls := &liveStatus{State: stateRunning, ElapsedS: s.Elapsed.Seconds(), Finished: s.Finished, Before: s.FinishedAtStart, Unfin: s.Unfinished, Dead: s.DeadLetters}
	if s.Drained {
		ls.State = stateDraining
	}
	if !s.LastCommit.IsZero() {
		ls.Commit = s.LastCommit.UTC().Format(time.RFC3339)
	}
	for i, st := range s.Stages {
		i := i
		x := liveStage{StageSummary: st, Expensive: l.expensive[st.ID]}
		x.Done1m = l.rate(window1m, func(m sample) float64 { return float64(done(stageOf(m, i))) })
		x.Done15m = l.rate(window15m, func(m sample) float64 { return float64(done(stageOf(m, i))) })
		if d := done(st); d > 0 {
			x.RejectShare = float64(st.Rejected) / float64(d)
		}
		ls.Stages = append(ls.Stages, x)
		for _, port := range sortedPorts(st.QueuedByPort) {
			ls.Edges = append(ls.Edges, liveEdge{From: st.ID, Port: port, Depth: st.QueuedByPort[port]})
		}
		if v := st.Input; v != nil && ls.Input == nil {
			ls.Input = inputOf(st, *v)
		}
		if v := st.Fleet; v != nil && ls.Fleet == nil {
			ls.Fleet = &liveFleet{Stage: st.ID, Fleet: *v}
			ls.Fleet.Tokens1m = l.rate(window1m, func(m sample) float64 { return m.tokens })
			ls.Fleet.Tokens15m = l.rate(window15m, func(m sample) float64 { return m.tokens })
		}
	}
	ls.ETA = l.eta(ls)
	ls.Economy = rundir.EconomyOf(s.Stages)
	return ls
}

func sortedPorts(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// inputOf is the input's position: the records read of the total, known
// once the file is read or its lines counted, estimated from the bytes
// read until then.
func inputOf(st engine.StageSummary, v view.Input) *liveInput {
	in := &liveInput{Stage: st.ID, Bytes: v.Bytes, BytesRead: min(v.BytesRead, v.Bytes), Records: st.In}
	in.Complete = st.In > 0 && st.In == done(st)+st.Skipped && in.BytesRead >= in.Bytes
	if in.Bytes > 0 {
		in.Share = float64(in.BytesRead) / float64(in.Bytes)
	}
	in.Estimated = st.In
	switch {
	case in.Complete:
	case v.Lines > 0:
		in.Estimated, in.Counted = max(st.In, v.Lines), true
	case in.BytesRead > 0:
		in.Estimated = max(st.In, int64(math.Round(float64(st.In)*float64(in.Bytes)/float64(in.BytesRead))))
	}
	return in
}

// eta is from the prompts left (the input's total, estimated from its
// bytes until it is read, less what the expensive stage finished or the
// run skipped as done). Where that stage is the fleet and the fleet is the
// bottleneck (it holds nearly all it may, or nothing is left to send), the
// time is pipe plan's model of it (view.Fleet.SecondsFor: what is not sent
// yet at the servers' concurrency over their recent latency, then the
// drain), which follows a server that slows down at once and counts the
// requests in flight; otherwise the stage's rate over the last minute (15
// minutes while the last minute saw nothing).
func (l *live) eta(ls *liveStatus) *liveETA {
	if ls.Input == nil {
		return nil
	}
	var work *liveStage
	for i := range ls.Stages {
		if l.expensive[ls.Stages[i].ID] {
			work = &ls.Stages[i]
			break
		}
	}
	if work == nil && len(ls.Stages) > 0 {
		work = &ls.Stages[len(ls.Stages)-1]
	}
	var dropped int64 // never reach the work
	for _, st := range ls.Stages {
		if l.upstream[st.ID] {
			dropped += st.Rejected + st.Failed + st.Skipped
		}
	}
	// Of the input not read yet, a shard of N takes 1/N; the ids finished
	// before this run that are not met yet (a plan's spread sample, an
	// earlier start's stragglers) will be skipped, not done.
	unread := max(0, ls.Input.Estimated-ls.Input.Records)
	if sh := l.plan.File.Shard; sh != nil && sh.Count > 1 {
		unread /= int64(sh.Count)
	}
	for _, st := range ls.Stages {
		if f, ok := figure.Find(st.Figures, stages.FigureFinishedBefore); ok && l.upstream[st.ID] {
			unread = max(0, unread-max(0, int64(f.Value)-st.Skips["done"]))
		}
	}
	remaining := max(0, unread+min(ls.Input.Records, ls.Input.Estimated)-dropped-done(work.StageSummary)-work.Skipped)
	rate := work.Done1m
	if rate <= 0 {
		rate = work.Done15m
	}
	e := &liveETA{Remaining: remaining, PerSecond: rate, Estimated: !ls.Input.Complete && !ls.Input.Counted}
	if rate > 0 {
		e.Seconds, e.By = float64(remaining)/rate, "rate"
	}
	if f := ls.Fleet; f != nil && f.Stage == work.ID && remaining > 0 {
		queued := remaining - f.InFlight
		if queued <= 0 || 10*f.InFlight >= 9*f.Capacity {
			if s, ok := f.SecondsFor(queued); ok {
				e.Seconds, e.By = s, "fleet"
			}
		}
	}
	// Once the estimate has run out, a quiet server is what the rest
	// waits on well before quietTail: an "ETA 0s" that stays says nothing.
	quiet := quietTail
	if e.Seconds < 1 {
		quiet = quietPastETA
	}
	if e.Waiting = tailWait(ls.Fleet, remaining, quiet); e.Waiting != "" {
		e.Seconds = 0
	}
	return e
}

// quietTail is how long a server must have brought nothing back, holding
// the run's last requests, before the ETA says it waits on it; quietPastETA
// the same once the estimated time has run out.
const (
	quietTail    = time.Minute
	quietPastETA = 10 * time.Second
)

// tailWait says what the run waits on when every record left is a
// request in flight and the servers holding some have answered none for
// quiet: the rate of the run says nothing about them (a hung server
// holds them until stall_timeout sends them elsewhere). "" otherwise.
func tailWait(f *liveFleet, remaining int64, quiet time.Duration) string {
	if f == nil || remaining <= 0 || remaining > f.InFlight {
		return ""
	}
	var parts []string
	for _, s := range f.Servers {
		if s.InFlight > 0 && s.QuietSeconds >= quiet.Seconds() {
			parts = append(parts, fmt.Sprintf("%s on %s, no output for %s", numfmt.Plural(int(s.InFlight), "request"), s.Name, formatETA(s.QuietSeconds)))
		}
	}
	return strings.Join(parts, "; ")
}

// topReasons lists rejections by reason, largest first: "empty_answer 61%,
// truncated 3%" of what the stage finished, at most n.
func topReasons(st liveStage, n int) string {
	d := done(st.StageSummary)
	if d == 0 || len(st.Reasons) == 0 {
		return ""
	}
	keys := make([]string, 0, len(st.Reasons))
	for k := range st.Reasons {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := st.Reasons[keys[i]], st.Reasons[keys[j]]
		return a > b || (a == b && keys[i] < keys[j])
	})
	var parts []string
	for i, k := range keys {
		if i == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, k+" "+pct(float64(st.Reasons[k])/float64(d)))
	}
	return strings.Join(parts, ", ")
}

func pct(share float64) string {
	switch {
	case share >= 0.1:
		return numfmt.Count(math.Round(share*100)) + "%"
	case share > 0:
		return strconv.FormatFloat(share*100, 'f', 1, 64) + "%"
	}
	return "0%"
}

// formatETA shows seconds as "2d3h", "1h23m", "4m10s", "?" when unknown.
func formatETA(s float64) string {
	if s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return "?"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= 24*time.Hour:
		return fmtDur(d/(24*time.Hour), "d", (d%(24*time.Hour))/time.Hour, "h")
	case d >= time.Hour:
		return fmtDur(d/time.Hour, "h", (d%time.Hour)/time.Minute, "m")
	case d >= time.Minute:
		return fmtDur(d/time.Minute, "m", (d%time.Minute)/time.Second, "s")
	}
	return d.Round(time.Second).String()
}

func fmtDur(a time.Duration, au string, b time.Duration, bu string) string {
	return numfmt.Count(float64(a)) + au + numfmt.Count(float64(b)) + bu
}
