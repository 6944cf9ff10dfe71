package stages

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
)

// verifyShardDir is write-arrow's Verify: every shard its manifest names,
// by size and (env.Hash) SHA-256; rows of shards found damaged that were
// never written again are lost, by id hash (the directory keeps only
// hashes of ids).
func verifyShardDir(_ context.Context, c *writeArrowConfig, env *output.VerifyEnv) (*output.Verified, error) {
	return VerifyShardDir(c.Path, env.Hash)
}

// VerifyShardDir checks the shard directory dir against its manifest (see
// verifyShardDir); pipe verify PATH calls it for a directory alone.
func VerifyShardDir(dir string, hash bool) (*output.Verified, error) {
	v := &output.Verified{Where: pipeline.DisplayPath(dir), Dir: dir, How: "size"}
	if hash {
		v.How = "size, sha256"
	}
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	if m == nil {
		v.Problems = append(v.Problems, fmt.Sprintf("%s has no %s: nothing committed there", v.Where, filecommit.ManifestName))
		return v, nil
	}
	res, err := filecommit.Check(dir, m, hash)
	if err != nil {
		return nil, err
	}
	v.Items, v.Bytes = res.Shards, res.Bytes
	for _, p := range res.Problems {
		if p.MovedTo != "" { // whole if its copy there is (resolveGone)
			v.Gone = append(v.Gone, filepath.Join(dir, p.Shard.Name))
			continue
		}
		v.Problems = append(v.Problems, fmt.Sprintf("%s %s (%d rows; pipe run --verify-shards writes them again from the journal)", filepath.Join(v.Where, p.Shard.Name), p.What, p.Shard.Rows))
	}
	redo, err := filecommit.ReadRedo(dir)
	if err != nil {
		return nil, err
	}
	for _, h := range redo {
		v.Lost = append(v.Lost, fmt.Sprintf("id hash %016x", h))
	}
	return v, nil
}
