package main

import (
	"bytes"
	"io"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/creack/pty"
)

// Colour only on a terminal, and never with NO_COLOR set (no-color.org:
// any non-empty value) or TERM=dumb.
func TestColourOnlyOnATerminalWithoutNoColor(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	defer pipeW.Close()
	for _, tc := range []struct {
		w             io.Writer
		noColor, term string
		want          bool
	}{
		{tty, "", "xterm", true},
		{tty, "1", "xterm", false},
		{tty, "", "dumb", false},
		{pipeW, "", "xterm", false},
		{&bytes.Buffer{}, "", "xterm", false},
	} {
		t.Setenv("NO_COLOR", tc.noColor)
		t.Setenv("TERM", tc.term)
		if got := wantColour(tc.w); got != tc.want {
			t.Errorf("%T NO_COLOR=%q TERM=%q: colour %v, want %v", tc.w, tc.noColor, tc.term, got, tc.want)
		}
	}
	line := screenLine{p(good, "ready"), p(plain, "48/48")}
	if s, n := line.render(80, true); s != "\x1b[32mready\x1b[0m  48/48" || n != len("ready  48/48") {
		t.Errorf("coloured: %q, width %d", s, n)
	}
	if s, _ := line.render(80, false); s != "ready  48/48" {
		t.Errorf("plain: %q", s)
	}
}

// A line keeps its parts in order while they fit, drops the rest whole,
// and never cuts one (but the first, alone wider than the terminal).
func TestScreenLineDropsWholeParts(t *testing.T) {
	line := screenLine{p(plain, "rejected 12 = 40%% of 30 done"), p(plain, "; of rejects: empty_answer 90%%"), p(plain, ", truncated 10%%")}
	for _, tc := range []struct {
		width int
		want  string
	}{
		{0, "rejected 12 = 40% of 30 done; of rejects: empty_answer 90%, truncated 10%"},
		{70, "rejected 12 = 40% of 30 done; of rejects: empty_answer 90%"},
		{40, "rejected 12 = 40% of 30 done"},
		{10, "rejected …"},
	} {
		if got, n := line.render(tc.width, false); got != tc.want || n != utf8.RuneCountInString(tc.want) {
			t.Errorf("width %d: %q (%d), want %q", tc.width, got, n, tc.want)
		}
	}
}
