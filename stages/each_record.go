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

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/shardset"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// shardOutput is write-arrow's output.Spec: a shard directory,
// read by its manifest (.pipe/manifest.json) and id log (.pipe/ids).
var shardOutput = &output.Spec{
	Committed: committedShards,
	IDs:       shardIDs,
	Each:      eachShardRecord,
	Claims: func(path string) bool {
		shards, err := shardFiles(path)
		return err == nil && shards != nil
	},
}

// jsonlOutput is write-jsonl's output.Spec: a JSONL file, read by
// its commit index (the hidden .NAME.idx beside it).
var jsonlOutput = &output.Spec{
	Committed: committedJSONL,
	IDs:       commitlog.ReadIDs,
	Each:      eachJSONLRecord,
	Claims: func(path string) bool {
		ext := strings.ToLower(filepath.Ext(path))
		st, err := os.Stat(path)
		return err == nil && !st.IsDir() && (ext == ".jsonl" || ext == ".ndjson")
	},
}

// committedShards is what the manifest of the shard directory dir names.
func committedShards(dir string) (*output.Committed, error) {
	m, err := shardset.ReadManifest(dir)
	if err != nil || m == nil {
		return nil, err
	}
	c := &output.Committed{Format: m.Format, Unit: "shards", Files: make([]output.File, 0, len(m.Shards))}
	for _, s := range m.Shards {
		c.Files = append(c.Files, output.File{Path: filepath.Join(dir, s.Name), Rows: s.Rows, Tokens: s.Tokens, Bytes: s.Bytes, SHA256: s.SHA256})
		c.Rows += s.Rows
		c.Tokens += s.Tokens
		c.Bytes += s.Bytes
	}
	return c, nil
}

// shardIDs are the id hashes of the rows of dir's committed shards. The
// id log runs ahead of the manifest by the rows of a shard a crash left
// uncommitted (they are written again, and logged again, on resume).
func shardIDs(dir string) ([]uint64, error) {
	m, err := shardset.ReadManifest(dir)
	if err != nil || m == nil {
		return nil, err
	}
	ids, err := commitlog.ReadIDLog(shardset.IDLogPath(dir))
	if err != nil {
		return nil, err
	}
	var rows int64
	for _, s := range m.Shards {
		rows += s.Rows
	}
	if int64(len(ids)) > rows {
		ids = ids[:rows]
	}
	return ids, nil
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

// EachRecord calls fn with every committed record of one output, in
// order, holding one Parquet/Arrow batch or one JSONL line at a time: a
// write-arrow directory (its manifest's shards) or one shard file, or a
// write-jsonl file (its committed lines: what its commit index counts; a
// file without an index is read whole). It reads as read-completions does
// (shardFiles, arrowrow.Records, jsonlSource), without its checks.
func EachRecord(ctx context.Context, path string, fn func(*record.Record) error) error {
	shards, err := shardFiles(path)
	if err != nil {
		return err
	}
	if shards != nil {
		return eachShardFile(ctx, shards, fn)
	}
	return eachJSONLRecord(ctx, path, fn)
}

// eachShardRecord is EachRecord of a shard directory (or shard file).
func eachShardRecord(ctx context.Context, path string, fn func(*record.Record) error) error {
	shards, err := shardFiles(path)
	if err != nil {
		return err
	}
	if shards == nil {
		return fmt.Errorf("%s: not a shard directory or shard file (.parquet, .arrow)", pipeline.DisplayPath(path))
	}
	return eachShardFile(ctx, shards, fn)
}

func eachShardFile(ctx context.Context, shards []string, fn func(*record.Record) error) error {
	for _, sh := range shards {
		err := arrowrow.ReadFile(ctx, sh, memory.DefaultAllocator, func(batch arrow.RecordBatch) error {
			recs, err := arrowrow.Records(batch)
			if err != nil {
				return fmt.Errorf("%s: %w", sh, err)
			}
			for _, r := range recs {
				if err := fn(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// eachJSONLRecord is EachRecord of a JSONL file: its committed lines, or
// every line of a file without a commit index.
func eachJSONLRecord(ctx context.Context, path string, fn func(*record.Record) error) error {
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
