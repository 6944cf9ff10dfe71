package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/textfmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/pipeline/figure"
)

// count shows a record or token count compactly.
func count(n int64) string { return numfmt.Count(float64(n)) }

// rate shows a per-second rate.
func rate(r float64) string { return numfmt.Count(r) + "/s" }

// inputLine: "prompts: 412.3K of ~914.0K read (45% of 2.6 GiB)".
func inputLine(in *liveInput) string {
	total := "~" + count(in.Estimated)
	if in.Complete || in.Counted {
		total = count(in.Estimated)
	}
	return fmt.Sprintf("%s: %s of %s read (%s of %s)", in.Stage, count(in.Records), total, pct(in.Share), numfmt.Bytes(in.Bytes))
}

// etaLine: "ETA 1h23m: 501.7K left at 98.3/s".
func etaLine(e *liveETA) string {
	if e.Remaining == 0 && !e.Estimated {
		return "ETA 0s: nothing left"
	}
	left := count(e.Remaining)
	if e.Estimated {
		left = "~" + left
	}
	if e.Waiting != "" {
		return fmt.Sprintf("ETA ?: %s left, waiting on %s", left, e.Waiting)
	}
	if e.PerSecond <= 0 {
		return fmt.Sprintf("ETA ?: %s left, no rate yet", left)
	}
	return fmt.Sprintf("ETA %s: %s left at %s", formatETA(e.Seconds), left, rate(e.PerSecond))
}

// stageLine: "gen  generate  in 12.0K out 11.9K (3.1/s 1m, 2.9/s 15m) rejected 300 = 2.4% (empty_answer 2%, …) failed 0 queued 12".
func stageLine(st liveStage, idW, kindW int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  in %s  out %s (%s 1m, %s 15m)", idW, st.ID, kindW, st.Kind, count(st.In), count(st.Out), rate(st.Done1m), rate(st.Done15m))
	if st.Rejected > 0 {
		fmt.Fprintf(&b, "  rejected %s = %s", count(st.Rejected), pct(st.RejectShare))
		if r := topReasons(st, 3); r != "" {
			fmt.Fprintf(&b, " (%s)", r)
		}
	}
	if st.Failed > 0 {
		fmt.Fprintf(&b, "  FAILED %s", count(st.Failed))
	}
	if st.Skipped > 0 {
		fmt.Fprintf(&b, "  skipped %s", count(st.Skipped))
	}
	if st.Queued > 0 {
		fmt.Fprintf(&b, "  queued %d", st.Queued)
	}
	if w := waitingOf(st); w != "" {
		fmt.Fprintf(&b, "  WAITING: %s", w)
	}
	return b.String()
}

// waitingOf is what a stage says it is waiting for (a State figure named
// "waiting", e.g. uploads through an outage), or "".
func waitingOf(st liveStage) string {
	if f, ok := figure.Find(st.Figures, "waiting"); ok && f.Kind == figure.State {
		return f.Text
	}
	return ""
}

// fleetLine: "gen: in flight 336/336, output 12.3K tok/s 1m, 11.9K tok/s 15m; tiny answers 2%".
func fleetLine(f *liveFleet) string {
	s := fmt.Sprintf("%s: in flight %d/%d, output %s tok/s 1m, %s tok/s 15m, %s tokens", f.Stage, f.InFlight, f.Capacity,
		numfmt.Count(f.Tokens1m), numfmt.Count(f.Tokens15m), count(f.Tokens))
	if f.Answers > 0 {
		s += fmt.Sprintf("; tiny answers %s", pct(float64(f.Tiny)/float64(f.Answers)))
	}
	if f.Waiting != "" {
		s += "; WAITING for servers: " + f.Waiting
	}
	return s
}

// serverLine: "127.0.0.1:30000  ready  48/48  0.45/s  p95 1m12s  errors 2 (http_503 2)  accept 2.81".
func serverLine(s liveServer, nameW int) string {
	state := s.State
	if s.Reason != "" {
		state += " (" + s.Reason + ")"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %d/%d in flight  %s  p95 %s  errors %d", nameW, s.Name, s.InFlight, s.Concurrency, rate(s.PerSecond),
		(time.Duration(s.P95Seconds * float64(time.Second))).Round(time.Millisecond*10), s.ErrorsTotal)
	if len(s.Errors) > 0 {
		keys := make([]string, 0, len(s.Errors))
		for k := range s.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %d", k, s.Errors[k])
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	if s.Accept > 0 {
		fmt.Fprintf(&b, "  accept %.2f", s.Accept)
	}
	if s.Ejections > 0 {
		fmt.Fprintf(&b, "  ejected %d×", s.Ejections)
	}
	fmt.Fprintf(&b, "  %s", state)
	return b.String()
}

// liveLines is the full view of a run, one line each: input, ETA, the
// rejects, servers and tokens, stages, the fleet and its servers (what pipe status prints; the terminal shows
// the same under its input bar).
func liveLines(ls *liveStatus) []string {
	var out []string
	if ls.Input != nil {
		out = append(out, inputLine(ls.Input))
	}
	if ls.ETA != nil {
		out = append(out, etaLine(ls.ETA))
	}
	// The display's summary lines, in full (screen.go).
	if l := rejectLine(ls); l != nil {
		out = append(out, l.plainText())
	}
	if ls.Fleet != nil {
		out = append(out, serversLine(ls.Fleet).plainText(), tokensLine(ls).plainText())
	}
	return append(out, bodyLines(ls)...)
}

// bodyLines are liveLines without the input and the ETA.
func bodyLines(ls *liveStatus) []string {
	var out []string
	idW, kindW := 0, 0
	for _, st := range ls.Stages {
		idW, kindW = max(idW, len(st.ID)), max(kindW, len(st.Kind))
	}
	for _, st := range ls.Stages {
		out = append(out, stageLine(st, idW, kindW))
	}
	if f := ls.Fleet; f != nil {
		out = append(out, fleetLine(f))
		nameW := 0
		for _, s := range f.Servers {
			nameW = max(nameW, len(s.Name))
		}
		for _, s := range f.Servers {
			out = append(out, "  "+serverLine(s, nameW))
		}
	}
	return out
}

// progressLine is the compact line written every --progress-every when
// stderr is not a terminal (and to the run log).
func progressLine(ls *liveStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]", textfmt.Elapsed(ls.ElapsedS))
	for _, st := range ls.Stages {
		fmt.Fprintf(&b, " %s %d (%s)", st.ID, st.Out, rate(st.Done1m))
		if st.Rejected > 0 {
			fmt.Fprintf(&b, " rej %d=%s", st.Rejected, pct(st.RejectShare))
		}
		if st.Failed > 0 {
			fmt.Fprintf(&b, " FAILED %d", st.Failed)
		}
		if w := waitingOf(st); w != "" {
			fmt.Fprintf(&b, " WAITING: %s", w)
		}
		if f := ls.Fleet; f != nil && f.Stage == st.ID {
			fmt.Fprintf(&b, " in flight %d/%d %s tok/s", f.InFlight, f.Capacity, numfmt.Count(f.Tokens1m))
			ready := 0
			for _, s := range f.Servers {
				if s.State == "ready" {
					ready++
				}
			}
			fmt.Fprintf(&b, " servers %d/%d ready", ready, len(f.Servers))
			if f.Waiting != "" {
				fmt.Fprintf(&b, " WAITING: %s", f.Waiting)
			}
		}
		b.WriteString(" |")
	}
	if ls.Input != nil && !ls.Input.Complete {
		fmt.Fprintf(&b, " read %s", pct(ls.Input.Share))
	}
	if ls.ETA != nil && ls.ETA.Waiting != "" {
		fmt.Fprintf(&b, " waiting on %s", ls.ETA.Waiting)
	} else if ls.ETA != nil && ls.ETA.PerSecond > 0 {
		fmt.Fprintf(&b, " ETA %s", formatETA(ls.ETA.Seconds))
	}
	return strings.TrimSuffix(b.String(), " |")
}
