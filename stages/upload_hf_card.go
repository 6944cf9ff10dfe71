package stages

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/internal/outage"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/output"
	"github.com/pipe-dev/pipe/stages/hfhub"
)

// publishCard is upload-hf's Publish: the dataset card (README.md), the
// pipeline file and the manifest, in one commit after the shards; then
// the branch is read back to check they are there.
func publishCard(ctx context.Context, c *uploadHFConfig, env *output.PublishEnv) error {
	var dir string
	for _, in := range env.Inputs {
		if in.Dir != "" {
			dir = in.Dir
		}
	}
	if dir == "" || env.Card == nil {
		return nil
	}
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		return err
	}
	manifest, err := os.ReadFile(filepath.Join(dir, filecommit.ManifestName))
	if err != nil {
		return err
	}
	client, _, err := c.connect(ctx, false)
	if err != nil {
		return err
	}
	readme, err := renderCard(c, client, m, dir, env.Card)
	if err != nil {
		return err
	}
	p := &hubPublish{cfg: c, client: client, log: env.Log,
		wait: &outage.Waiter{Service: "the Hub", Timeout: c.UploadTimeout.Duration, Transient: hubTransient, Asked: hfhub.Asked}}
	head, have, err := p.branch(ctx)
	if err != nil {
		return err
	}
	cm := hfhub.Commit{Summary: "pipe: dataset card, pipeline and manifest", Parent: head}
	for _, f := range []*hfhub.Upload{smallFile("README.md", readme), smallFile("pipe/pipeline.toml", env.Card.PipelineFile), smallFile("pipe/manifest.json", manifest)} {
		if e, ok := have[f.Path]; !ok || (e.OID != gitBlobID(f.Content) && e.SHA256() != f.SHA256) {
			cm.Files = append(cm.Files, f)
		}
	}
	if len(cm.Files) == 0 {
		return nil // the branch has this card already
	}
	err = p.wait.Do(ctx, "sending the card", func() error {
		if err := client.Preupload(ctx, c.Revision, cm.Files); err != nil {
			return err
		}
		for _, f := range cm.Files {
			if f.LFS { // the Hub may want even a small file by LFS
				if _, err := client.UploadLFS(ctx, c.Revision, f, bytes.NewReader(f.Content)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return refusedHub(err)
	}
	if _, err := p.commit(ctx, cm); err != nil {
		return err
	}
	if _, have, err = p.branch(ctx); err != nil {
		return err
	}
	for _, f := range cm.Files {
		if e, ok := have[f.Path]; !ok || e.Size != f.Size {
			return fmt.Errorf("%s: %s is not on the branch after its commit", client.URL(), f.Path)
		}
	}
	fmt.Fprintf(env.Log, "stage %q: dataset card published: %s\n", env.StageID, client.URL())
	return nil
}

// smallFile is a file committed from memory.
func smallFile(path string, content []byte) *hfhub.Upload {
	sum := sha256.Sum256(content)
	return &hfhub.Upload{Path: path, Size: int64(len(content)), Sample: content[:min(len(content), 512)], SHA256: hex.EncodeToString(sum[:]), Content: content}
}

// gitBlobID is git's id of a file's content: the SHA-1 of "blob SIZE\0"
// and the content, as the Hub's tree lists regular files.
func gitBlobID(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}
