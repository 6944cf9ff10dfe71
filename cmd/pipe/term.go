package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
)

// termView is the live display on a terminal (github.com/vbauerster/mpb):
// the run's state and ETA, a bar of the input read of its size, then the
// rejects, the servers, the tokens, one line per stage and per server
// (screen.go). Lines written to it (notices, warnings) appear above the
// display, which keeps redrawing below them.
type termView struct {
	out    io.Writer
	p      *mpb.Progress
	colour bool
	rows   int // the terminal's height when the display started (0: unknown)
	mu     sync.Mutex
	in     *mpb.Bar
	inText string // the input bar's text
	inTail string // after the bar: the share read
	// lines are the text lines' contents; bars their mpb rows (the
	// first is head's).
	lines []screenLine
	bars  []*mpb.Bar
	done  bool
}

// newTermView draws on out's terminal itself (its own escape sequences
// pass), and escapes every text it shows with termsafe.
func newTermView(out io.Writer) *termView {
	t := &termView{colour: wantColour(out), rows: termRows(out)}
	out = termsafe.Unwrap(out)
	t.out = out
	t.p = mpb.New(mpb.WithOutput(out), mpb.WithWidth(30), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithAutoRefresh())
	return t
}

// screenText is a decorator showing a line fitted to the width mpb gives
// it, with its width on screen (mpb's own would count colour codes).
type screenText struct {
	decor.WC
	line func() screenLine
	t    *termView
}

func (d screenText) Decor(s decor.Statistics) (string, int) {
	return d.line().render(s.AvailableWidth, d.t.colour)
}

// update shows a new snapshot. mpb is called without holding mu: its
// render goroutine calls the decorators, which take mu.
func (t *termView) update(ls *liveStatus) {
	lines := append([]screenLine{headLine(ls)}, screenLines(ls, t.rows)...)
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	newInput := ls.Input != nil && t.in == nil
	if in := ls.Input; in != nil {
		total := "~" + count(in.Estimated)
		if in.Complete || in.Counted {
			total = count(in.Estimated)
		}
		t.inText = fmt.Sprintf("%s %s of %s read", in.Stage, count(in.Records), total)
		t.inTail = fmt.Sprintf("%s of %s", pct(in.Share), numfmt.Bytes(in.Bytes))
	}
	for len(t.lines) < len(lines) {
		t.lines = append(t.lines, nil)
	}
	for i := range t.lines {
		t.lines[i] = nil
		if i < len(lines) {
			t.lines[i] = lines[i]
		}
	}
	have := len(t.bars)
	t.mu.Unlock()

	// mpb ends itself on a render error (a hung-up terminal); then its Add
	// fails, and the display stops instead of panicking the run.
	gone := func() {
		t.mu.Lock()
		t.done = true
		t.mu.Unlock()
	}
	lineAt := func(i int) func() screenLine {
		return func() screenLine {
			t.mu.Lock()
			defer t.mu.Unlock()
			return t.lines[i]
		}
	}
	// The head line is row 0, the input bar row 1, the other lines after.
	priority := func(i int) int {
		if i == 0 {
			return 0
		}
		return i + 1
	}
	for i := have; i < len(lines); i++ {
		b, err := t.p.Add(0, mpb.NopStyle().Build(), mpb.BarPriority(priority(i)),
			mpb.PrependDecorators(screenText{line: lineAt(i), t: t}))
		if err != nil {
			gone()
			return
		}
		t.mu.Lock()
		t.bars = append(t.bars, b)
		t.mu.Unlock()
	}
	if newInput {
		in, err := t.p.Add(ls.Input.Bytes, mpb.BarStyle().Lbound("[").Rbound("]").Build(), mpb.BarPriority(1),
			mpb.PrependDecorators(screenText{line: func() screenLine { return screenLine{{text: t.text(func() string { return t.inText }) + " "}} }, t: t}),
			mpb.AppendDecorators(screenText{line: func() screenLine { return screenLine{{text: " " + t.text(func() string { return t.inTail })}} }, t: t}))
		if err != nil {
			gone()
			return
		}
		t.mu.Lock()
		t.in = in
		t.mu.Unlock()
	}
	if ls.Input != nil {
		t.in.SetTotal(max(ls.Input.Bytes, 1), false)
		t.in.SetCurrent(ls.Input.BytesRead)
	}
}

// text reads a field under the lock (decorators run on mpb's goroutine).
func (t *termView) text(f func() string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return f()
}

// fit cuts s to w runes, so that no line wraps (a wrapped line breaks the
// redraw).
func fit(s string, w int) string {
	if w <= 0 || utf8.RuneCountInString(s) <= w {
		return s
	}
	r := []rune(s)
	return string(r[:max(0, w-1)]) + "…"
}

// Write prints p above the display.
func (t *termView) Write(p []byte) (int, error) {
	safe := []byte(termsafe.Text(string(p)))
	if _, err := t.p.Write(safe); err != nil { // the display has ended
		if _, err := t.out.Write(safe); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// stop draws the last state and ends the display, leaving it on screen.
func (t *termView) stop(last *liveStatus) {
	if last != nil {
		t.update(last)
	}
	t.mu.Lock()
	t.done = true
	bars := append([]*mpb.Bar{t.in}, t.bars...)
	t.mu.Unlock()
	for _, b := range bars {
		if b != nil {
			b.Abort(false)
		}
	}
	t.p.Wait()
}

// termRows is the height of w's terminal, 0 when unknown.
func termRows(w io.Writer) int {
	f, ok := termsafe.Unwrap(w).(*os.File)
	if !ok {
		return 0
	}
	_, rows, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return rows
}

// canDraw reports whether w is a terminal with a size: a pseudo-terminal
// without rows (some CI runners) shows nothing drawn, so it gets lines.
func canDraw(w io.Writer) bool {
	f, ok := termsafe.Unwrap(w).(*os.File)
	if !ok || !isTerminal(w) {
		return false
	}
	cols, rows, err := term.GetSize(int(f.Fd()))
	return err == nil && rows > 0 && cols > 0
}

// isTerminal reports whether w is a terminal (golang.org/x/term asks the
// terminal driver): /dev/null, a character device too, is not one.
func isTerminal(w io.Writer) bool {
	f, ok := termsafe.Unwrap(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
