//go:build e2e

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// pipe graph --format svg as a person sees it, in headless Chromium: for
// every shipped pipeline, no two labels of the picture (stage names,
// kinds, settings, port and edge labels) overlap. The picture is pipe's own
// layout where Graphviz's dot is not on PATH (as on CI); with dot, dot's.
func TestGraphSVGLabelsDoNotOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: chromium")
	}
	files, _ := filepath.Glob("../../pipelines/*.toml")
	if len(files) == 0 {
		t.Fatal("no pipelines/*.toml")
	}
	dir := t.TempDir()
	br := newBrowser(t, 1600, 1200, 2*time.Minute)
	for _, f := range files {
		var out, errb bytes.Buffer
		if code := run([]string{"graph", "--format", "svg", f}, &stdio{Out: &out, Err: &errb}); code != 0 {
			t.Fatalf("pipe graph %s: exit %d\n%s", f, code, errb.String())
		}
		// An SVG document has no body: the picture goes inline in a page.
		page := filepath.Join(dir, filepath.Base(f)+".html")
		if err := os.WriteFile(page, []byte("<!doctype html><html><body>"+out.String()+"</body></html>"), 0o644); err != nil {
			t.Fatal(err)
		}
		br.load(t, page)
		boxes, err := chromedp.Run(br.ctx, chromedp.Evaluate[textBoxes](textBoxesJS))
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		if boxes.Boxes < 5 {
			t.Errorf("%s: only %d labels found in the picture", f, boxes.Boxes)
		}
		if len(boxes.Overlaps) > 0 {
			t.Errorf("%s: labels of the graph overlap:\n  %s", f, strings.Join(boxes.Overlaps, "\n  "))
		}
	}
	br.checkProblems(t)
}
