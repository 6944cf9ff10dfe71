package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/textfmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline/view"
)

// The terminal's live display is built from lines of parts, most important
// first: a line shows its parts in order while they fit the terminal's
// width and drops the rest whole, so what matters (the state, the ETA, the
// reject share and its top reason, the servers not ready) is never cut,
// and nothing wraps (a wrapped line breaks the redraw).

// tone is how a part is coloured on a terminal that takes colour.
type tone uint8

const (
	plain   tone = iota
	strong       // bold: the run's state, a headline's figure
	good         // green: ready, finished
	caution      // yellow: probing, suspect, a share of rejects worth a look
	bad          // red: ejected, failed, never ready
	faint        // dim: secondary figures
)

// sgr are the ANSI Select Graphic Rendition codes of each tone.
var sgr = [...]string{plain: "", strong: "1", good: "32", caution: "33", bad: "31", faint: "2"}

type part struct {
	text string
	tone tone
}

// screenLine is a line of the display: parts joined by two spaces (a
// part starting with "," or ";" joins with none).
type screenLine []part

func p(tn tone, format string, args ...any) part {
	return part{text: fmt.Sprintf(format, args...), tone: tn}
}

// render returns the line within width runes (0: no limit), coloured when
// colour is set, and the width it takes on the screen. The first part is
// cut (…) only when it alone is wider than the terminal.
func (l screenLine) render(width int, colour bool) (string, int) {
	var b strings.Builder
	used := 0
	for i, x := range l {
		text := termsafe.Line(x.text)
		sep := ""
		if i > 0 && !strings.HasPrefix(text, ",") && !strings.HasPrefix(text, ";") {
			sep = "  "
		}
		n := utf8.RuneCountInString(sep + text)
		if width > 0 && used+n > width {
			if i > 0 {
				break
			}
			text = fit(text, width)
			n = utf8.RuneCountInString(text)
		}
		b.WriteString(sep)
		if colour && x.tone != plain {
			b.WriteString("\x1b[" + sgr[x.tone] + "m" + text + "\x1b[0m")
		} else {
			b.WriteString(text)
		}
		used += n
	}
	return b.String(), used
}

// plainText is the line in full, without colour (pipe status, tests).
func (l screenLine) plainText() string { s, _ := l.render(0, false); return s }

// wantColour reports whether the display on w is coloured: only on a
// terminal, and never when NO_COLOR is set to anything (no-color.org) or
// TERM is "dumb".
func wantColour(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}

// headLine: "running 1m05s  ETA 1h23m  501.7K of ~914K prompts left at 98.3/s".
func headLine(ls *liveStatus) screenLine {
	state := ls.State
	if state == "" {
		state = stateRunning
	}
	tn := strong
	switch state {
	case stateFinished:
		tn = good
	case stateFailed:
		tn = bad
	case stateDraining, stateStopped:
		tn = caution
	}
	l := screenLine{p(tn, "%s %s", state, textfmt.Elapsed(ls.ElapsedS))}
	if e := ls.ETA; e != nil {
		left := count(e.Remaining)
		if e.Estimated {
			left = "~" + left
		}
		switch {
		case e.Remaining == 0 && !e.Estimated:
			l = append(l, p(strong, "nothing left"))
		case e.Waiting != "":
			l = append(l, p(strong, "ETA ?"), p(caution, "%s left, waiting on %s", left, e.Waiting))
		case e.PerSecond <= 0:
			l = append(l, p(strong, "ETA ?"), p(plain, "%s left, no rate yet", left))
		default:
			l = append(l, p(strong, "ETA %s", formatETA(e.Seconds)), p(plain, "%s left at %s", left, rate(e.PerSecond)))
		}
	}
	if f := ls.Fleet; f != nil && f.Waiting != "" {
		l = append(l, p(caution, "WAITING for servers: %s", f.Waiting))
	}
	return l
}

// rejectBase is what rejectLine's share is of: the records the expensive
// stage (else the first) finished plus what stages before it rejected or
// failed.
func rejectBase(ls *liveStatus) int64 {
	base := -1
	for i, st := range ls.Stages {
		if base < 0 && st.Expensive {
			base = i
		}
	}
	if base < 0 {
		base = 0
	}
	var of int64
	for i, st := range ls.Stages {
		switch {
		case i == base:
			of += done(st.StageSummary)
		case i < base:
			of += st.Rejected + st.Failed
		}
	}
	return of
}

// topRejects is the three largest reasons, each as a share of rejected:
// "; of rejects: empty_answer 72%, no_think_end 21%".
func topRejects(reasons map[string]int64, rejected int64) screenLine {
	var line screenLine
	keys := slices.Sorted(maps.Keys(reasons))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(reasons[b], reasons[a]) })
	for i, k := range keys {
		text := fmt.Sprintf(", %s %s", k, pct(float64(reasons[k])/float64(rejected)))
		if i == 0 {
			text = fmt.Sprintf("; of rejects: %s %s", k, pct(float64(reasons[k])/float64(rejected)))
		}
		line = append(line, p(plain, "%s", text))
		if i == 2 {
			break
		}
	}
	return line
}

// rejectLine: "rejected 29 = 24% of 122 done; of rejects: empty_answer 72%, no_think_end 21%".
// Every stage's rejects count, of the records the expensive stage (else
// the first) finished plus what stages before it rejected: a record is
// rejected once.
func rejectLine(ls *liveStatus) screenLine {
	var rejected, failed int64
	reasons := map[string]int64{}
	for _, st := range ls.Stages {
		rejected += st.Rejected
		failed += st.Failed
		for k, v := range st.Reasons {
			reasons[k] += v
		}
	}
	if len(ls.Stages) == 0 {
		return nil
	}
	of := rejectBase(ls)
	share := 0.0
	if of > 0 {
		share = float64(rejected) / float64(of)
	}
	tn := plain
	if share >= 0.1 {
		tn = caution
	}
	if share >= 0.5 {
		tn = bad
	}
	line := screenLine{p(tn, "rejected %s = %s of %s done", count(rejected), pct(share), count(of))}
	line = append(line, topRejects(reasons, rejected)...)
	if failed > 0 {
		line = append(line[:1], append(screenLine{p(bad, "FAILED %s", count(failed))}, line[1:]...)...)
	}
	return line
}

// fmtSeconds: "4.08s", "1m12s".
func fmtSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond).String()
}

// stateTone colours a server's state.
func stateTone(state string) tone {
	switch state {
	case view.ServerReady:
		return good
	case view.ServerEjected, view.ServerNeverReady:
		return bad
	}
	return caution
}

// serversLine: "servers 3 of 4 ready; not ready: 127.0.0.1:1 probing (unreachable)".
func serversLine(f *liveFleet) screenLine {
	ready := 0
	var not []liveServer
	for _, s := range f.Servers {
		if s.State == view.ServerReady {
			ready++
		} else {
			not = append(not, s)
		}
	}
	tn := good
	if ready < len(f.Servers) {
		tn = caution
	}
	if ready == 0 {
		tn = bad
	}
	l := screenLine{p(tn, "servers %d of %d ready", ready, len(f.Servers))}
	for i, s := range not {
		sep := ","
		if i == 0 {
			sep = "; not ready:"
		}
		l = append(l, p(stateTone(s.State), "%s %s %s", sep, s.Name, s.State))
	}
	return l
}

// tokensLine: "tokens 152.9K of at most 999.4K (15%)  30.4K tok/s 1m  1.01 decoded per trained token  in flight 26/64  tiny answers 2%".
// The most is the input's prompts (estimated until read or counted)
// times what one request may decode (RequestCap): what the run can
// generate at most. (A [pipeline] budget is another thing: pipe status
// shows it.)
func tokensLine(ls *liveStatus) screenLine {
	f := ls.Fleet
	l := screenLine{p(plain, "tokens %s", count(f.Tokens))}
	if ls.Input != nil && f.RequestCap > 0 && ls.Input.Estimated > 0 {
		most := ls.Input.Estimated * f.RequestCap
		approx := ""
		if !ls.Input.Complete && !ls.Input.Counted {
			approx = "~"
		}
		l[0].text += fmt.Sprintf(" of at most %s%s (%s)", approx, count(most), pct(float64(f.Tokens)/float64(most)))
	}
	l = append(l, p(plain, "%s tok/s 1m", numfmt.Count(f.Tokens1m)))
	if e := ls.Economy; e != nil && e.Trained > 0 {
		// How much of the decoding ends in training rows: 1.00 is all.
		tn := plain
		if e.Ratio >= 1.1 {
			tn = caution
		}
		l = append(l, p(tn, "%.2f decoded per trained token", e.Ratio))
	}
	l = append(l, p(faint, "in flight %d/%d", f.InFlight, f.Capacity))
	if f.Answers > 0 {
		share := float64(f.Tiny) / float64(f.Answers)
		tn := faint
		if share >= 0.1 {
			tn = caution
		}
		l = append(l, p(tn, "tiny answers %s", pct(share)))
	}
	return l
}

// stageScreenLine: "gen      generate  96 of 122  19.1/s  rejected 29 = 23%  queued 3".
func stageScreenLine(st liveStage, idW, kindW int) screenLine {
	l := screenLine{p(plain, "%-*s  %-*s", idW, st.ID, kindW, st.Kind), p(plain, "%s of %s", count(done(st.StageSummary)+st.Skipped), count(st.In))}
	if st.Failed > 0 {
		l = append(l, p(bad, "FAILED %s", count(st.Failed)))
	}
	if w := waitingOf(st); w != "" {
		l = append(l, p(caution, "WAITING: %s", w))
	}
	if st.Rejected > 0 {
		l = append(l, p(plain, "rejected %s = %s", count(st.Rejected), pct(st.RejectShare)))
	}
	l = append(l, p(faint, "%s", rate(st.Done1m)))
	if st.Skipped > 0 {
		l = append(l, p(faint, "skipped %s", count(st.Skipped)))
	}
	if st.Queued > 0 {
		l = append(l, p(faint, "queued %d", st.Queued))
	}
	return l
}

// serverScreenLine: "  127.0.0.1:30000  ready  48/48  0.45/s  p95 1m12s  errors 2  (why)".
func serverScreenLine(s liveServer, nameW int) screenLine {
	l := screenLine{p(plain, "  %-*s", nameW, s.Name), p(stateTone(s.State), "%s", s.State)}
	l = append(l, p(plain, "%d/%d", s.InFlight, s.Concurrency), p(plain, "%s", rate(s.PerSecond)),
		p(faint, "p95 %s", fmtSeconds(s.P95Seconds)))
	if s.ErrorsTotal > 0 {
		l = append(l, p(caution, "errors %d", s.ErrorsTotal))
	}
	if s.Ejections > 0 {
		l = append(l, p(bad, "ejected %d×", s.Ejections))
	}
	if s.Accept > 0 {
		l = append(l, p(faint, "accept %.2f", s.Accept))
	}
	if s.Reason != "" { // last: it can be long (an error's text)
		l = append(l, p(plain, "(%s)", s.Reason))
	}
	return l
}

// screenLines are the display's lines below the input bar: rejects,
// servers and tokens first, then each stage and each server while rows
// allow (rows 0: no limit).
func screenLines(ls *liveStatus, rows int) []screenLine {
	out := []screenLine{}
	if r := rejectLine(ls); r != nil {
		out = append(out, r)
	}
	f := ls.Fleet
	if f != nil {
		out = append(out, serversLine(f), tokensLine(ls))
	}
	idW, kindW := 0, 0
	for _, st := range ls.Stages {
		idW, kindW = max(idW, len(st.ID)), max(kindW, len(st.Kind))
	}
	var stageLines, serverLines []screenLine
	for _, st := range ls.Stages {
		stageLines = append(stageLines, stageScreenLine(st, idW, kindW))
	}
	if f != nil {
		nameW := 0
		for _, s := range f.Servers {
			nameW = max(nameW, len(s.Name))
		}
		for _, s := range f.Servers {
			serverLines = append(serverLines, serverScreenLine(s, nameW))
		}
	}
	if rows <= 0 {
		return append(append(out, stageLines...), serverLines...)
	}
	// Room for the head line, the input bar, and a line printed above.
	room := max(0, rows-3-len(out))
	out = append(out, stageLines[:min(room, len(stageLines))]...)
	room -= min(room, len(stageLines))
	return append(out, serverLines[:min(room, len(serverLines))]...)
}
