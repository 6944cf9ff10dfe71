package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/stages/s3up"
)

// verifyUploads is upload-s3's Verify: for each shard directory feeding it
// (env.Inputs), every shard its local manifest names must be in the bucket
// at PREFIX/DIRNAME/NAME with its size and SHA-256 (see
// s3up.CheckObject), and the manifest there must be the local one.
func verifyUploads(ctx context.Context, c *uploadS3Config, env *output.VerifyEnv) (*output.Verified, error) {
	u := &uploadS3{cfg: *c}
	client, _, err := u.connect(ctx)
	if err != nil {
		return nil, refusal(err)
	}
	defer client.Close()
	v := &output.Verified{Stage: env.StageID, Where: u.cfg.URI, Covers: map[string]bool{}}
	for _, in := range env.Inputs {
		if in.Dir == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(in.Dir, filecommit.ManifestName))
		if err != nil {
			return nil, err
		}
		var m filecommit.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, &commitlog.DamagedError{Path: filepath.Join(in.Dir, filecommit.ManifestName), Err: err}
		}
		prefix := client.Key(filepath.Base(in.Dir))
		before := len(v.Problems)
		if err := VerifyObjects(ctx, client, prefix, &m, in.Dir, env.Hash, env.Repair, v); err != nil {
			return nil, err
		}
		key := prefix + "/" + filecommit.ManifestName
		got, err := getIfThere(ctx, client, key)
		if err == nil && env.Repair && len(v.Problems) == before && !bytes.Equal(got, data) {
			// Every shard is there: the manifest goes up (last).
			if _, err := client.PutBytes(ctx, key, data, "application/json"); err != nil {
				return nil, err
			}
			v.Repaired = append(v.Repaired, client.URL(key)+" uploaded (every shard it names is in the bucket)")
			got = data
		}
		switch {
		case err != nil:
			return nil, err
		case got == nil:
			v.Problems = append(v.Problems, client.URL(key)+" is not in the bucket")
		case !bytes.Equal(got, data):
			v.Problems = append(v.Problems, fmt.Sprintf("%s is not the local %s (%d bytes there, %d here)", client.URL(key), filepath.Join(in.Dir, filecommit.ManifestName), len(got), len(data)))
		}
	}
	return v, nil
}

func getIfThere(ctx context.Context, c *s3up.Client, key string) ([]byte, error) {
	obj, err := c.Head(ctx, key)
	if err != nil || obj == nil {
		return nil, err
	}
	return c.GetBytes(ctx, key)
}

// VerifyObjects checks in the bucket, under prefix, every shard m names,
// adding to v; local is the shard directory ("" for none): with repair, a
// shard missing or different in the bucket is uploaded again from it. The
// manifest itself is the caller's.
func VerifyObjects(ctx context.Context, c *s3up.Client, prefix string, m *filecommit.Manifest, local string, hash, repair bool, v *output.Verified) error {
	for _, sh := range m.Shards {
		key := prefix + "/" + sh.Name
		path := ""
		if local != "" {
			path = filepath.Join(local, sh.Name)
		}
		got, err := c.CheckObject(ctx, key, sh.Bytes, sh.SHA256, path, hash)
		if err != nil {
			return err
		}
		v.Items++
		v.Bytes += sh.Bytes
		if got.OK {
			v.How = got.How
			if path != "" {
				v.Covers[path] = true
			}
			continue
		}
		problem := fmt.Sprintf("%s %s (%d rows)", c.URL(key), got.Problem, sh.Rows)
		if repair && path != "" {
			if _, err := os.Stat(path); err == nil {
				res, err := c.UploadFile(ctx, key, path, sh.Bytes, sh.SHA256, nil)
				if err != nil {
					return fmt.Errorf("%s; uploading it again from %s: %w", problem, path, err)
				}
				v.Repaired = append(v.Repaired, fmt.Sprintf("%s; uploaded again from %s (%s)", problem, path, res.Verified))
				v.Covers[path] = true
				continue
			}
		}
		v.Problems = append(v.Problems, problem)
	}
	return nil
}
