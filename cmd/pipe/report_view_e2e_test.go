//go:build e2e

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// textBoxesJS finds every piece of text the page shows — each text node's
// line boxes in the HTML, each <text> of the plots (their axis labels,
// titles, legends, values) — and returns the pairs whose rectangles
// overlap by more than a pixel each way.
const textBoxesJS = `(() => {
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node, k = 0;
  const seen = new Set();
  while ((node = walker.nextNode())) {
    const text = node.textContent.trim();
    const el = node.parentElement;
    if (!text || el.closest('title')) continue;
    let rects;
    if (el.closest('svg')) {
      const t = el.closest('text');
      if (!t || seen.has(t)) continue;
      seen.add(t);
      rects = [t.getBoundingClientRect()];
    } else {
      const r = document.createRange();
      r.selectNodeContents(node);
      rects = [...r.getClientRects()];
    }
    for (const b of rects) {
      if (b.width > 0 && b.height > 0) boxes.push({k, t: text.slice(0, 50), x0: b.left, y0: b.top, x1: b.right, y1: b.bottom});
    }
    k++;
  }
  const bad = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.k === b.k) continue;
    const ox = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0), oy = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
    if (ox > 1 && oy > 1) bad.push(JSON.stringify(a.t) + ' over ' + JSON.stringify(b.t));
  }
  return {boxes: boxes.length, overlaps: bad.slice(0, 30)};
})()`

type textBoxes struct {
	Boxes    int      `json:"boxes"`
	Overlaps []string `json:"overlaps"`
}

// pageFacts is what a test reads of the report's page.
type pageFacts struct {
	Headline []string       `json:"headline"`
	Empty    []string       `json:"empty"`
	Groups   map[string]int `json:"groups"` // sample group → rows shown
	Marked   int            `json:"marked"` // trained-on spans marked
}

const pageFactsJS = `(() => {
  const groups = {};
  for (const s of document.querySelectorAll('section.samples')) groups[s.dataset.group] = s.querySelectorAll('article.sample').length;
  return {
    headline: [...document.querySelectorAll('.headline p')].map(p => p.innerText),
    empty: [...document.querySelectorAll('.headline p.empty')].map(p => p.innerText),
    groups,
    marked: document.querySelectorAll('pre.trained mark.loss').length,
  };
})()`

// The report as a person reads it, in headless Chromium from the file
// alone (no network, no console error): no two texts overlap (headings,
// tables, plot titles and their subtitles, axis labels of every plot and
// graph); the headline says the training rows as a share of the prompts
// and names an empty training output; sample rows are there for the
// accepted rows and for every reject reason, with the trained-on text
// marked.
func TestReportViewInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two runs and chromium")
	}
	chromium(t) // missing: fail (PIPE_CI) or skip before the runs
	qwen := testenv.Qwen3Dir(t)
	dir := t.TempDir()
	// The demo with more broken outputs than its own, so that several
	// reasons have samples.
	demo := func(name, faults string, sets ...string) string {
		runDir := filepath.Join(dir, name)
		var errb syncBuffer
		code := run(append([]string{"run", "../../pipelines/demo.toml", "--run-dir", runDir,
			"--set", `gen.servers=["sim:2?speed=200&faults=` + faults + `"]`,
			"--set", "gen.tokenizer=" + quoteTOML(qwen), "--set", "check.tokenizer=" + quoteTOML(qwen), "--set", "tok.tokenizer=" + quoteTOML(qwen),
			"--set", "train.path=" + quoteTOML(filepath.Join(runDir, "out", "train")),
			"--set", "rejects.path=" + quoteTOML(filepath.Join(runDir, "out", "rejected.jsonl"))}, sets...),
			&stdio{Out: &bytes.Buffer{}, Err: &errb, Signals: make(chan os.Signal)})
		if code != 0 && !strings.Contains(errb.String(), "an output holds no rows") {
			t.Fatalf("pipe run %s: exit %d\n%s", name, code, errb.String())
		}
		// pipe report writes the page whatever the run's state (a run
		// with no training rows fails, and writes none at its end).
		var out, rerr bytes.Buffer
		if code := run([]string{"report", runDir}, &stdio{Out: &out, Err: &rerr}); code != 0 {
			t.Fatalf("pipe report %s: exit %d\n%s", name, code, rerr.String())
		}
		return runDir
	}
	mixed := demo("mixed", "empty-answer:0.2,no-think-end:0.2")
	// Every answer empty, and no completion kept though cut at the
	// trainer's length (those can have an empty answer: the limit came
	// first): no training row at all.
	empty := demo("empty", "empty-answer:1", "--set", "check.length=reject")

	br := newBrowser(t, 1280, 900, 2*time.Minute)
	ctx := br.ctx
	load := func(runDir string) (pageFacts, textBoxes) {
		t.Helper()
		br.load(t, filepath.Join(runDir, runreport.HTMLFile))
		facts, err := chromedp.Run(ctx, chromedp.Evaluate[pageFacts](pageFactsJS))
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		boxes, err := chromedp.Run(ctx, chromedp.Evaluate[textBoxes](textBoxesJS))
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		if boxes.Boxes < 100 {
			t.Errorf("%s: only %d text boxes found", runDir, boxes.Boxes)
		}
		if len(boxes.Overlaps) > 0 {
			t.Errorf("%s: texts overlap:\n  %s", runDir, strings.Join(boxes.Overlaps, "\n  "))
		}
		return facts, boxes
	}

	rep, err := runreport.Build(context.Background(), mixed, runreport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	facts, _ := load(mixed)
	if len(rep.Rejected) < 2 {
		t.Fatalf("the mixed run has %d reject reasons, want several: %+v", len(rep.Rejected), rep.Rejected)
	}
	train := rep.Outputs[0].Rows
	wantHead := fmt.Sprintf("train: %d rows = %s of 122 prompts", train, pctOf(train, 122))
	if len(facts.Headline) == 0 || facts.Headline[0] != wantHead || len(facts.Empty) != 0 {
		t.Errorf("headline %q (empty %q), want first %q", facts.Headline, facts.Empty, wantHead)
	}
	if !strings.Contains(strings.Join(facts.Headline, "\n"), "of rejects") {
		t.Errorf("the headline's reasons are not labelled as shares of the rejects: %q", facts.Headline)
	}
	if facts.Groups["accepted:train"] == 0 || facts.Marked == 0 {
		t.Errorf("no accepted sample rows with the trained-on text marked: groups %v, %d marked", facts.Groups, facts.Marked)
	}
	for _, x := range rep.Rejected {
		if n := facts.Groups["rejected:"+x.Stage+":"+x.Reason]; n == 0 || int64(n) > x.Count {
			t.Errorf("reason %s/%s (%d rejected): %d sample rows shown", x.Stage, x.Reason, x.Count, n)
		}
	}

	facts, _ = load(empty)
	if len(facts.Empty) == 0 || facts.Empty[0] != "train: 0 rows — no training data from 122 prompts" {
		t.Errorf("the empty run's headline does not name its empty training output: %q", facts.Headline)
	}
	if facts.Groups["rejected:check:empty_answer"] == 0 {
		t.Errorf("no sample rows of the empty answers: %v", facts.Groups)
	}
	br.checkProblems(t)
}

// pctOf is the report's share, as it prints it.
func pctOf(part, whole int64) string {
	f := float64(part) / float64(whole)
	if f >= 0.1 {
		return fmt.Sprintf("%.0f%%", 100*f)
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}
