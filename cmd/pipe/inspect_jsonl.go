package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// pipe inspect: JSONL files.

type jsonlReport struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
	Lines int64  `json:"lines"`
	// Committed is the lines the commit index holds; nil without an index
	// (a file not written by pipe's commit log).
	Committed *int64 `json:"committed"`
	Index     string `json:"index,omitempty"`
	// Journal is set for a journal (lines {"port", "record"}).
	Journal  bool    `json:"journal,omitempty"`
	WithTok  int64   `json:"rows_with_tokens"`
	Tokens   int64   `json:"tokens"`
	LossTok  int64   `json:"loss_tokens"`
	Rejected []tally `json:"rejected,omitempty"`
	Failed   []tally `json:"failed,omitempty"`
}

type tally struct {
	Stage  string `json:"stage"`
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

func (ins *inspector) jsonlFile(path string, n int) (*jsonlReport, []rowReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	jr := &jsonlReport{Path: path, Bytes: st.Size()}
	ids, err := commitlog.ReadIDs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("pipe inspect: %w", err)
	}
	if _, err := os.Stat(commitlog.IndexPath(path)); err == nil {
		c := int64(len(ids))
		jr.Committed, jr.Index = &c, commitlog.IndexPath(path)
	}
	rejects := map[[2]string]int64{}
	fails := map[[2]string]int64{}
	var first []*record.Record
	bad := map[int]string{} // index in first: why the line did not decode
	r := bufio.NewReaderSize(f, 1<<20)
	parser := recordline.NewParser(recordline.Options{})
	var line []byte
	for {
		if jr.Lines%4096 == 0 {
			if err := ins.ctx.Err(); err != nil {
				return jr, nil, err
			}
		}
		var rerr error
		line, rerr = readWholeLine(r, line[:0])
		if t := bytes.TrimSpace(line); len(t) > 0 {
			jr.Lines++
			if jr.Lines == 1 {
				_, jr.Journal = recordline.JournalRecord(t)
			}
			if len(first) < n {
				first = jr.takeRecord(first, t, bad)
			}
			jr.scan(parser, t, rejects, fails)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return jr, ins.rows(first), fmt.Errorf("pipe inspect: reading %s: %w", path, rerr)
		}
	}
	jr.Rejected, jr.Failed = sortTally(rejects), sortTally(fails)
	rows := ins.rows(first)
	for i, why := range bad {
		rows[i] = rowReport{Unreadable: why}
	}
	return jr, rows, nil
}

// readWholeLine appends the next line of r, however long, to line; err is
// r's error after it (io.EOF at the end).
func readWholeLine(r *bufio.Reader, line []byte) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// takeRecord appends the record of line, the jr.Lines-th, to first; a
// line that is not one is an empty record, and bad says why at its index.
func (jr *jsonlReport) takeRecord(first []*record.Record, line []byte, bad map[int]string) []*record.Record {
	rec, err := decodeLine(line, jr.Journal)
	if err != nil {
		bad[len(first)] = fmt.Sprintf("line %d is not a record: %v", jr.Lines, err)
		rec = &record.Record{}
	}
	return append(first, rec)
}

func decodeLine(line []byte, journal bool) (*record.Record, error) {
	if journal {
		je, err := commitlog.ParseJournalEntry(line)
		if err != nil {
			return nil, err
		}
		return je.Record, nil
	}
	var rec record.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// failureChars is how much of a failure's error a tally keeps.
const failureChars = 60

// scan counts a record line's (or a journal entry's record's) tokens and
// its rejection or failure (recordline.Row). A line that does not decode
// counts nothing: takeRecord says why for the lines shown.
func (jr *jsonlReport) scan(p *recordline.Parser, line []byte, rejects, fails map[[2]string]int64) {
	if jr.Journal {
		rec, ok := recordline.JournalRecord(line)
		if !ok {
			return
		}
		line = rec
	}
	var x recordline.Row
	if p.Parse(line, &x) != nil {
		return
	}
	if x.Tokens {
		jr.WithTok++
		jr.Tokens += int64(x.NumTokens)
		jr.LossTok += int64(x.LossTokens)
	}
	if x.RejectReason != "" || x.RejectStage != "" {
		rejects[[2]string{x.RejectStage, x.RejectReason}]++
	}
	if x.FailStage != "" || x.Failed != "" {
		fails[[2]string{x.FailStage, termsafe.Cut(x.Failed, failureChars)}]++
	}
}

func sortTally(m map[[2]string]int64) []tally {
	out := make([]tally, 0, len(m))
	for k, c := range m {
		out = append(out, tally{Stage: k[0], Reason: k[1], Count: c})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stage != b.Stage {
			return a.Stage < b.Stage
		}
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Reason < b.Reason
	})
	return out
}
