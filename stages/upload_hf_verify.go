package stages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/stages/hfhub"
)

// verifyHub is upload-hf's Verify: the branch, as the Hub lists it, holds
// every shard the writer's manifest names under its Hub name, with its
// size and SHA-256 (the LFS oid). What this run recorded of its own
// uploads is not trusted for it.
func verifyHub(ctx context.Context, c *uploadHFConfig, env *output.VerifyEnv) (*output.Verified, error) {
	client, _, err := c.connect(ctx, false)
	if errors.Is(err, errNoRepo) {
		return &output.Verified{Stage: env.StageID, Where: client.URL() + "@" + c.Revision, Problems: []string{client.URL() + " does not exist: nothing was published"}}, nil
	}
	if err != nil {
		return nil, err
	}
	v := &output.Verified{Stage: env.StageID, Where: client.URL() + "@" + c.Revision, How: "size, sha256 (the Hub's LFS oid)", Covers: map[string]bool{}}
	head, err := client.Head(ctx, c.Revision)
	if err != nil {
		return nil, refusedHub(err)
	}
	files, err := client.Tree(ctx, head)
	if err != nil {
		return nil, refusedHub(err)
	}
	have := map[string]hfhub.Entry{}
	for _, e := range files {
		have[e.Path] = e
	}
	for _, in := range env.Inputs {
		if in.Dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(in.Dir, filecommit.ManifestName)); os.IsNotExist(err) {
			continue // nothing committed yet
		}
		m, err := filecommit.ReadManifest(in.Dir)
		if err != nil {
			return nil, err
		}
		shards := sortedShards(m)
		ours := map[string]bool{}
		for i, sh := range shards {
			name := hubName(c.Split, i, len(shards))
			ours[name] = true
			e, ok := have[name]
			switch {
			case !ok:
				v.Problems = append(v.Problems, fmt.Sprintf("%s: %s is not on the branch (shard %s)", v.Where, name, sh.Name))
			case e.SHA256() != sh.SHA256 || e.Size != sh.Bytes:
				v.Problems = append(v.Problems, fmt.Sprintf("%s: %s has %d bytes and sha256 %q, want %d and %s (shard %s)", v.Where, name, e.Size, e.SHA256(), sh.Bytes, sh.SHA256, sh.Name))
			default:
				v.Items++
				v.Bytes += sh.Bytes
				v.Covers[filepath.Join(in.Dir, sh.Name)] = true
			}
		}
		for path := range have {
			if strings.HasPrefix(path, "data/"+c.Split+"-") && !ours[path] {
				v.Problems = append(v.Problems, fmt.Sprintf("%s: %s is not a shard of this run: load_dataset would read its rows too", v.Where, path))
			}
		}
	}
	return v, nil
}
