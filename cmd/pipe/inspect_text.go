package main

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/textfmt"
	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/rundir"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// pipe inspect: text output.

const (
	fieldChars     = 200 // a message or answer, shortened in the middle
	reasoningChars = 120
	segmentChars   = 240 // each masked / unmasked run of decoded text
)

func (d *inspectDoc) print(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	switch {
	case d.Shard != nil:
		printShard(bw, d.Shard, true)
	case d.Dir != nil:
		printDir(bw, d.Dir)
	case d.JSONL != nil:
		printJSONL(bw, d.JSONL)
	case d.Run != nil:
		printRun(bw, d.Run)
	case d.Output != nil:
		printOutput(bw, d.Output)
	}
	if len(d.Rows) > 0 {
		from := ""
		if d.RowsFrom != "" {
			from = " of " + d.RowsFrom
		}
		fmt.Fprintf(bw, "\nfirst %s%s:\n", numfmt.Plural(len(d.Rows), "row"), from)
		for i, r := range d.Rows {
			printRow(bw, i+1, &r)
		}
	}
	for _, p := range d.Problems {
		fmt.Fprintf(bw, "PROBLEM: %s\n", p)
	}
}

func printShard(w io.Writer, s *shardReport, head bool) {
	if head {
		textfmt.KV(w, "shard", "%s", s.Path)
	}
	schema := ""
	if s.Schema != "" {
		schema = ", schema " + s.Schema
	}
	unit := "row group"
	if s.Format == arrowrow.FormatArrow {
		unit = "record batch"
	}
	textfmt.KV(w, "format", "%s%s, %s, %s", s.Format, schema, numfmt.Plural(s.Groups, unit), numfmt.Bytes(s.Bytes))
	textfmt.KV(w, "rows", "%d", s.Rows)
	textfmt.KV(w, "tokens", "%d (trained on %d)", s.Tokens, s.LossTok)
	parts := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		parts[i] = c.Name + " " + c.Type
	}
	textfmt.KV(w, "columns", "%d", len(s.Columns))
	for _, line := range wrapJoin(parts, ", ", 78) {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if !s.PipeShard {
		fmt.Fprintf(w, "not a pipe shard (no string column %q): rows are not shown\n", arrowrow.ColID)
	}
}

// wrapJoin joins parts with sep into lines of at most width characters.
func wrapJoin(parts []string, sep string, width int) []string {
	var lines []string
	cur := ""
	for i, p := range parts {
		if i < len(parts)-1 {
			p += strings.TrimRight(sep, " ")
		}
		switch {
		case cur == "":
			cur = p
		case len(cur)+1+len(p) > width:
			lines = append(lines, cur)
			cur = p
		default:
			cur += " " + p
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

func printDir(w io.Writer, d *dirReport) {
	if !d.Manifest {
		textfmt.KV(w, "shards", "%s: no %s, so no shard here is committed", d.Dir, filecommit.ManifestName)
	} else {
		textfmt.KV(w, "shards", "%s (%s updated %s)", d.Dir, filecommit.ManifestName, d.Updated.UTC().Format(time.RFC3339))
		schema := ""
		if d.Schema != "" {
			schema = ", schema " + d.Schema
		}
		textfmt.KV(w, "format", "%s%s", d.Format, schema)
		textfmt.KV(w, "rows", "%d", d.Rows)
		textfmt.KV(w, "tokens", "%d", d.Tokens)
		textfmt.KV(w, "bytes", "%d (%s)", d.Bytes, numfmt.Bytes(d.Bytes))
		textfmt.KV(w, "committed", "%s", numfmt.Plural(len(d.Shards), "shard"))
	}
	nameW := 0
	for _, s := range d.Shards {
		nameW = max(nameW, len(s.Name))
	}
	for _, s := range d.Shards {
		fmt.Fprintf(w, "  %-*s  %8d rows  %10d tokens  %10s  sha256 %s  %s\n",
			nameW, s.Name, s.Rows, s.Tokens, numfmt.Bytes(s.Bytes), short(s.SHA256), s.Status)
	}
	for _, n := range d.NotCommitted {
		fmt.Fprintf(w, "  %s  not committed (not in %s; a writer that resumes here removes it)\n", n, filecommit.ManifestName)
	}
	for _, n := range d.Temporary {
		fmt.Fprintf(w, "  %s  being written (or left by a writer that stopped)\n", n)
	}
	if d.Manifest {
		bad := 0
		for _, s := range d.Shards {
			if s.Status != "ok" {
				bad++
			}
		}
		what := "present with the manifest's sizes (sha256 not checked; --verify reads them)"
		if d.Verified {
			what = "present with the manifest's sizes and sha256"
		}
		if bad == 0 {
			textfmt.KV(w, "verified", "%s %s", numfmt.Plural(len(d.Shards), "shard"), what)
		} else {
			textfmt.KV(w, "verified", "%d of %s FAILED", bad, numfmt.Plural(len(d.Shards), "shard"))
		}
	}
	if d.First != nil {
		fmt.Fprintln(w)
		printShard(w, d.First, true)
	}
}

func printJSONL(w io.Writer, j *jsonlReport) {
	what := "jsonl"
	if j.Journal {
		what = "journal"
	}
	textfmt.KV(w, what, "%s (%s)", j.Path, numfmt.Bytes(j.Bytes))
	textfmt.KV(w, "lines", "%d", j.Lines)
	if j.Committed != nil {
		note := ""
		if *j.Committed < j.Lines {
			note = fmt.Sprintf("; %d line(s) past the last commit are cut when the file is next opened for writing", j.Lines-*j.Committed)
		}
		textfmt.KV(w, "committed", "%d (from %s)%s", *j.Committed, filepath.Base(j.Index), note)
	} else {
		textfmt.KV(w, "committed", "unknown: no commit index %s (not written by pipe's commit log)", filepath.Base(commitlog.IndexPath(j.Path)))
	}
	if j.WithTok > 0 {
		textfmt.KV(w, "tokens", "%d in %d row(s) (trained on %d)", j.Tokens, j.WithTok, j.LossTok)
	}
	printTally(w, "rejected", j.Rejected)
	printTally(w, "failed", j.Failed)
}

// printTally prints per stage "rejected by STAGE: reason N, reason N", or
// for failures, whose errors are phrases, one "N  error" line each.
func printTally(w io.Writer, what string, t []tally) {
	for i := 0; i < len(t); {
		j := i
		var parts []string
		var sum int64
		for ; j < len(t) && t[j].Stage == t[i].Stage; j++ {
			parts = append(parts, fmt.Sprintf("%s %d", t[j].Reason, t[j].Count))
			sum += t[j].Count
		}
		by := ""
		if t[i].Stage != "" {
			by = " by " + t[i].Stage
		}
		if what == "failed" {
			fmt.Fprintf(w, "%s%s: %d\n", what, by, sum)
			for _, x := range t[i:j] {
				fmt.Fprintf(w, "  %6d  %s\n", x.Count, x.Reason)
			}
		} else {
			all := ""
			if len(parts) > 1 {
				all = fmt.Sprintf(" (%d in all)", sum)
			}
			fmt.Fprintf(w, "%s%s: %s%s\n", what, by, strings.Join(parts, ", "), all)
		}
		i = j
	}
}

// committedText says what the output holds, in its kind's unit.
func (o *outputReport) committedText() string {
	switch {
	case !o.Exists:
		return "not found"
	case o.Unit == "":
		return "nothing committed"
	case o.Unit != "lines":
		return fmt.Sprintf("%d rows, %d tokens in %s, %s", o.Rows, o.Tokens, numfmt.Plural(o.Files, strings.TrimSuffix(o.Unit, "s")), numfmt.Bytes(o.Bytes))
	}
	return fmt.Sprintf("%d committed, %s", o.Rows, numfmt.Bytes(o.Bytes))
}

func printOutput(w io.Writer, o *outputReport) {
	textfmt.KV(w, "output", "%s (%s)", o.Path, o.Kind)
	if o.Format != "" {
		textfmt.KV(w, "format", "%s", o.Format)
	}
	textfmt.KV(w, "committed", "%s", o.committedText())
}

func printRun(w io.Writer, r *runReport) {
	textfmt.KV(w, "run dir", "%s", r.Dir)
	if r.Pipeline != "" {
		textfmt.KV(w, "pipeline", "%s", r.Pipeline)
		textfmt.KV(w, "created", "%s", r.Created.UTC().Format(time.RFC3339))
	} else {
		textfmt.KV(w, "pipeline", "unknown (no %s)", rundir.RunFile)
	}
	if n := len(r.Starts); n > 0 {
		last := r.Starts[n-1]
		textfmt.KV(w, "starts", "%d, last %s: %s", n, last.At.UTC().Format(time.RFC3339), strings.Join(last.Command, " "))
	}
	if r.State != "" {
		textfmt.KV(w, "state", "%s (status.json updated %s)", r.State, r.Updated)
	} else {
		textfmt.KV(w, "state", "unknown (no status.json)")
	}
	if r.Error != "" {
		textfmt.KV(w, "error", "%s", termsafe.Cut(strings.ReplaceAll(r.Error, "\n", " "), 300))
	}
	printRunLock(w, r.Lock)
	unfinished := ""
	if r.Unfinished != nil && *r.Unfinished > 0 {
		unfinished = fmt.Sprintf("; %d unfinished in the last run", *r.Unfinished)
	}
	textfmt.KV(w, "finished", "%d ids (done.ids)%s", r.Finished, unfinished)
	printRunStages(w, r)
	printRunFiles(w, r)
	if r.Log != "" {
		textfmt.KV(w, "log", "%s", r.Log)
	}
}

// printRunLock says who holds the run directory's lock, if anyone.
func printRunLock(w io.Writer, l *lockReport) {
	if l != nil {
		switch {
		case !l.Released.IsZero():
			textfmt.KV(w, "lock", "free (pid %d on %s released it %s)", l.PID, l.Host, l.Released.UTC().Format(time.RFC3339))
		case l.Alive != nil && *l.Alive:
			textfmt.KV(w, "lock", "held by pid %d on %s since %s: running", l.PID, l.Host, l.Started.UTC().Format(time.RFC3339))
		case l.Alive != nil:
			textfmt.KV(w, "lock", "pid %d on %s (since %s) is gone without releasing it: killed or crashed; run again to resume", l.PID, l.Host, l.Started.UTC().Format(time.RFC3339))
		default:
			textfmt.KV(w, "lock", "pid %d on %s since %s, not released (another host: not checked)", l.PID, l.Host, l.Started.UTC().Format(time.RFC3339))
		}
	}
}

// printRunStages writes the last run's counts per stage (status.json).
func printRunStages(w io.Writer, r *runReport) {
	if len(r.Stages) > 0 {
		fmt.Fprintln(w, "last run (status.json):")
		idW, kindW := len("stage"), len("kind")
		for _, s := range r.Stages {
			idW, kindW = max(idW, len(s.ID)), max(kindW, len(s.Kind))
		}
		fmt.Fprintf(w, "  %-*s  %-*s  %9s  %9s  %9s  %9s  %9s\n", idW, "stage", kindW, "kind", "in", "out", "rejected", "failed", "skipped")
		for _, s := range r.Stages {
			fmt.Fprintf(w, "  %-*s  %-*s  %9d  %9d  %9d  %9d  %9d\n", idW, s.ID, kindW, s.Kind, s.In, s.Out, s.Rejected, s.Failed, s.Skipped)
		}
	}
}

// printRunFiles writes the run's journal, rejected/ and failed/ files and
// outputs.
func printRunFiles(w io.Writer, r *runReport) {
	if len(r.Journal) > 0 {
		fmt.Fprintln(w, "journal:")
		for _, j := range r.Journal {
			fmt.Fprintf(w, "  %s: %d entries, %s\n", j.Stage, j.Committed, numfmt.Bytes(j.Bytes))
		}
	}
	for _, class := range []struct {
		name  string
		files []*jsonlReport
	}{{"rejected", r.Rejected}, {"failed", r.Failed}} {
		if len(class.files) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s/:\n", class.name)
		for _, f := range class.files {
			committed := "no index"
			if f.Committed != nil {
				committed = fmt.Sprintf("%d committed", *f.Committed)
			}
			fmt.Fprintf(w, "  %s: %s, %s, %s\n", filepath.Base(f.Path), numfmt.Plural(int(f.Lines), "line"), committed, numfmt.Bytes(f.Bytes))
			t := f.Rejected
			if class.name == "failed" {
				t = f.Failed
			}
			for _, x := range t {
				fmt.Fprintf(w, "    %6d  %s\n", x.Count, x.Reason)
			}
		}
	}
	if len(r.Outputs) > 0 {
		fmt.Fprintln(w, "outputs:")
		for _, o := range r.Outputs {
			fmt.Fprintf(w, "  %s (%s): %s: %s\n", o.Stage, o.Kind, o.Path, o.committedText())
		}
	}
}

func printRow(w io.Writer, n int, r *rowReport) {
	field := func(k, v string) { fmt.Fprintf(w, "  %-9s %s\n", k, v) }
	if r.Unreadable != "" {
		fmt.Fprintf(w, "\n#%d\n", n)
		field("unreadable", readable(r.Unreadable, fieldChars))
		return
	}
	fmt.Fprintf(w, "\n#%d  id %s\n", n, r.ID)
	if r.Answer != nil {
		field("finish", r.FinishReason)
	}
	if r.Reject != nil {
		v := r.Reject.Reason
		if r.Reject.Stage != "" {
			v = r.Reject.Stage + ": " + v
		}
		if r.Reject.Detail != "" {
			v += " (" + readable(r.Reject.Detail, 120) + ")"
		}
		field("rejected", v)
	}
	if r.Failure != nil {
		field("failed", r.Failure.Stage+": "+readable(r.Failure.Error, 160))
	}
	if r.LastUser != "" {
		field("user", readable(r.LastUser, fieldChars))
	}
	if len(r.Tools) > 0 {
		field("tools", readable(strings.Join(r.Tools, ", "), fieldChars))
	}
	for _, s := range r.ToolSteps {
		if s.Call {
			k := "call"
			if s.Reply {
				k = "calls" // the reply's own
			}
			field(k, readable(s.Name, 80)+" "+readable(s.Text, fieldChars))
		} else if s.Name != "" {
			field("result", readable(s.Name, 80)+": "+readable(s.Text, fieldChars))
		} else {
			field("result", readable(s.Text, fieldChars))
		}
	}
	if r.Answer != nil {
		field("answer", orEmpty(readable(*r.Answer, fieldChars)))
		field("reasoning", orEmpty(readable(r.Reasoning, reasoningChars)))
		field("generated", fmt.Sprintf("%d tokens, prompt %d tokens", r.CompTok, r.PromptTok))
	}
	if r.HasTokens {
		field("tokens", fmt.Sprintf("num_tokens %d, num_loss_tokens %d", r.NumTokens, r.NumLossTok))
		if r.segs == nil {
			spans := make([]string, len(r.LossSpans))
			for i, s := range r.LossSpans {
				spans[i] = fmt.Sprintf("[%d,%d)", s[0], s[1])
			}
			field("trained", strings.Join(spans, " ")+"  (token indexes with loss_mask 1; --tokenizer DIR shows the text)")
		} else {
			var b strings.Builder
			for _, s := range r.segs {
				t := readable(s.text, segmentChars)
				if s.masked {
					t = "⟦" + t + "⟧"
				}
				b.WriteString(t)
			}
			field("text", b.String())
		}
	}
}

func orEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return s
}

// readable shortens s in the middle to about n characters and shows
// control characters as escapes, so a row stays on one line.
func readable(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	r := []rune(s)
	if len(r) <= n {
		return termsafe.Line(s)
	}
	h := n / 2
	return termsafe.Line(string(r[:h])) + fmt.Sprintf(" …[%d chars]… ", len(r)-2*h) + termsafe.Line(string(r[len(r)-h:]))
}

// hasManifest reports whether dir has a manifest, under either name.
func hasManifest(dir string) bool {
	_, ok := filecommit.ManifestPath(dir)
	return ok
}
