package trainers

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// The checker gives datasets' own answers: the cases of datasets'
// tests/test_data_files.py test_get_data_files_patterns (all but the
// data/{split}-NNNNN-of-NNNNN one, which the checker refuses), plus the
// hidden-file and special-directory rules of data_files.py's docstrings
// (_is_unrequested_hidden_file_or_is_inside_unrequested_hidden_dir,
// _is_inside_unrequested_special_dir) and FILES_TO_IGNORE.
func TestDataFilesAsDatasets(t *testing.T) {
	for _, c := range []map[string][]string{
		{"train": {"train.txt"}, "validation": {"valid.txt"}, "test": {"test.txt"}},
		{"train": {"data/train.txt"}, "validation": {"data/valid.txt"}, "test": {"data/test.txt"}},
		{"train": {"train/split.txt"}, "validation": {"valid/split.txt"}, "test": {"test/split.txt"}},
		{"train": {"data/train_0.txt", "data/train_1.txt", "data/train_2.txt"}, "validation": {"data/validation_0.txt", "data/validation_1.txt"}, "test": {"data/test_0.txt"}},
		{"train": {"dataset.txt"}},
		{"train": {"data/dataset.txt"}},
		{"train": {"data/image.jpg", "metadata.jsonl"}},
		{"train": {"my_train_dir/dataset.txt"}},
		{"train": {"data/my_train_file.txt"}},
		{"test": {"my_test_dir/dataset.txt"}},
		{"validation": {"data/my_validation_file.txt"}},
		{"train": {"train_dir/dataset.txt"}},
		{"test": {"test_dir/dataset.txt"}},
		{"train": {"my_train/dataset.txt"}},
		{"validation": {"data/my_validation.txt"}},
		{"test": {"eval.txt"}},
		{"test": {"eval/dataset.txt"}},
		{"validation": {"dev.txt"}},
		{"validation": {"dev/dataset.txt"}},
		{"validation": {"val.txt"}},
		{"train": {"train.parquet"}, "validation": {"valid.parquet"}, "test": {"test.parquet"}},
		{"train": {"developers_list.txt"}},
		{"train": {"data/seqeval_results.txt"}},
		{"train": {"contest.txt"}},
		{"test": {"my.test.file.txt"}},
		{"test": {"my-test-file.txt"}},
		{"test": {"my test file.txt"}},
		{"test": {"test00001.txt"}},
		{"test": {"test/train.txt"}},
	} {
		dir := t.TempDir()
		for _, files := range c {
			for _, f := range files {
				touch(t, filepath.Join(dir, f))
			}
		}
		got, err := DataFiles(dir)
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		for _, files := range c {
			slices.Sort(files)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("files %v: got %v", c, got)
		}
	}

	dir := t.TempDir()
	for _, f := range []string{"a.parquet", ".hidden.parquet", ".cache/b.parquet", "__pycache__/c.parquet", "README.md", "config.json", "x/.d/e.parquet", "x/f.parquet"} {
		touch(t, filepath.Join(dir, f))
	}
	got, err := DataFiles(dir)
	if want := map[string][]string{"train": {"a.parquet", "x/f.parquet"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	// push_to_hub's layout wins over every other file (SPLIT_PATTERN_SHARDED
	// is tried first), each split its own files.
	for _, f := range []string{"train-00000-of-00002.parquet", "train-00001-of-00002.parquet", "test-00000-of-00001.parquet", "README.md"} {
		touch(t, filepath.Join(dir, "data", f))
	}
	got, err = DataFiles(dir)
	if want := map[string][]string{"train": {"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"}, "test": {"data/test-00000-of-00001.parquet"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("sharded: got %v, %v; want %v", got, err, want)
	}
	touch(t, filepath.Join(dir, "data", "bad split-00000-of-00001.parquet"))
	if _, err := DataFiles(dir); err == nil {
		t.Fatal("a split name with a space: want the ValueError datasets raises")
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
