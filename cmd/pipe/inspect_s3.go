package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/stages/s3up"
)

// s3Dir inspects shards upload-s3 put at uri (s3://bucket/prefix/DIR): the
// manifest there, each shard's object checked against it (size and the
// sha256 recorded at upload; --verify downloads and hashes each), and the
// rows of the first shard, downloaded into a temporary file.
func (ins *inspector) s3Dir(doc *inspectDoc, uri string) error {
	c, err := s3up.New(ins.ctx, s3up.Config{URI: uri, Endpoint: ins.opts.endpoint, Region: ins.opts.region, PathStyle: ins.opts.pathStyle})
	if err != nil {
		return usageErrorf("pipe inspect: %v", err)
	}
	defer c.Close()
	if _, err := c.Check(ins.ctx); err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	}
	key, data, err := c.GetManifest(ins.ctx)
	if err != nil {
		return fmt.Errorf("pipe inspect: %w (is %s a shard directory upload-s3 wrote?)", err, uri)
	}
	var m filecommit.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("pipe inspect: %s: %w", c.URL(key), err)
	}
	dr := &dirReport{Dir: uri, Manifest: true, Verified: ins.opts.verify,
		Format: m.Format, Schema: m.Schema, Rows: m.Rows, Tokens: m.Tokens, Bytes: m.Bytes, Updated: m.Updated}
	doc.Dir = dr
	tmp, err := os.MkdirTemp("", "pipe-inspect-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	first := ""
	for _, sh := range m.Shards {
		e := shardEntry{ShardInfo: sh, Status: ins.s3ShardStatus(c, sh, tmp, &first)}
		if e.Status != "ok" {
			doc.Problems = append(doc.Problems, sh.Name+": "+e.Status)
		}
		dr.Shards = append(dr.Shards, e)
	}
	if first != "" {
		sr, rows, err := ins.shardFile(first, ins.opts.rows)
		dr.First, doc.Rows, doc.RowsFrom = sr, rows, c.URL(c.Key(filepath.Base(first)))
		return err
	}
	return nil
}

// s3ShardStatus checks the object of shard sh against the manifest: "ok",
// "missing", or what differs (its size, the sha256 recorded at upload; with
// --verify, the download's). The first shard that checks out is downloaded
// into tmp, its path set in *first, for its rows.
func (ins *inspector) s3ShardStatus(c *s3up.Client, sh filecommit.ShardInfo, tmp string, first *string) string {
	obj, err := c.Head(ins.ctx, c.Key(sh.Name))
	switch {
	case err != nil:
		return err.Error()
	case obj == nil:
		return "missing"
	case obj.Size != sh.Bytes:
		return fmt.Sprintf("size %d, manifest says %d", obj.Size, sh.Bytes)
	case obj.SHA256 != "" && obj.SHA256 != sh.SHA256:
		return fmt.Sprintf("sha256 %s recorded at upload, manifest says %s", short(obj.SHA256), short(sh.SHA256))
	case ins.opts.verify || *first == "":
		local := filepath.Join(tmp, sh.Name)
		if err := c.Download(ins.ctx, c.Key(sh.Name), local, sh.SHA256); err != nil {
			return err.Error()
		} else if *first == "" {
			*first = local
		} else {
			os.Remove(local)
		}
	}
	return "ok"
}
