package filecommit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// A shard truncated and one rewritten in place are found (size, then
// SHA-256); a missing one is told apart. Drop takes the damaged one out:
// its file moved aside, the manifest and id log without it, its ids
// returned and kept on the redo list until they are committed again; the
// next shard does not take its number.
func TestCheckAndDropDamagedShards(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir, "parquet", ".parquet", "v1")
	if err != nil {
		t.Fatal(err)
	}
	commitShard(t, s, "aaaa", "a1", "a2")
	commitShard(t, s, "bbbbbb", "b1", "b2", "b3")
	commitShard(t, s, "cccc", "c1")
	commitShard(t, s, "dd", "d1")
	s.Close()
	if err := os.Truncate(filepath.Join(dir, "part-00001.parquet"), 3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "part-00002.parquet"), []byte("CCCC"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "part-00003.parquet")); err != nil {
		t.Fatal(err)
	}
	m, _ := ReadManifest(dir)
	res, err := Check(dir, m, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 2 || res.Problems[0].Shard.Name != "part-00001.parquet" || !res.Problems[1].Missing || res.Hashed != 0 {
		t.Fatalf("size check: %+v", res)
	}
	res, err = Check(dir, m, true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range res.Problems {
		names = append(names, p.Error())
	}
	if len(names) != 3 || !strings.Contains(names[1], "part-00002.parquet has SHA-256") || res.Hashed != 4+4 {
		t.Fatalf("sha256 check: %q, hashed %d", names, res.Hashed)
	}

	s, _, err = Open(dir, "parquet", ".parquet", "v1")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.Drop([]string{"part-00001.parquet", "part-00002.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{commitlog.Hash("b1"), commitlog.Hash("b2"), commitlog.Hash("b3"), commitlog.Hash("c1")}
	if !slices.Equal(ids, want) || s.ToRedo() != 4 {
		t.Fatalf("dropped ids %v, want %v; redo %d", ids, want, s.ToRedo())
	}
	if s.Has("b1") || !s.Has("a2") || !s.Has("d1") {
		t.Fatal("held ids after Drop")
	}
	if _, err := os.Stat(filepath.Join(dir, MetaDir, "part-00001.parquet"+DamagedSuffix)); err != nil {
		t.Fatal(err)
	}
	// b1 and c1 come again in a new shard: off the redo list; numbering
	// goes on after the highest.
	info := commitShard(t, s, "new", "b1", "c1")
	if info.Name != "part-00004.parquet" {
		t.Fatalf("next shard %s", info.Name)
	}
	s.Close()
	redo, _ := ReadRedo(dir)
	if !slices.Equal(redo, sortedHashes("b2", "b3")) {
		t.Fatalf("redo %v", redo)
	}
	s, _, err = Open(dir, "parquet", ".parquet", "v1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m = ptr(s.Manifest())
	if m.Rows != 5 || len(m.Shards) != 3 || !s.Has("b1") || s.Has("b2") || s.ToRedo() != 2 {
		t.Fatalf("reopened: %d rows, %d shards, redo %d", m.Rows, len(m.Shards), s.ToRedo())
	}
}

// A Drop cut short after .ids.next and before the manifest: undone. After
// the manifest: finished.
func TestDropCutShort(t *testing.T) {
	for _, manifestWritten := range []bool{false, true} {
		dir := t.TempDir()
		s, _, _ := Open(dir, "parquet", ".parquet", "v1")
		commitShard(t, s, "aaaa", "a1", "a2")
		commitShard(t, s, "bbbb", "b1")
		s.Close()
		kept := []uint64{commitlog.Hash("a1"), commitlog.Hash("a2"), commitlog.Hash("b1")}
		if manifestWritten {
			kept = []uint64{commitlog.Hash("b1")}
			m, _ := ReadManifest(dir)
			m.Shards, m.Rows = m.Shards[1:], 1
			if err := writeManifest(dir, *m); err != nil {
				t.Fatal(err)
			}
		} else {
			kept = kept[1:] // what a drop of a1's shard would keep … not yet named
		}
		if err := commitlog.WriteIDLog(filepath.Join(dir, idLogNext), kept); err != nil {
			t.Fatal(err)
		}
		s, _, err := Open(dir, "parquet", ".parquet", "v1")
		if err != nil {
			t.Fatalf("manifest written %v: %v", manifestWritten, err)
		}
		if s.Has("a1") == manifestWritten || !s.Has("b1") {
			t.Errorf("manifest written %v: a1 held %v", manifestWritten, s.Has("a1"))
		}
		if _, err := os.Stat(filepath.Join(dir, idLogNext)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf(".ids.next left: %v", err)
		}
		s.Close()
	}
}

func sortedHashes(ids ...string) []uint64 {
	var h []uint64
	for _, id := range ids {
		h = append(h, commitlog.Hash(id))
	}
	slices.Sort(h)
	return h
}

func ptr[T any](v T) *T { return &v }

// A manifest that is not JSON is a DamagedError (a permanent refusal).
func TestDamagedManifest(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, MetaDir), 0o755)
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"format":"par`), 0o644)
	_, err := ReadManifest(dir)
	var d *commitlog.DamagedError
	if !errors.As(err, &d) || !strings.Contains(err.Error(), "--fresh") {
		t.Fatalf("%v", err)
	}
}

// A manifest damaged by the disk (a torn page) is read from its copy,
// written with it; Open writes it again and says so.
func TestDamagedManifestReadFromItsCopy(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir, "parquet", ".parquet", "v1")
	if err != nil {
		t.Fatal(err)
	}
	commitShard(t, s, "first shard", "a", "b")
	commitShard(t, s, "second shard", "c")
	s.Close()
	good, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	os.WriteFile(filepath.Join(dir, ManifestName), make([]byte, len(good)), 0o644)

	s, _, err = Open(dir, "parquet", ".parquet", "v1")
	if err != nil {
		t.Fatalf("a damaged manifest with its copy: %v", err)
	}
	defer s.Close()
	if m := s.Manifest(); len(m.Shards) != 2 || m.Rows != 3 {
		t.Fatalf("read back %d shards, %d rows; want 2, 3", len(m.Shards), m.Rows)
	}
	if !strings.Contains(s.Recovered(), "was damaged") {
		t.Errorf("Recovered() = %q", s.Recovered())
	}
	if now, _ := os.ReadFile(filepath.Join(dir, ManifestName)); string(now) != string(good) {
		t.Errorf("the manifest was not written again:\n%s", now)
	}
}
