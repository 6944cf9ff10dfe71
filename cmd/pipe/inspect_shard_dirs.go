package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/pipeline/filecommit"
)

// pipe inspect: shard directories.

type dirReport struct {
	Dir      string       `json:"dir"`
	Manifest bool         `json:"manifest"` // false: no manifest, nothing committed
	Format   string       `json:"format,omitempty"`
	Schema   string       `json:"schema,omitempty"`
	Rows     int64        `json:"rows"`
	Tokens   int64        `json:"tokens"`
	Bytes    int64        `json:"bytes"`
	Updated  time.Time    `json:"updated,omitzero"`
	Shards   []shardEntry `json:"shard_files"`
	// NotCommitted are part files the manifest does not list (a writer
	// stopped before committing them; removed when it resumes).
	NotCommitted []string `json:"not_committed,omitempty"`
	// Temporary are hidden files of a shard being written.
	Temporary []string `json:"temporary,omitempty"`
	Verified  bool     `json:"sha256_verified"`
	// First is the first shard, whose rows are shown.
	First *shardReport `json:"first_shard,omitempty"`
}

type shardEntry struct {
	filecommit.ShardInfo
	// Status: "ok", "missing", "size ..." or "sha256 ...".
	Status string `json:"status"`
}

func (ins *inspector) shardDir(doc *inspectDoc, dir string) error {
	m, err := filecommit.ReadManifest(dir)
	if err != nil {
		return fmt.Errorf("pipe inspect: %w", err)
	}
	dr := &dirReport{Dir: dir, Verified: ins.opts.verify}
	doc.Dir = dr
	named := map[string]bool{}
	if m != nil {
		dr.Manifest = true
		dr.Format, dr.Schema, dr.Rows, dr.Tokens, dr.Bytes, dr.Updated = m.Format, m.Schema, m.Rows, m.Tokens, m.Bytes, m.Updated
		for _, sh := range m.Shards {
			named[sh.Name] = true
			e := shardEntry{ShardInfo: sh, Status: shardStatus(filepath.Join(dir, sh.Name), sh, ins.opts.verify)}
			if e.Status != "ok" {
				doc.Problems = append(doc.Problems, sh.Name+": "+e.Status)
			}
			dr.Shards = append(dr.Shards, e)
		}
	}
	for _, name := range partFiles(dir) {
		if !named[name] {
			dr.NotCommitted = append(dr.NotCommitted, name)
		}
	}
	dr.Temporary = temporaryParts(dir)
	for _, e := range dr.Shards { // rows of the first shard that checks out
		if e.Status != "ok" {
			continue
		}
		p := filepath.Join(dir, e.Name)
		sr, rows, err := ins.shardFile(p, ins.opts.rows)
		dr.First, doc.Rows, doc.RowsFrom = sr, rows, p
		return err
	}
	return nil
}

// shardStatus checks the shard file at p against its manifest entry sh:
// "ok", "missing", or what differs (its size; with verify, its SHA-256).
func shardStatus(p string, sh filecommit.ShardInfo, verify bool) string {
	st, err := os.Stat(p)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		return "missing"
	case err != nil:
		return err.Error()
	case st.Size() != sh.Bytes:
		return fmt.Sprintf("size %d, manifest says %d", st.Size(), sh.Bytes)
	case verify:
		sum, err := fileSHA256(p)
		if err != nil {
			return err.Error()
		} else if sum != sh.SHA256 {
			return fmt.Sprintf("sha256 %s, manifest says %s", short(sum), short(sh.SHA256))
		}
	}
	return "ok"
}

// temporaryParts lists dir's shards being written (.part-*.tmp).
func temporaryParts(dir string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, ".part-") && strings.HasSuffix(n, ".tmp") {
			out = append(out, n)
		}
	}
	return out
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
