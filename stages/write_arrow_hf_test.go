package stages

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/pipe-dev/pipe/internal/testrig/trainers"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// writeArrowDir writes recs into a Parquet write-arrow directory, in
// shards of at most maxRows rows.
func writeArrowDir(t *testing.T, dir string, recs []*record.Record, maxRows int64) {
	t.Helper()
	cfg := arrowCfg(dir, arrowrow.FormatParquet)
	cfg.MaxRows = maxRows
	w := openArrow(t, cfg, nil, nil)
	arrowProcessAll(t, w, &arrowEmitter{}, recs)
	if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// hfFiles is what HF datasets takes from base (trainers.DataFiles: the
// rules of datasets' src/datasets/data_files.py), checked to be only
// Parquet files, each opening as Parquet — the Parquet builder
// (packaged_modules/parquet) reads every file it is given.
func hfFiles(t *testing.T, base string) map[string][]string {
	t.Helper()
	splits, err := trainers.DataFiles(base)
	if err != nil {
		t.Fatal(err)
	}
	for split, files := range splits {
		for _, f := range files {
			if !strings.HasSuffix(f, ".parquet") {
				t.Fatalf("split %s: load_dataset hands %s to the Parquet reader", split, f)
			}
			pf, err := file.OpenParquetFile(filepath.Join(base, f), false)
			if err != nil {
				t.Fatalf("split %s: %s: %v", split, f, err)
			}
			pf.Close()
		}
	}
	return splits
}

// A write-arrow directory loads with load_dataset("parquet", data_dir=D)
// and load_dataset(D): by datasets' file selection it holds nothing but
// its Parquet shards (the manifest and id log are hidden), all in the train
// split.
func TestWriteArrowDirectoryIsAnHFDataset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "completions") // no split keyword in any name
	writeArrowDir(t, dir, arrowTestRecords(), 3)
	m, _ := readArrowDir(t, dir)
	want := map[string][]string{"train": nil}
	for _, sh := range m.Shards {
		want["train"] = append(want["train"], sh.Name)
	}
	if len(m.Shards) < 2 {
		t.Fatalf("%d shards", len(m.Shards))
	}
	if got := hfFiles(t, dir); !reflect.DeepEqual(got, want) {
		t.Fatalf("load_dataset takes %v, want %v (directory holds %v)", got, want, dirNames(t, dir))
	}
	// The checker sees the failure the old layout had: a manifest.json
	// beside the shards goes to the Parquet reader.
	if err := os.Rename(filepath.Join(dir, filecommit.ManifestName), filepath.Join(dir, filecommit.LegacyManifestName)); err != nil {
		t.Fatal(err)
	}
	splits, err := trainers.DataFiles(dir)
	if err != nil || !slices.Contains(splits["train"], filecommit.LegacyManifestName) {
		t.Fatalf("with manifest.json at the top, load_dataset takes %v (%v)", splits, err)
	}
}

// Each shard carries the "huggingface" features metadata, and every column
// but id (not nullable, so datasets guesses it: a string all the same) gets
// its type from it: the feature's Arrow type equals the file's field, as
// datasets' Features.from_arrow_schema requires. messages is a list of
// {role, content, reasoning_content, tool_calls, tool_call_id, name}
// structs (tool_calls as JSON text, as tools).
func TestWriteArrowHFFeatures(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "train")
	writeArrowDir(t, dir, arrowTestRecords(), 100)
	pf, err := file.OpenParquetFile(filepath.Join(dir, "part-00000.parquet"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	meta := pf.MetaData().KeyValueMetadata().FindValue(arrowrow.HFMetadataKey)
	if meta == nil {
		t.Fatalf("no %q key in the Parquet metadata", arrowrow.HFMetadataKey)
	}
	types, order, err := trainers.HFFeatureTypes(*meta)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := fr.Schema()
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != schema.NumFields() {
		t.Fatalf("%d features for %d columns", len(order), schema.NumFields())
	}
	for i, f := range schema.Fields() {
		if order[i] != f.Name {
			t.Fatalf("feature %d is %s, column %s", i, order[i], f.Name)
		}
		ft := types[f.Name]
		if !arrow.TypeEqual(ft, f.Type) {
			t.Errorf("%s: the feature stands for %s, the file holds %s", f.Name, ft, f.Type)
		}
		if !f.Nullable && f.Name != arrowrow.ColID {
			t.Errorf("%s is not nullable: datasets would not use its feature", f.Name)
		}
	}
	if got := types[arrowrow.ColMessages].String(); got != "list<item: struct<role: utf8 nullable, content: utf8 nullable, reasoning_content: utf8 nullable, tool_calls: utf8 nullable, tool_call_id: utf8 nullable, name: utf8 nullable>, nullable>" {
		t.Fatalf("messages feature is %s", got)
	}
}
