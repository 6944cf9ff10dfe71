// Package runreport builds the report of a run directory — counts,
// throughput over time, reject reasons, and the distributions of prompt,
// thinking, answer and loss tokens per row — from what the run committed,
// and renders it as text and as one self-contained HTML file with inline
// SVG plots (no script, no network needed to view it).
package runreport

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// HTMLFile is the report's name in the run directory.
const HTMLFile = layout.Report

// Report is what a run directory's committed state says about the run.
type Report struct {
	RunDir   string    `json:"run_dir"`
	Pipeline string    `json:"pipeline,omitempty"`
	Created  time.Time `json:"created,omitzero"`
	Starts   int       `json:"starts"`
	// State, Updated and Stages are from status.json: the last start's
	// counts.
	State   string        `json:"state,omitempty"`
	Updated string        `json:"updated,omitempty"`
	Error   string        `json:"error,omitempty"`
	Stages  []StageCounts `json:"stages,omitempty"`
	// Finished is the ids in done.ids.
	Finished int64    `json:"finished"`
	Outputs  []Output `json:"outputs"`
	// Rejected counts rejections by stage and reason over every place a
	// rejected record was committed (dead letters, writers), each record
	// once; Failed the same for failures.
	Rejected    []Reason    `json:"rejected"`
	RejectedAll int64       `json:"rejected_total"`
	Failed      []Reason    `json:"failed"`
	FailedAll   int64       `json:"failed_total"`
	Throughput  *Throughput `json:"throughput,omitempty"`
	// Tokens are output tokens per second over time, of the fleet and of
	// each server (tokens.go).
	Tokens []Series `json:"output_tokens_per_second,omitempty"`
	// Limits are each server's concurrency limit over time (tokens.go).
	Limits []Series `json:"concurrency_limits,omitempty"`
	// SecondChances counts the rows later attempts made; nil when the run
	// gave none.
	SecondChances *SecondChances `json:"second_chances,omitempty"`
	// Economy is decoded tokens against trained ones and the output
	// lengths kept and rejected (economy.go); nil when no row had either.
	Economy *Economy `json:"economy,omitempty"`
	// Spared is what the stages before generation rejected, and the
	// decode that saved; nil when they rejected nothing.
	Spared *Spared `json:"spared,omitempty"`
	// Handoffs are the SpecForge data: blocks the run wrote beside its
	// trainer-layout outputs (handoff.go).
	Handoffs []Handoff `json:"handoffs,omitempty"`
	// Samples are a few accepted rows of each output and a few rejected
	// rows of each reason (samples.go).
	Samples []Sample `json:"samples,omitempty"`
	// Redone counts, per stage, the records done again over every start
	// because their journal entries were found damaged (StageCounts.Redone).
	Redone map[string]int64 `json:"redone_after_journal_damage,omitempty"`
	// ServerEvents are what happened to the servers the run launched,
	// over every start, from the timeline: each crash, hang, fatal log
	// line, start that never got ready, restart and give-up (starts and
	// readiness are counted in Launched).
	ServerEvents []rundir.ServerEvent `json:"server_events,omitempty"`
	// Launched counts, per launched server, its starts and the ends
	// nobody asked for.
	Launched []LaunchedServer `json:"launched,omitempty"`
	// Notes are things the report could not read or had to estimate.
	Notes     []string  `json:"notes,omitempty"`
	Generated time.Time `json:"generated"`

	verdicts *verdicts // with Options.Verdicts
}

// StageCounts is one stage's accounting in the last start, as status.json
// holds it (declared once, in package pipeline).
type StageCounts = engine.StageCounts

// Output is one writer's committed output and the distributions of its rows.
type Output struct {
	Stage string `json:"stage"`
	Kind  string `json:"kind"`
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	// RejectedRows are rows that carry a rejection (a writer of rejects).
	RejectedRows int64 `json:"rejected_rows"`
	// RejectsOnly: the writer takes only rejected ports (a file of
	// rejects, not training rows).
	RejectsOnly   bool             `json:"rejects_only,omitempty"`
	FinishReasons map[string]int64 `json:"finish_reasons,omitempty"`
	// ToolRows are rows whose conversation declares tools.
	ToolRows int64 `json:"tool_rows,omitempty"`
	// Dists are prompt, thinking, answer and loss tokens per row; a
	// distribution is absent when no row has its part.
	Dists []Dist `json:"distributions"`
}

// SecondChances are the training rows each extra attempt made (meta.attempt
// 2, 3, …: a second chance recovered the prompt) and the rejects that
// had one and still failed, by their last attempt.
type SecondChances struct {
	Recovered map[int]int64 `json:"recovered"`
	LostAfter map[int]int64 `json:"rejected_after"`
}

func (r *Report) secondChances() *SecondChances {
	if r.SecondChances == nil {
		r.SecondChances = &SecondChances{Recovered: map[int]int64{}, LostAfter: map[int]int64{}}
	}
	return r.SecondChances
}

// Text is the headline's sentence: "second chances recovered 90 prompts
// (attempt 2: 77, attempt 3: 13); 1 rejected after its last attempt".
func (s *SecondChances) Text() string {
	byAttempt := func(m map[int]int64) (int64, string) {
		var total int64
		var parts []string
		for _, a := range slices.Sorted(maps.Keys(m)) {
			total += m[a]
			parts = append(parts, fmt.Sprintf("attempt %d: %d", a, m[a]))
		}
		return total, strings.Join(parts, ", ")
	}
	rec, recBy := byAttempt(s.Recovered)
	text := fmt.Sprintf("second chances recovered %s", numfmt.Plural(rec, "prompt"))
	if rec > 0 {
		text += " (" + recBy + ")"
	}
	if lost, _ := byAttempt(s.LostAfter); lost > 0 {
		text += fmt.Sprintf("; %d rejected after their last attempt", lost)
	}
	return text
}

// Reason is a count of rejections (or failures) by stage and reason.
type Reason struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// Dist names, in the order shown.
const (
	DistPrompt   = "prompt tokens"
	DistThinking = "thinking tokens"
	DistAnswer   = "answer tokens"
	DistLoss     = "loss tokens"
)

// Options tune Build.
type Options struct {
	// Tokenizer is a model directory whose </think> id splits output ids
	// into thinking and answer tokens when the server did not report
	// reasoning_tokens; "" uses a tokenizer the run's stages name.
	Tokenizer string
	// Verdicts keeps each id's verdict (accepted, or rejected with its
	// reason, or failed), for Compare: a few tens of bytes an id.
	Verdicts bool
	// VerdictsOnly is Verdicts, reading nothing else of the outputs (no
	// distributions, no finish reasons): for a Compare of a run whose
	// report is not shown.
	VerdictsOnly bool
}

// Build reads the run directory dir. It fails only when dir is not a run
// directory; what it cannot read of an output is said in Notes.
func Build(ctx context.Context, dir string, opts Options) (*Report, error) {
	run, err := rundir.ReadRun(dir)
	if err != nil {
		return nil, err
	}
	if run == nil {
		if _, serr := os.Stat(dir); serr != nil {
			return nil, fmt.Errorf("no run directory %s", dir)
		}
		return nil, fmt.Errorf("%s is not a run directory: it has no %s (pipe run writes it)", dir, rundir.RunFile)
	}
	r := &Report{RunDir: dir, Pipeline: run.Pipeline, Created: run.Created, Starts: len(run.History), Generated: time.Now().UTC()}
	r.readStatus()
	if r.Finished, err = commitlog.CountIDs(filepath.Join(dir, pipeline.DoneFile)); err != nil {
		r.note("%v", err)
	}
	pts, err := ReadTimeline(dir)
	if err == nil {
		r.Redone = redone(pts)
		r.ServerEvents, r.Launched = serverEvents(pts)
	}
	if err != nil {
		r.note("%s: %v", TimelineFile, err)
	} else if r.Throughput = throughput(pts); r.Throughput == nil {
		r.note("no throughput over time: %s has fewer than two points (runs of this pipe version write it)", TimelineFile)
	} else {
		r.Tokens = tokenRates(pts)
		r.Limits = concurrencyLimits(pts)
	}
	rd := newReader(ctx, r, tokenizerDir(run.Settings, opts.Tokenizer))
	if hs, err := commitlog.ReadIDLog(layout.Recovered(dir)); err != nil {
		r.note("%v", err)
	} else if len(hs) > 0 {
		rd.recovered = commitlog.NewSet(hs)
	}
	rd.verdictsOnly = opts.VerdictsOnly
	if opts.Verdicts || opts.VerdictsOnly {
		rd.verdicts = newVerdicts()
		r.verdicts = rd.verdicts
	}
	ws := writers(run, r.Stages)
	if !opts.VerdictsOnly {
		if run.Trainer != nil {
			rd.maxLength = run.Trainer.MaxLength
		}
		training := 0
		for _, w := range ws {
			if !w.rejectsOnly {
				training++
			}
		}
		rd.econ = newEconomy(rd.maxLength, training)
	}
	for _, w := range ws {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rd.output(w)
		r.Outputs[len(r.Outputs)-1].RejectsOnly = w.rejectsOnly
	}
	for _, class := range layout.DeadLetterClasses {
		files, _ := filepath.Glob(layout.DeadLetters(dir, class, "*"))
		sort.Strings(files)
		for _, p := range files {
			rd.deadLetters(p)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e := rd.econ; e != nil && (e.decoded > 0 || e.trained > 0) {
		r.Economy = e.result()
	}
	r.Rejected, r.RejectedAll = sortReasons(rd.rejects)
	r.Failed, r.FailedAll = sortReasons(rd.fails)
	var mean float64
	if e := r.Economy; e != nil && e.Kept.N+e.Rejected.N > 0 {
		mean = float64(e.Kept.Sum+e.Rejected.Sum) / float64(e.Kept.N+e.Rejected.N)
	}
	r.Spared = NewSpared(r.Rejected, BeforeGeneration(rundir.RecordedStages(run.Settings)), r.Finished, mean)
	r.readHandoffs(ws)
	r.addSamples(ctx, ws, rd.tokenizer)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Report) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *Report) readStatus() {
	st, err := rundir.ReadStatus[json.RawMessage](r.RunDir)
	if err != nil {
		r.note("%v", err) // it names the file
		return
	}
	if st == nil {
		return
	}
	r.State, r.Updated, r.Error = st.State, st.Updated, st.Error
	for _, s := range st.Stages {
		r.Stages = append(r.Stages, s.StageCounts)
	}
}

// writer is a stage of the run that writes rows, from run.json.
type writer struct {
	id, kind, path string
	rejectsOnly    bool // every input is a rejected port
	takesRejects   bool // some input is a rejected port
}

// newWriter is stage s's writer (its path), with what run.json's settings
// say of its inputs: whether every one (a writer of rejects, not of
// training rows) or some is a rejected port.
func newWriter(s rundir.RecordedStage, kind, path string) writer {
	w := writer{id: s.ID, kind: kind, path: path}
	w.rejectsOnly = len(s.Inputs) > 0
	for _, port := range s.Inputs {
		rejected := strings.HasSuffix(port, ".rejected")
		w.rejectsOnly = w.rejectsOnly && rejected
		w.takesRejects = w.takesRejects || rejected
	}
	return w
}

// writers lists run.json's outputs of rows (an older run.json without
// outputs: its settings' stages whose kind writes rows) in the order of
// the run's stages. A kind this binary does not know is taken by what it
// wrote: a local file or directory, not an upload's copy.
func writers(run *rundir.Run, stages []StageCounts) []writer {
	order := map[string]int{}
	for i, s := range stages {
		order[s.ID] = i + 1
	}
	recorded := rundir.RecordedStages(run.Settings)
	byID := map[string]rundir.RecordedStage{}
	for _, s := range recorded {
		byID[s.ID] = s
	}
	var out []writer
	for _, o := range run.Outputs {
		rows, known := writesRows(o.Kind)
		if rows || !known && len(o.From) == 0 && filepath.IsAbs(o.Path) {
			s := byID[o.Stage]
			s.ID = o.Stage
			out = append(out, newWriter(s, o.Kind, o.Path))
		}
	}
	for _, s := range recorded {
		if rows, _ := writesRows(s.Kind); len(run.Outputs) == 0 && s.Str("path") != "" && rows {
			out = append(out, newWriter(s, s.Kind, s.Str("path")))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := order[out[i].id], order[out[j].id]
		if a != b && a != 0 && b != 0 {
			return a < b
		}
		return out[i].id < out[j].id
	})
	return out
}

// tokenizerDir is opts' tokenizer, or the first one a stage of the run names.
func tokenizerDir(settings map[string]any, given string) string {
	if given != "" {
		return given
	}
	for _, s := range rundir.RecordedStages(settings) {
		if t := s.Str("tokenizer"); t != "" {
			if _, err := os.Stat(filepath.Join(t, "tokenizer.json")); err == nil {
				return t
			}
		}
	}
	return ""
}

func sortReasons(m map[[2]string]int64) ([]Reason, int64) {
	out := make([]Reason, 0, len(m))
	var total int64
	for k, n := range m {
		out = append(out, Reason{Stage: k[0], Reason: k[1], Count: n})
		total += n
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Stage+out[i].Reason < out[j].Stage+out[j].Reason
	})
	return out, total
}
