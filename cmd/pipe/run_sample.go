package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/view"
)

// planWork is what a plan samples: the input's records and those finished
// before it.
type planWork struct {
	Records, Finished int64
}

// countWork counts the records of every input (pipe check --data's
// judgement) and the ids the run directory finished already.
func countWork(ctx context.Context, plan *pipeline.Plan) (planWork, error) {
	var w planWork
	for _, ps := range plan.Stages {
		st, err := ps.Spec.New.Stage(ps.Config)
		if err != nil {
			return w, err
		}
		ic, ok := st.(pipeline.InputChecker)
		if !ok {
			continue
		}
		rep, err := ic.CheckInput(ctx, &pipeline.Env{StageID: ps.ID(), DuplicatesHandled: pipeline.DuplicatesHandled(ps)})
		if err != nil {
			return w, fmt.Errorf("stage %q: %w", ps.ID(), err)
		}
		if rep != nil {
			w.Records += rep.Records
		}
	}
	n, err := commitlog.CountIDs(filepath.Join(plan.File.RunDir, pipeline.DoneFile))
	if err == nil {
		w.Finished = int64(n)
	}
	return w, nil
}

// sampleOf is the spread sample of n prompts of the work left.
func sampleOf(w planWork, n int64) pipeline.Sample {
	left := max(0, w.Records-w.Finished)
	return pipeline.Sample{Every: max(1, left/max(n, 1)), Max: n}
}

// Interval is a projected figure and its 95% interval.
type Interval struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Projection is what pipe plan says of the rest of a run.
type Projection struct {
	Sample      int64 `json:"sample"`       // completions measured
	SampleEvery int64 `json:"sample_every"` // one prompt in this many of the work left
	Left        int64 `json:"prompts_left"` // after the sample
	Servers     int   `json:"servers"`
	// PerServer are the servers as measured.
	PerServer []PlanServer `json:"per_server"`
	// Per prompt, measured.
	OutputTokensMean float64 `json:"output_tokens_per_prompt"`
	OutputTokensP99  int     `json:"output_tokens_p99"`
	CutShare         float64 `json:"cut_at_limit_share"`
	KeptShare        float64 `json:"kept_share"`
	TokensPerSecond  float64 `json:"fleet_output_tokens_per_second"`
	// The rest of the run, projected.
	WallSeconds  Interval `json:"wall_seconds"`
	GPUHours     Interval `json:"gpu_hours"`
	OutputTokens Interval `json:"output_tokens"`
	TrainingRows Interval `json:"training_rows"`
	// Spared is what the stages before generation rejected in the sample,
	// projected over the prompts left; nil when they rejected none. The
	// figures above are of the prompts left that reach generation.
	Spared *PlanSpared `json:"rejected_before_generation,omitempty"`
	// DecodedPerTrained is the sample's, where it built training rows.
	DecodedPerTrained float64 `json:"decoded_per_trained,omitempty"`
	// SlowestSeconds is how long the slowest 1% of prompts take (p99).
	SlowestSeconds float64 `json:"slowest_1pct_seconds"`
	// MaxOutputTokens is the setting now; Recommended what the lengths
	// ask for (0: the setting is fine).
	MaxOutputTokens int64  `json:"max_output_tokens"`
	Recommended     int64  `json:"recommended_max_output_tokens,omitempty"`
	Why             string `json:"recommendation,omitempty"`
	// trainerMax is [trainer] max_length (0: none): rows cut at the
	// length limit are kept, so a larger max_output_tokens changes none.
	trainerMax int64
}

// PlanServer is one server as the sample measured it.
type PlanServer struct {
	Name        string  `json:"name"`
	Concurrency int64   `json:"concurrency"`
	Completions int64   `json:"completions"`
	LatencyMean float64 `json:"latency_mean_s"`
	// TokensPerSecond is what it decodes busy: its concurrency over its
	// mean latency, times the fleet's mean output tokens.
	TokensPerSecond float64 `json:"output_tokens_per_second"`
	Accept          float64 `json:"spec_accept_length,omitempty"`
	// TTFT is its mean time to first token, where its /metrics report
	// it (SGLang's --enable-metrics).
	TTFT float64 `json:"ttft_mean_s,omitempty"`
}

// project makes the projection of the work left after a sample run whose
// summary is s (sample: the sample it read; work: the input before it).
func project(plan *pipeline.Plan, s *engine.Summary, sample pipeline.Sample, work planWork) (*Projection, error) {
	var fleet *view.Fleet
	for _, st := range s.Stages {
		if st.Fleet != nil {
			fleet = st.Fleet
			break
		}
	}
	if work.Records <= work.Finished {
		return nil, fmt.Errorf("nothing left to plan: every prompt of the input is finished")
	}
	if fleet == nil || fleet.Lengths == nil || fleet.Lengths.Completions < 2 {
		return nil, fmt.Errorf("the sample generated too few completions to project from")
	}
	l := fleet.Lengths
	n := float64(l.Completions)
	p := &Projection{Sample: l.Completions, SampleEvery: sample.Every, Servers: len(fleet.Servers),
		OutputTokensMean: l.Mean, OutputTokensP99: l.P99, CutShare: float64(l.Cut) / n,
		MaxOutputTokens: fleet.MaxOutputTokens, SlowestSeconds: l.LatencyP99}
	p.Left = max(0, work.Records-work.Finished-int64(s.Finished-s.FinishedAtStart))
	left := float64(p.Left)
	if sp := sparedOf(plan, s); sp != nil && sp.Of > 0 {
		// Of the prompts left, those the stages before generation would
		// reject never reach it: the rest is what the fleet generates.
		p.Spared = projectSpared(sp, left, l.Mean)
		left *= 1 - p.Spared.Share
	}

	// The fleet's model of time (view.Fleet.SecondsFor, which the
	// run's ETA uses too): each server's concurrency over its mean
	// latency, then the drain. A sample's servers all count as measured,
	// whatever their state when it ended.
	model := *fleet
	model.Servers = slices.Clone(fleet.Servers)
	for i := range model.Servers {
		model.Servers[i].State = ""
	}
	perSecond := model.Throughput()
	for _, sv := range model.Servers {
		ps := PlanServer{Name: sv.Name, Concurrency: sv.Concurrency, Completions: sv.Completions, LatencyMean: sv.LatencyMean,
			Accept: sv.Accept, TTFT: sv.TTFTSeconds}
		if sv.LatencyMean > 0 && sv.Completions > 0 {
			ps.TokensPerSecond = float64(sv.Concurrency) / sv.LatencyMean * l.Mean
		}
		p.PerServer = append(p.PerServer, ps)
	}
	if perSecond <= 0 {
		return nil, fmt.Errorf("no server completed a request in the sample")
	}
	p.TokensPerSecond = perSecond * l.Mean

	// Output tokens: the mean per prompt, its standard error.
	se := l.SD / math.Sqrt(n)
	p.OutputTokens = Interval{left * l.Mean, left * max(0, l.Mean-1.96*se), left * (l.Mean + 1.96*se)}
	// Wall: the prompts left at the fleet's rate, the latency scaling
	// with the tokens, then the drain.
	rel := 1.96 * se / max(l.Mean, 1)
	wall := left / perSecond
	tail := model.Drain()
	p.WallSeconds = Interval{wall + tail, wall*max(0, 1-rel) + tail, wall*(1+rel) + tail}
	servers := float64(p.Servers)
	p.GPUHours = Interval{p.WallSeconds.Value * servers / 3600, p.WallSeconds.Low * servers / 3600, p.WallSeconds.High * servers / 3600}

	// Training rows: the share kept (the training output's rows of the
	// sample, trainingRows), a binomial interval.
	rows := trainingRows(plan, s)
	k := min(1, float64(rows)/n)
	p.KeptShare = k
	half := 1.96 * math.Sqrt(k*(1-k)/n)
	p.TrainingRows = Interval{left * k, left * max(0, k-half), left * min(1, k+half)}
	if e := rundir.EconomyOf(s.Stages); e != nil {
		p.DecodedPerTrained = e.Ratio
	}
	if t := plan.File.Trainer; t != nil {
		p.trainerMax = int64(t.MaxLength)
	}
	p.recommend(l)
	return p, nil
}

// recommend says what max_output_tokens the measured lengths ask for.
func (p *Projection) recommend(l *view.Lengths) {
	switch {
	case p.MaxOutputTokens <= 0:
	case p.CutShare > 0.05 && p.trainerMax > 0:
		// A row cut at the limit is kept as the trainer would cut it:
		// decoding further would only be cut away again.
		p.Why = fmt.Sprintf("%.0f%% of the sample reached the length limit and is kept, as [trainer] max_length = %d cuts it; a larger max_output_tokens would not change the rows",
			100*p.CutShare, p.trainerMax)
	case p.CutShare > 0.05:
		p.Recommended = roundUp(2*p.MaxOutputTokens, 256)
		p.Why = fmt.Sprintf("%.0f%% of the sample was cut at max_output_tokens = %d: the model writes more; try %d (or declare [trainer] max_length so rows cut at it are kept)",
			100*p.CutShare, p.MaxOutputTokens, p.Recommended)
	case float64(l.P99)*1.25 < float64(p.MaxOutputTokens)/2:
		p.Recommended = roundUp(int64(float64(l.P99)*1.25), 256)
		p.Why = fmt.Sprintf("the longest 1%% of outputs are under %d tokens; %d leaves a quarter more room and bounds a runaway request", l.P99, p.Recommended)
	}
}

func roundUp(x, to int64) int64 { return (x + to - 1) / to * to }

// trainingRows is the rows the training output committed in this start:
// of the outputs of accepted records only (no rejected port among their
// inputs), the one furthest down the graph (a writer of the completions
// beside the training rows is not it), the most rows among equals.
func trainingRows(plan *pipeline.Plan, s *engine.Summary) int64 {
	var best int64
	bestDepth := -1
	for _, st := range s.Stages {
		ps := plan.Lookup(st.ID)
		// A writer keeps an output it can verify (its side ports, such
		// as write-arrow's shards, send on what it committed).
		if ps == nil || ps.Spec.Verify == nil || ps.Spec.Source {
			continue
		}
		pure := len(ps.Inputs) > 0
		for _, in := range ps.Inputs {
			pure = pure && in.Port != pipeline.RejectedPort
		}
		if d := depth(ps); pure && (d > bestDepth || d == bestDepth && st.Out > best) {
			best, bestDepth = st.Out, d
		}
	}
	return best
}

// depth is the most stages on a path from a source to ps.
func depth(ps *pipeline.PlanStage) int {
	d := 0
	for _, in := range ps.Inputs {
		d = max(d, 1+depth(in.From))
	}
	return d
}

// writeProjection prints the projection for a person.
func writeProjection(w io.Writer, p *Projection) {
	d := func(s float64) string {
		if s < 60 {
			return fmt.Sprintf("%.3gs", s)
		}
		return formatETA(s)
	}
	fmt.Fprintf(w, "\nplan from a sample of %d prompts (one in %d of the work left), %d servers:\n", p.Sample, p.SampleEvery, p.Servers)
	fmt.Fprintf(w, "  measured: %s output tokens per prompt (p99 %s), %.1f%% cut at max_output_tokens, %.1f%% kept; the fleet decodes %s tokens/s busy\n",
		count(int64(p.OutputTokensMean)), count(int64(p.OutputTokensP99)), 100*p.CutShare, 100*p.KeptShare, numfmt.Count(p.TokensPerSecond))
	for _, s := range p.PerServer {
		accept := ""
		if s.TTFT > 0 {
			accept = fmt.Sprintf(", time to first token %s", d(s.TTFT))
		}
		if s.Accept > 0 {
			accept += fmt.Sprintf(", speculative accept length %.2f", s.Accept)
		}
		fmt.Fprintf(w, "    server %s: %d completions, concurrency %d, mean latency %s, %s tokens/s busy%s\n",
			s.Name, s.Completions, s.Concurrency, d(s.LatencyMean), numfmt.Count(s.TokensPerSecond), accept)
	}
	left := fmt.Sprintf("the %s prompts left", count(p.Left))
	if sp := p.Spared; sp != nil {
		fmt.Fprintf(w, "  before generation the sample's stages rejected %d of %d prompts (%s): of the prompts left about %s (%s – %s), %s tokens of decode spared\n",
			sp.Sample, sp.SampleOf, sp.Reasons, count(int64(sp.Prompts.Value)), count(int64(sp.Prompts.Low)), count(int64(sp.Prompts.High)), numfmt.Count(sp.Decode))
		fmt.Fprintf(w, "    near duplicates are found within the sample only (one prompt in %d): the whole input has more, which pipe run's summary counts\n", p.SampleEvery)
		left = fmt.Sprintf("the %s of them that reach generation", count(p.Left-int64(sp.Prompts.Value)))
	}
	fmt.Fprintf(w, "  for %s (95%% interval):\n", left)
	fmt.Fprintf(w, "    wall clock      %s (%s – %s)\n", d(p.WallSeconds.Value), d(p.WallSeconds.Low), d(p.WallSeconds.High))
	fmt.Fprintf(w, "    GPU-hours       %s (%s – %s)\n", gpuHours(p.GPUHours.Value), gpuHours(p.GPUHours.Low), gpuHours(p.GPUHours.High))
	fmt.Fprintf(w, "    output tokens   %s (%s – %s)\n", numfmt.Count(p.OutputTokens.Value), numfmt.Count(p.OutputTokens.Low), numfmt.Count(p.OutputTokens.High))
	fmt.Fprintf(w, "    training rows   %s (%s – %s)\n", numfmt.Count(p.TrainingRows.Value), numfmt.Count(p.TrainingRows.Low), numfmt.Count(p.TrainingRows.High))
	if p.DecodedPerTrained > 0 {
		fmt.Fprintf(w, "    decoded tokens per trained token %.2f\n", p.DecodedPerTrained)
	}
	fmt.Fprintf(w, "    the slowest 1%% of prompts take %s or more each\n", d(p.SlowestSeconds))
	if p.Why != "" {
		fmt.Fprintf(w, "  max_output_tokens: %s\n", p.Why)
	}
	fmt.Fprintf(w, "  the sample's completions are kept: pipe run of the same file goes on from them\n")
}

// printPlan prints the projection of a sample run (text on w, or JSON on
// out).
func printPlan(w, out io.Writer, asJSON bool, plan *pipeline.Plan, s *engine.Summary, sample pipeline.Sample, work planWork) error {
	p, err := project(plan, s, sample, work)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	writeProjection(w, p)
	return nil
}

// gpuHours shows x with the digits a small run needs: 0.019, not 0.0.
func gpuHours(x float64) string {
	switch {
	case x < 0.1:
		return fmt.Sprintf("%.3f", x)
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

// PlanSpared is what the stages before generation rejected in a plan's
// sample, and that share of the prompts left with its 95% interval
// (binomial), and the decode it spares at the sample's mean.
type PlanSpared struct {
	Sample   int64    `json:"sample_rejected"`
	SampleOf int64    `json:"sample_prompts"`
	Reasons  string   `json:"by_reason"`
	Share    float64  `json:"share"`
	Prompts  Interval `json:"prompts_left_rejected"`
	Decode   float64  `json:"decode_tokens_spared"`
}

func projectSpared(sp *runreport.Spared, left, meanOutput float64) *PlanSpared {
	n := float64(sp.Of)
	k := float64(sp.Prompts) / n
	half := 1.96 * math.Sqrt(k*(1-k)/n)
	parts := make([]string, len(sp.Reasons))
	for i, r := range sp.Reasons {
		parts[i] = fmt.Sprintf("%s %s %d", r.Stage, r.Reason, r.Count)
	}
	return &PlanSpared{Sample: sp.Prompts, SampleOf: sp.Of, Reasons: strings.Join(parts, ", "), Share: k,
		Prompts: Interval{left * k, left * max(0, k-half), left * min(1, k+half)}, Decode: left * k * meanOutput}
}
