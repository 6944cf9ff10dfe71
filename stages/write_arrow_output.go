package stages

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/pipeline/record"
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

// committedShards is what the manifest of the shard directory dir names.
func committedShards(dir string) (*output.Committed, error) {
	m, err := filecommit.ReadManifest(dir)
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
	m, err := filecommit.ReadManifest(dir)
	if err != nil || m == nil {
		return nil, err
	}
	ids, err := commitlog.ReadIDLog(filecommit.IDLogPath(dir))
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

// eachShardRecord calls fn with every committed record of a shard
// directory (its manifest's shards) or one shard file, a batch at a time.
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
