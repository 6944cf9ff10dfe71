package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// EachRecord calls fn with every committed record of one output, in
// order, holding one Parquet/Arrow batch or one JSONL line at a time: a
// write-arrow directory (its manifest's shards) or one shard file, or a
// write-jsonl file (its committed lines: what its commit index counts; a
// file without an index is read whole). It reads as read-completions does
// (shardFiles, arrowrow.Records, jsonlSource), without its checks.
func EachRecord(ctx context.Context, path string, fn func(*pipeline.Record) error) error {
	shards, err := shardFiles(path)
	if err != nil {
		return err
	}
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
	if shards != nil {
		return nil
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
func parseLayoutLine(line []byte) (*pipeline.Record, error) {
	var v struct {
		pipeline.Record
		InputIDs      []int32            `json:"input_ids"`
		LossMask      pipeline.LossMask  `json:"loss_mask"`
		Conversations []pipeline.Message `json:"conversations"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return nil, fmt.Errorf("%v", jsonErrText(err))
	}
	rec := v.Record
	if rec.ID == "" {
		return nil, errors.New(`no "id": not a line of write-jsonl`)
	}
	if rec.Tokens == nil && v.InputIDs != nil {
		rec.Tokens = &pipeline.Tokens{InputIDs: v.InputIDs, LossMask: v.LossMask, NumTokens: len(v.InputIDs)}
		for _, m := range v.LossMask {
			rec.Tokens.NumLossTokens += int(m)
		}
	}
	if rec.Messages == nil && v.Conversations != nil {
		rec.Messages = v.Conversations
	}
	return &rec, nil
}
