package main

import (
	"os"
	"testing"

	"github.com/creack/pty"
)

// TestIsTerminal: the live display is drawn on a terminal only: not on
// /dev/null (a character device, which the old check took for one; a
// detached run's output goes there), a pipe or a file.
func TestIsTerminal(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, f := range map[string]*os.File{"/dev/null": null, "a pipe": w, "a file": file} {
		if isTerminal(f) || canDraw(f) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if !isTerminal(tty) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}
	if canDraw(tty) {
		t.Error("a pseudo-terminal without a size is drawn on (some CI runners have one)")
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	if !canDraw(tty) {
		t.Error("a 80x24 pseudo-terminal is not drawn on")
	}
}
