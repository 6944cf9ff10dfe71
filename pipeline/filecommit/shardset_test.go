package filecommit

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// commitShard writes data as the next shard with the rows ids.
func commitShard(t *testing.T, s *Set, data string, ids ...string) ShardInfo {
	t.Helper()
	p, err := s.Create()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if p.Size() != int64(len(data)) {
		t.Fatalf("size %d after writing %d bytes", p.Size(), len(data))
	}
	hashes := make([]uint64, len(ids))
	for i, id := range ids {
		hashes[i] = commitlog.Hash(id)
	}
	info, err := p.Commit(int64(len(ids)), 10*int64(len(ids)), hashes)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// A shard is committed as part-NNNNN.EXT (0644) with its bytes, sha256,
// rows and tokens in the manifest, which sums them; its ids are held when
// the directory is opened again. A new directory has an empty manifest at
// once, naming its format.
func TestWriteArrowShardsCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, removed, err := Open(dir, "parquet", ".parquet", "v1")
	if err != nil || len(removed) > 0 {
		t.Fatal(removed, err)
	}
	m, err := ReadManifest(dir)
	if err != nil || m == nil || m.Format != "parquet" || m.Schema != "v1" || m.Rows != 0 || m.Shards == nil {
		t.Fatalf("manifest of a new directory: %+v, %v", m, err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, ManifestName)); !strings.Contains(string(data), `"shards": []`) {
		t.Fatalf("manifest of a new directory: %s", data)
	}
	a := commitShard(t, s, "first shard", "a", "b")
	p, _ := s.Create()
	if p.Name() != "part-00001.parquet" {
		t.Fatalf("next shard is %s", p.Name())
	}
	p.Write([]byte("aborted"))
	p.Abort()
	b := commitShard(t, s, "second, longer shard", "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{MetaDir, "part-00000.parquet", "part-00001.parquet"}) {
		t.Fatalf("directory holds %v", got)
	}
	m, _ = ReadManifest(dir)
	if m.Rows != 3 || m.Tokens != 30 || m.Bytes != int64(len("first shard")+len("second, longer shard")) || len(m.Shards) != 2 {
		t.Fatalf("manifest %+v", m)
	}
	for i, info := range []ShardInfo{a, b} {
		sh := m.Shards[i]
		data, _ := os.ReadFile(filepath.Join(dir, sh.Name))
		sum := sha256.Sum256(data)
		if sh.Name != info.Name || sh.SHA256 != hex.EncodeToString(sum[:]) || sh.Bytes != int64(len(data)) || sh.Rows != info.Rows {
			t.Fatalf("shard %d: %+v; file of %d bytes, sha256 %x", i, sh, len(data), sum)
		}
		if st, _ := os.Stat(filepath.Join(dir, sh.Name)); st.Mode().Perm() != 0o644 {
			t.Fatalf("%s: mode %v", sh.Name, st.Mode().Perm())
		}
	}
	s, removed, err = Open(dir, "parquet", ".parquet", "v1")
	if err != nil || len(removed) > 0 {
		t.Fatal(removed, err)
	}
	defer s.Close()
	for _, id := range []string{"a", "b", "c"} {
		if !s.Has(id) {
			t.Fatalf("%s not held after reopening", id)
		}
	}
	if s.Has("d") {
		t.Fatal("d held")
	}
}

// Open removes what a crash left uncommitted — temporary shards and
// manifests, a shard renamed but not in the manifest — and cuts the id log
// back to the manifest's rows; it refuses a damaged id log, a directory of
// shards it did not write, and another format.
func TestWriteArrowShardsOpenAfterCrash(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir, "arrow", ".arrow", "v1")
	if err != nil {
		t.Fatal(err)
	}
	commitShard(t, s, "zero", "a", "b")
	manifest, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	commitShard(t, s, "one", "c", "d", "e")
	p, _ := s.Create()
	p.Write([]byte("half a shard"))
	s.Close()
	// The crash: part-00001 renamed and its ids logged, the manifest not
	// replaced; a temporary manifest and a temporary shard left behind.
	os.WriteFile(filepath.Join(dir, ManifestName), manifest, 0o644)
	os.WriteFile(filepath.Join(dir, MetaDir, ".manifest.json.123.tmp"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not ours to remove"), 0o644)

	s, removed, err := Open(dir, "arrow", ".arrow", "v1")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if len(removed) != 3 || removed[2] != "part-00001.arrow" || !strings.HasPrefix(removed[0], MetaDir+"/.manifest.json.") || !strings.HasPrefix(removed[1], MetaDir+"/.part-00002.arrow.") {
		t.Fatalf("removed %v", removed)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{MetaDir, "notes.txt", "part-00000.arrow"}) {
		t.Fatalf("directory holds %v", got)
	}
	if !s.Has("a") || !s.Has("b") || s.Has("c") || s.Has("e") {
		t.Fatal("held ids are not those of the manifest's shards")
	}
	if st, _ := os.Stat(filepath.Join(dir, IDLogName)); st.Size() != idLogSize(t, 2) {
		t.Fatalf("id log of %d bytes, want the header and 2 ids", st.Size())
	}
	// The next shard takes the name of the removed one; the id log goes on
	// from the manifest's rows.
	if info := commitShard(t, s, "one again", "c", "d", "e"); info.Name != "part-00001.arrow" {
		t.Fatalf("next shard %s", info.Name)
	}
	s.Close()
	s, removed, err = Open(dir, "arrow", ".arrow", "v1")
	if err != nil || len(removed) > 0 {
		t.Fatal(removed, err)
	}
	if !s.Has("e") {
		t.Fatal("e not held")
	}
	s.Close()

	if _, _, err := Open(dir, "parquet", ".parquet", "v1"); err == nil || !strings.Contains(err.Error(), "holds arrow shards; this writer writes parquet") {
		t.Fatalf("another format: %v", err)
	}
	// An id log shorter than the manifest says: damaged, refused.
	if l, _, err := commitlog.OpenIDLog(filepath.Join(dir, IDLogName)); err == nil {
		l.Truncate(3)
		l.Close()
	}
	if _, _, err := Open(dir, "arrow", ".arrow", "v1"); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("short id log: %v", err)
	}

	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "part-00000.parquet"), []byte("PAR1"), 0o644)
	if _, _, err := Open(foreign, "parquet", ".parquet", "v1"); err == nil || !strings.Contains(err.Error(), "holds shards but no "+ManifestName) {
		t.Fatalf("shards without a manifest: %v", err)
	}
	if got := dirNames(t, foreign); !slices.Equal(got, []string{"part-00000.parquet"}) {
		t.Fatalf("a refused directory was changed: %v", got)
	}
}

// A directory written before MetaDir (manifest.json and .ids at the top)
// is read as it is, and opening it for writing moves both into MetaDir, so
// that the directory then holds nothing but shards and MetaDir. A crash
// between the two moves leaves a directory that reads and opens as well.
func TestShardsLegacyLayout(t *testing.T) {
	legacy := func(t *testing.T) string {
		dir := t.TempDir()
		s, _, err := Open(dir, "parquet", ".parquet", "v1")
		if err != nil {
			t.Fatal(err)
		}
		commitShard(t, s, "zero", "a", "b")
		s.Close()
		for _, m := range [][2]string{{ManifestName, LegacyManifestName}, {IDLogName, legacyIDLog}} {
			if err := os.Rename(filepath.Join(dir, m[0]), filepath.Join(dir, m[1])); err != nil {
				t.Fatal(err)
			}
		}
		os.Remove(filepath.Join(dir, MetaDir))
		return dir
	}
	for _, crashed := range []bool{false, true} {
		dir := legacy(t)
		if crashed { // the id log moved, the manifest not yet
			os.Mkdir(filepath.Join(dir, MetaDir), 0o755)
			os.Rename(filepath.Join(dir, legacyIDLog), filepath.Join(dir, IDLogName))
		}
		if p, ok := ManifestPath(dir); !ok || filepath.Base(p) != LegacyManifestName {
			t.Fatalf("ManifestPath = %s, %v", p, ok)
		}
		m, err := ReadManifest(dir)
		if err != nil || m == nil || m.Rows != 2 || len(m.Shards) != 1 {
			t.Fatalf("legacy manifest read as %+v, %v", m, err)
		}
		if ids, err := commitlog.ReadIDLog(IDLogPath(dir)); err != nil || len(ids) != 2 {
			t.Fatalf("legacy id log: %d ids, %v", len(ids), err)
		}
		s, removed, err := Open(dir, "parquet", ".parquet", "v1")
		if err != nil || len(removed) > 0 {
			t.Fatal(removed, err)
		}
		if !s.Has("a") || !s.Has("b") {
			t.Fatal("the rows of the legacy directory are not held")
		}
		commitShard(t, s, "one", "c")
		s.Close()
		if got := dirNames(t, dir); !slices.Equal(got, []string{MetaDir, "part-00000.parquet", "part-00001.parquet"}) {
			t.Fatalf("directory holds %v", got)
		}
		if m, _ := ReadManifest(dir); m == nil || m.Rows != 3 {
			t.Fatalf("manifest after the move: %+v", m)
		}
	}
	for path, want := range map[string]string{"d/.pipe/manifest.json": "d", ".pipe/manifest.json": ".", "d/manifest.json": "d", "x/d/part-00000.parquet": ""} {
		if got, ok := ManifestDir(path); got != want || ok != (want != "") {
			t.Errorf("ManifestDir(%s) = %q, %v; want %q", path, got, ok, want)
		}
	}
}

// idLogSize is the size of an id log holding n ids.
func idLogSize(t *testing.T, n int) int64 {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ids")
	if err := commitlog.WriteIDLog(p, make([]uint64, n)); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
