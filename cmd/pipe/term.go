package main

import (
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/pipe-dev/pipe/internal/termsafe"
)

// termView is the live display on a terminal (github.com/vbauerster/mpb):
// a bar of the input read of its size with the ETA, then one line per
// stage, the fleet and each server. Lines written to it (notices,
// warnings) appear above the display, which keeps redrawing below them.
type termView struct {
	out  io.Writer
	p    *mpb.Progress
	mu   sync.Mutex
	in   *mpb.Bar
	head string // the input bar's text
	tail string // after the input bar: ETA
	// lines are the text lines' contents; bars their mpb rows.
	lines []string
	bars  []*mpb.Bar
	done  bool
}

// newTermView draws on out's terminal itself (its own escape sequences
// pass), and escapes every line it shows with termsafe.
func newTermView(out io.Writer) *termView {
	out = termsafe.Unwrap(out)
	return &termView{out: out, p: mpb.New(mpb.WithOutput(out), mpb.WithWidth(30), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithAutoRefresh())}
}

// update shows a new snapshot. mpb is called without holding mu: its
// render goroutine calls the decorators, which take mu.
func (t *termView) update(ls *liveStatus) {
	lines := bodyLines(ls)
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	newInput := ls.Input != nil && t.in == nil
	if ls.Input != nil {
		t.head, t.tail = termsafe.Line(inputLine(ls.Input)), ""
		if ls.ETA != nil {
			t.tail = termsafe.Line(etaLine(ls.ETA))
		}
	}
	for len(t.lines) < len(lines) {
		t.lines = append(t.lines, "")
	}
	for i := range t.lines {
		t.lines[i] = ""
		if i < len(lines) {
			t.lines[i] = termsafe.Line(lines[i])
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
	if newInput {
		in, err := t.p.Add(ls.Input.Bytes, mpb.BarStyle().Lbound("[").Rbound("]").Build(), mpb.BarPriority(0),
			mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return t.text(func() string { return t.head }) + " " })),
			mpb.AppendDecorators(decor.Any(func(s decor.Statistics) string {
				return " " + fit(t.text(func() string { return t.tail }), s.AvailableWidth)
			})))
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
	for i := have; i < len(lines); i++ {
		b, err := t.p.Add(0, mpb.NopStyle().Build(), mpb.BarPriority(i+1),
			mpb.PrependDecorators(decor.Any(func(s decor.Statistics) string {
				return fit(t.text(func() string { return t.lines[i] }), s.AvailableWidth)
			})))
		if err != nil {
			gone()
			return
		}
		t.mu.Lock()
		t.bars = append(t.bars, b)
		t.mu.Unlock()
	}
}

// text reads a line under the lock (decorators run on mpb's goroutine).
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
