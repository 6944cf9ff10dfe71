package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// jsonlOutput is write-jsonl's output.Spec: a JSONL file, read by
// its commit index (the hidden .NAME.idx beside it).
var jsonlOutput = &output.Spec{
	Committed: committedJSONL,
	IDs:       commitlog.ReadIDs,
	Each:      EachJSONLRecord,
	Claims: func(path string) bool {
		ext := strings.ToLower(filepath.Ext(path))
		st, err := os.Stat(path)
		return err == nil && !st.IsDir() && (ext == ".jsonl" || ext == ".ndjson")
	},
}

// committedJSONL is the committed part of the JSONL file path: its lines
// up to the last commit.
func committedJSONL(path string) (*output.Committed, error) {
	if _, err := os.Stat(commitlog.IndexPath(path)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	rows, size, err := commitlog.Committed(path)
	if err != nil {
		return nil, err
	}
	return &output.Committed{Format: "jsonl", Unit: "lines", Rows: int64(rows), Bytes: size,
		Files: []output.File{{Path: path, Rows: int64(rows), Bytes: size}}}, nil
}

// EachJSONLRecord calls fn with every record of a JSONL file of pipe's
// records (or a trainer layout's lines, parseLayoutLine): a write-jsonl
// output's committed lines (what its commit index counts), or every line
// of a file without an index. One line is held at a time.
func EachJSONLRecord(ctx context.Context, path string, fn func(*record.Record) error) error {
	if st, err := os.Stat(path); err != nil {
		return err
	} else if st.IsDir() || slices.Contains([]string{".parquet", ".arrow"}, strings.ToLower(filepath.Ext(path))) {
		return fmt.Errorf("%s: not a JSONL file", pipeline.DisplayPath(path))
	}
	committed := -1 // records; -1: no commit index, every line
	if _, err := os.Stat(commitlog.IndexPath(path)); err == nil {
		rows, _, err := commitlog.Committed(path)
		if err != nil {
			return err
		}
		committed = rows
	}
	src := &jsonlSource{Path: path}
	n := 0
	return src.eachLine(ctx, func(lineNo int, line []byte) (bool, error) {
		if committed >= 0 && n >= committed {
			return false, nil // an uncommitted tail a live or killed run left
		}
		n++
		rec, err := parseLayoutLine(line)
		if err != nil {
			return false, fmt.Errorf("%s:%d: %v", path, lineNo, err)
		}
		return true, fn(rec)
	})
}

// parseLayoutLine reads a line of any write-jsonl layout back into a
// record: pipe's record, or a trainer layout's (trainrow): top-level
// input_ids and loss_mask become its tokens, conversations its messages.
func parseLayoutLine(line []byte) (*record.Record, error) {
	var v struct {
		record.Record
		InputIDs []int32         `json:"input_ids"`
		LossMask record.LossMask `json:"loss_mask"`
		// The conversations layout's turns and tools hold tool calls and
		// schemas as JSON text: read as read-prompts reads them.
		Conversations []json.RawMessage `json:"conversations"`
		Tools         json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return nil, fmt.Errorf("%v", jsonErrText(err))
	}
	rec := v.Record
	var err error
	if rec.Tools, err = parseTools(v.Tools); err != nil {
		return nil, err
	}
	if rec.ID == "" {
		return nil, errors.New(`no "id": not a line of write-jsonl`)
	}
	if rec.Tokens == nil && v.InputIDs != nil {
		rec.Tokens = &record.Tokens{InputIDs: v.InputIDs, LossMask: v.LossMask, NumTokens: len(v.InputIDs)}
		for _, m := range v.LossMask {
			rec.Tokens.NumLossTokens += int(m)
		}
	}
	if rec.Messages == nil && v.Conversations != nil {
		if rec.Messages, err = readTurns(v.Conversations); err != nil {
			return nil, fmt.Errorf("conversations: %v", err)
		}
	}
	return &rec, nil
}

// verifyJSONL is write-jsonl's Verify: the committed lines of its file
// against their index (see commitlog.CheckLog).
func verifyJSONL(_ context.Context, c *writeJSONLConfig, env *output.VerifyEnv) (*output.Verified, error) {
	path := c.Path
	res, err := commitlog.CheckLog(path, env.Hash, recordline.ID)
	if err != nil {
		return nil, err
	}
	v := &output.Verified{Where: pipeline.DisplayPath(path), Items: res.Rows, Unit: "lines", Bytes: res.Bytes, How: "size", Problems: res.Problems}
	if env.Hash {
		v.How = "size, every committed line's id against the index"
	}
	return v, nil
}
