package filecommit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// Manifest lists the committed shards of a directory. It is replaced
// atomically after each shard is committed, so it never names a shard that
// is not whole, and a shard it does not name was never committed.
type Manifest struct {
	Format  string      `json:"format"`
	Schema  string      `json:"schema,omitempty"`
	Rows    int64       `json:"rows"`
	Tokens  int64       `json:"tokens"`
	Bytes   int64       `json:"bytes"`
	Updated time.Time   `json:"updated"`
	Shards  []ShardInfo `json:"shards"`
	// Recovered, when ReadManifest found the manifest damaged and read
	// its copy, says so (a warning to show); it is not written.
	Recovered string `json:"-"`
}

// ShardInfo is one committed shard.
type ShardInfo struct {
	Name      string    `json:"name"`
	Rows      int64     `json:"rows"`
	Tokens    int64     `json:"tokens"`
	Bytes     int64     `json:"bytes"`
	SHA256    string    `json:"sha256"`
	Committed time.Time `json:"committed"`
}

// ReadManifest reads dir's manifest; a directory without one has none (nil).
// It reads LegacyManifestName when only that is there.
func ReadManifest(dir string) (*Manifest, error) {
	path, ok := ManifestPath(dir)
	if !ok {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		// A damaged manifest (a bad sector, a torn page): its copy,
		// written just before it, names the same shards or one more
		// (whole: a shard is in place before either names it).
		copyPath := filepath.Join(dir, ManifestCopyName)
		if cdata, cerr := os.ReadFile(copyPath); cerr == nil && json.Unmarshal(cdata, &m) == nil {
			m.Recovered = fmt.Sprintf("%s was damaged (%v): read its copy %s", path, err, copyPath)
			return &m, nil
		}
		return nil, &commitlog.DamagedError{Path: path, Err: fmt.Errorf("%v, and it has no readable copy (%s): "+
			"restore the manifest from a copy (upload-s3 keeps one beside the shards in the bucket), or move %s aside and run with --fresh", err, copyPath, dir)}
	}
	return &m, nil
}

// Set is a directory of shard files (part-00000.EXT, …) with its manifest
// and a hidden log of the ids of the rows it holds (.ids). The commit of a
// shard: write it under a hidden temporary name, fsync, rename, fsync the
// directory, append its ids to the log, replace the manifest. Open removes
// what a crash left before the manifest named it; those rows were not
// committed and are written again.
type Set struct {
	dir, ext, format, schema string
	m                        Manifest
	ids                      *commitlog.IDLog
	held                     *commitlog.Set // ids held when opened
	next                     int            // number of the next shard
	redo                     map[uint64]bool
	recovered                string // what Open found damaged and mended
}

// Recovered says what Open found damaged and mended ("" for nothing).
func (s *Set) Recovered() string { return s.recovered }

// shardNameStart is how every shard file's name starts, as a Set names
// them: part-NNNNN. (at least five digits), then the extension. partName
// matches a shard file and what a crash left of one being written;
// shardName a shard file only.
const shardNameStart = `^part-\d{5,}\.`

var (
	partName  = regexp.MustCompile(shardNameStart)
	shardName = regexp.MustCompile(shardNameStart + `[a-z]+$`)
)

// IsShardName says whether name is a shard file's name, as a Set writes
// them: part-NNNNN.EXT.
func IsShardName(name string) bool { return shardName.MatchString(name) }

// Open opens (creating) the shard directory dir for files of format
// with extension ext ("parquet", ".parquet"). removed lists the files a
// crash left that were not committed, now deleted.
func Open(dir, format, ext, schema string) (s *Set, removed []string, err error) {
	return OpenRebuilding(dir, format, ext, schema, nil)
}

// IDsOf reads the id hashes of a committed shard's rows, in order.
type IDsOf func(shard string) ([]uint64, error)

// OpenRebuilding is Open for a writer that can read its shards' ids
// (idsOf): an id log damaged by the disk (cut short, a torn header) is
// rebuilt from the shards the manifest names, with a warning (Recovered),
// instead of refused.
func OpenRebuilding(dir, format, ext, schema string, idsOf IDsOf) (s *Set, removed []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	s = &Set{dir: dir, ext: ext, format: format, schema: schema}
	if err := migrateMeta(dir); err != nil {
		return nil, nil, err
	}
	if err := s.loadManifest(); err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, idLogNext)); err == nil {
		if err := finishDrop(dir, s.m.Rows); err != nil {
			return nil, nil, err
		}
	}
	ids, hashes, err := s.openIDs(idsOf)
	if err != nil {
		return nil, nil, err
	}
	s.ids, s.held = ids, commitlog.NewSet(hashes)
	s.next = nextNumber(s.m.Shards)
	if s.redo, err = readRedo(dir); err != nil {
		return nil, nil, err
	}
	if removed, err = s.removeUncommitted(); err != nil {
		return nil, nil, err
	}
	return s, removed, nil
}

// loadManifest reads the directory's manifest into s.m, writing it again
// when it was read from its copy. A directory without one gets an empty
// manifest, unless it holds shards (then it is not ours).
func (s *Set) loadManifest() error {
	m, err := ReadManifest(s.dir)
	if err != nil {
		return err
	}
	if m == nil {
		return s.startManifest()
	}
	if m.Format != s.format {
		return fmt.Errorf("%s holds %s shards; this writer writes %s (use another path, or --fresh)", s.dir, m.Format, s.format)
	}
	s.m = *m
	if m.Recovered != "" {
		s.recovered = m.Recovered + "; the manifest is written again"
		return writeManifest(s.dir, s.m)
	}
	return nil
}

// startManifest writes the empty manifest of a new directory.
func (s *Set) startManifest() error {
	s.m = Manifest{Format: s.format, Schema: s.schema, Shards: []ShardInfo{}, Updated: time.Now().UTC()}
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries {
		if partName.MatchString(e.Name()) {
			return fmt.Errorf("%s holds shards but no %s: not written by this writer (move them, or use another path)", s.dir, ManifestName)
		}
	}
	// An empty manifest now, so that a shard renamed before the first
	// manifest names it (a crash there) is known for ours and removed.
	return writeManifest(s.dir, s.m)
}

// openIDs opens the id log and brings it to the manifest's row count:
// ids a crash appended after the last manifest are cut off; a log that
// is damaged or short is rebuilt from the shards when idsOf can read
// them, and refused otherwise.
func (s *Set) openIDs(idsOf IDsOf) (*commitlog.IDLog, []uint64, error) {
	idLog := filepath.Join(s.dir, IDLogName)
	ids, hashes, err := commitlog.OpenIDLog(idLog)
	var de *commitlog.DamagedError
	if (errors.As(err, &de) || err == nil && int64(len(hashes)) < s.m.Rows) && idsOf != nil {
		if ids != nil {
			ids.Close()
		}
		why := fmt.Sprintf("it has %d ids for %d committed rows", len(hashes), s.m.Rows)
		if de != nil {
			why = de.Err.Error()
		}
		if ids, hashes, err = s.rebuildIDs(idLog, idsOf); err != nil {
			return nil, nil, fmt.Errorf("%s is damaged (%s) and could not be rebuilt from the shards: %w", idLog, why, err)
		}
		s.recovered = joinPhrases(s.recovered, fmt.Sprintf("%s was damaged (%s): rebuilt from the %d shards' rows", idLog, why, len(s.m.Shards)))
	}
	if err != nil {
		return nil, nil, err
	}
	switch {
	case int64(len(hashes)) > s.m.Rows: // a crash between the ids and the manifest
		hashes = hashes[:s.m.Rows]
		if err := ids.Truncate(len(hashes)); err != nil {
			ids.Close()
			return nil, nil, err
		}
	case int64(len(hashes)) < s.m.Rows:
		ids.Close()
		return nil, nil, &commitlog.DamagedError{Path: idLog, Err: fmt.Errorf("the id log has %d ids for %d committed rows; move %s aside and run with --fresh, or restore the id log from a copy", len(hashes), s.m.Rows, s.dir)}
	}
	return ids, hashes, nil
}

// removeUncommitted deletes what a crash left that the manifest does not
// name: shard files and temporary files in the directory, and temporary
// files of its MetaDir (shards being written, manifests). It returns
// their names, relative to the directory.
func (s *Set) removeUncommitted() (removed []string, err error) {
	named := map[string]bool{}
	for _, sh := range s.m.Shards {
		named[sh.Name] = true
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		n := e.Name()
		if (partName.MatchString(n) && !named[n]) || isTemp(n) {
			if err := os.Remove(filepath.Join(s.dir, n)); err != nil {
				return nil, err
			}
			removed = append(removed, n)
		}
	}
	entries, err = os.ReadDir(filepath.Join(s.dir, MetaDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if n := e.Name(); isTemp(n) {
			if err := os.Remove(filepath.Join(s.dir, MetaDir, n)); err != nil {
				return nil, err
			}
			removed = append(removed, filepath.Join(MetaDir, n))
		}
	}
	return removed, nil
}

// rebuildIDs writes the id log again from the ids of the shards the
// manifest names, in its order, and opens it.
func (s *Set) rebuildIDs(idLog string, idsOf IDsOf) (*commitlog.IDLog, []uint64, error) {
	var all []uint64
	for _, sh := range s.m.Shards {
		hs, err := idsOf(filepath.Join(s.dir, sh.Name))
		if err != nil {
			return nil, nil, err
		}
		if int64(len(hs)) != sh.Rows {
			return nil, nil, fmt.Errorf("%s has %d rows, its manifest says %d", sh.Name, len(hs), sh.Rows)
		}
		all = append(all, hs...)
	}
	if err := commitlog.WriteIDLog(idLog, all); err != nil {
		return nil, nil, err
	}
	return commitlog.OpenIDLog(idLog)
}

func joinPhrases(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// Has reports whether the directory held a row for id when it was opened.
func (s *Set) Has(id string) bool { return s.held.Has(commitlog.Hash(id)) }

// HasHash is Has for an id's hash.
func (s *Set) HasHash(h uint64) bool { return s.held.Has(h) }

// Manifest returns a copy of the manifest as committed.
func (s *Set) Manifest() Manifest {
	m := s.m
	m.Shards = append([]ShardInfo(nil), s.m.Shards...)
	return m
}

// Dir is the shard directory.
func (s *Set) Dir() string { return s.dir }

// Close closes the id log.
func (s *Set) Close() error { return s.ids.Close() }

// Pending is a shard being written: a hidden temporary file that becomes
// part-NNNNN.EXT at Commit. Writes go through it (it counts and hashes).
type Pending struct {
	s    *Set
	f    *os.File
	name string
	h    hash.Hash
	n    int64
}

// Create starts the next shard.
func (s *Set) Create() (*Pending, error) {
	name := fmt.Sprintf("part-%05d%s", s.next, s.ext)
	f, err := os.CreateTemp(filepath.Join(s.dir, MetaDir), "."+name+".*.tmp") // renamed into dir at Commit
	if err != nil {
		return nil, err
	}
	return &Pending{s: s, f: f, name: name, h: sha256.New()}, nil
}

// Name is the name the shard gets when committed.
func (p *Pending) Name() string { return p.name }

// Write writes to the shard file.
func (p *Pending) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.h.Write(b[:n])
	p.n += int64(n)
	return n, err
}

// Size is the bytes written so far.
func (p *Pending) Size() int64 { return p.n }

// Abort removes the unfinished shard.
func (p *Pending) Abort() {
	p.f.Close()
	os.Remove(p.f.Name())
}

// Commit makes the shard part of the directory: rows and tokens are its
// counts, ids the hashes of its rows' ids. On an error the shard is not
// committed (and its temporary file removed); what was committed before
// stays as it was.
func (p *Pending) Commit(rows, tokens int64, ids []uint64) (ShardInfo, error) {
	s := p.s
	fail := func(err error) (ShardInfo, error) {
		p.Abort()
		return ShardInfo{}, fmt.Errorf("committing %s: %w", filepath.Join(s.dir, p.name), err)
	}
	if err := p.f.Chmod(commitlog.FileMode); err != nil { // CreateTemp makes it 0600
		return fail(err)
	}
	if err := p.f.Sync(); err != nil {
		return fail(err)
	}
	if err := p.f.Close(); err != nil {
		return fail(err)
	}
	final := filepath.Join(s.dir, p.name)
	if err := os.Rename(p.f.Name(), final); err != nil {
		return fail(err)
	}
	if err := commitlog.SyncDir(s.dir); err != nil {
		return ShardInfo{}, err
	}
	for _, h := range ids {
		s.ids.Add(h)
	}
	if err := s.ids.Commit(); err != nil {
		return ShardInfo{}, err
	}
	info := ShardInfo{Name: p.name, Rows: rows, Tokens: tokens, Bytes: p.n, SHA256: hex.EncodeToString(p.h.Sum(nil)), Committed: time.Now().UTC()}
	m := s.Manifest()
	m.Shards = append(m.Shards, info)
	m.Rows += rows
	m.Tokens += tokens
	m.Bytes += p.n
	m.Updated = info.Committed
	if err := writeManifest(s.dir, m); err != nil {
		return ShardInfo{}, err
	}
	s.m = m
	s.next++
	if err := s.redone(ids); err != nil {
		return info, err
	}
	return info, nil
}

func writeManifest(dir string, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, MetaDir), 0o755); err != nil {
		return err
	}
	// The copy first: when the manifest is damaged, its copy names what
	// the manifest named, or one shard more that is already in place.
	for _, name := range []string{ManifestCopyName, ManifestName} {
		if err := commitlog.WriteFileAtomic(filepath.Join(dir, name), append(data, '\n')); err != nil {
			return err
		}
	}
	return nil
}

var _ io.Writer = (*Pending)(nil)
