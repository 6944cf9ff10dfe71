package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// printSummary writes the end-of-run summary: the stage table, then what
// was left for the next run, per-stage notes, and the totals.
func printSummary(w io.Writer, plan *pipeline.Plan, s *engine.Summary) {
	if s == nil || len(s.Stages) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsummary of %s after %s:\n", plan.File.Name, s.Elapsed.Round(time.Millisecond))
	printStageTable(w, s)
	var notStarted int64
	for _, st := range s.Stages {
		notStarted += st.NotStarted
	}
	expensive := expensiveStages(plan)
	if len(expensive) == 0 {
		// Without a costly stage there is no "before it" to count; the
		// records read and not finished (below) are each counted once.
		notStarted = 0
	}
	if notStarted > 0 {
		fmt.Fprintf(w, "not started: %d records (never reached %s) when the run stopped; the next run does them\n", notStarted, strings.Join(expensive, ", "))
	}
	for _, st := range s.Stages {
		printStageNotes(w, plan, st, expensive)
	}
	if e := rundir.EconomyOf(s.Stages); e != nil {
		fmt.Fprintf(w, "economy: %s in this start\n", e)
	}
	if sp := sparedOf(plan, s); sp != nil {
		fmt.Fprintln(w, sp.Text())
	}
	printTotals(w, plan, s, notStarted)
}

// printStageTable writes one row of counts per stage.
// in = out + rejected + failed + skipped + abandoned: in counts every
// record that reached the stage, abandoned ones too.
func printStageTable(w io.Writer, s *engine.Summary) {
	idw, kw := len("stage"), len("kind")
	for _, st := range s.Stages {
		idw, kw = max(idw, len(st.ID)), max(kw, len(st.Kind))
	}
	fmt.Fprintf(w, "  %-*s  %-*s  %9s  %9s  %9s  %9s  %9s  %s\n", idw, "stage", kw, "kind", "in", "out", "rejected", "failed", "skipped", "balanced")
	for _, st := range s.Stages {
		bal := "yes"
		switch {
		case !st.Balanced():
			bal = "no"
		case st.Abandoned > 0:
			bal = fmt.Sprintf("yes (%d abandoned)", st.Abandoned)
		}
		fmt.Fprintf(w, "  %-*s  %-*s  %9d  %9d  %9d  %9d  %9d  %s\n", idw, st.ID, kw, st.Kind, st.In, st.Out, st.Rejected, st.Failed, st.Skipped, bal)
	}
}

// expensiveStages lists the ids of the stages whose work costs (generate).
func expensiveStages(plan *pipeline.Plan) []string {
	var expensive []string
	for _, ps := range plan.Stages {
		if ps.Spec.Expensive {
			expensive = append(expensive, ps.ID())
		}
	}
	return expensive
}

// printStageNotes writes one stage's lines under the table: abandoned and
// replayed records, reject and skip reasons, its figures.
func printStageNotes(w io.Writer, plan *pipeline.Plan, st engine.StageSummary, expensive []string) {
	switch lost := st.Abandoned - st.NotStarted; {
	case lost <= 0:
	case plan.Lookup(st.ID) != nil && plan.Lookup(st.ID).Spec.Expensive:
		fmt.Fprintf(w, "%s: %d records in flight were abandoned; the next run does them again\n", st.ID, lost)
	default:
		fmt.Fprintf(w, "%s: %d records abandoned after %s; the next run takes them from the journal\n", st.ID, lost, strings.Join(expensive, ", "))
	}
	if st.Replayed > 0 {
		fmt.Fprintf(w, "%s: %d records taken from its journal (done by an earlier run, not redone)\n", st.ID, st.Replayed)
	}
	if st.Redone > 0 {
		fmt.Fprintf(w, "%s: %d records done again, their journal entries lost to damage (the warnings above name them)\n", st.ID, st.Redone)
	}
	if len(st.Reasons) > 0 {
		fmt.Fprintf(w, "rejected by %s: %s (%.1f%% of %d)\n", st.ID, countsByValue(st.Reasons), 100*float64(st.Rejected)/float64(max(st.In, 1)), st.In)
	}
	if len(st.Skips) > 0 {
		fmt.Fprintf(w, "skipped by %s: %s\n", st.ID, countsByValue(st.Skips))
	}
	for _, line := range figure.Lines(st.Figures) {
		who := st.ID
		if line.Subject != "" {
			who += ": " + line.Subject
		}
		fmt.Fprintf(w, "%s: %s\n", who, strings.Join(line.Parts, ", "))
	}
}

// printTotals writes the dead letters kept, the finished ids, the failed
// records and what was read but not finished.
func printTotals(w io.Writer, plan *pipeline.Plan, s *engine.Summary, notStarted int64) {
	for _, p := range s.DeadLetters {
		fmt.Fprintf(w, "kept: %s\n", p)
	}
	fmt.Fprintf(w, "finished ids in %s: %d (%d before this run, %d in it)\n",
		pipeline.DisplayPath(plan.File.RunDir), s.Finished, s.FinishedAtStart, s.Finished-s.FinishedAtStart)
	var failed int64
	for _, st := range s.Stages {
		failed += st.Failed
	}
	if failed > 0 {
		fmt.Fprintf(w, "failed: %d records (retries exhausted or a panic; [pipeline] max_failed = %s), kept in %s\n",
			failed, plan.File.MaxFailed.Text, pipeline.DisplayPath(layout.DeadLetterDir(plan.File.RunDir, layout.Failed)))
	}
	if s.Unfinished > 0 && s.Unfinished != notStarted {
		from := ""
		if expensive := expensiveStages(plan); len(expensive) > 0 {
			from = fmt.Sprintf(" (from %s's journal where it holds them)", strings.Join(expensive, ", "))
		}
		fmt.Fprintf(w, "not finished: %d records read in this run; the next run does them%s\n", s.Unfinished, from)
	}
}

// countsByValue prints counts largest first: "empty_answer 126, think_unclosed 23".
func countsByValue(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j])
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func indentLines(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}
