//go:build e2e

package stages

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Shards written by write-arrow and uploaded by upload-s3 read back from
// s3:// with read-completions, record for record; a shard changed in the
// bucket is refused by its sha256.
func TestReadCompletionsFromS3(t *testing.T) {
	srv := testenv.StartS3(t)
	srv.SetEnv(t)
	ctx := context.Background()
	dir := t.TempDir()
	w := &writeArrow{cfg: writeArrowConfig{Path: filepath.Join(dir, "train"), Format: "parquet", MaxRows: 40, MaxBytes: 1 << 30, RowGroupRows: 16}}
	if err := w.Open(ctx, &pipeline.Env{}); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []*record.Record
	for i := range 100 {
		rec := &record.Record{ID: fmt.Sprintf("r%03d", i),
			Messages:   []record.Message{{Role: "user", Content: fmt.Sprintf("質問 %d 🚀", i)}},
			Completion: &record.Completion{Reasoning: "思考", Answer: fmt.Sprintf("answer %d", i), FinishReason: "stop", OutputIDs: []int{1, 2, i}}}
		want = append(want, rec)
		if err := w.Process(ctx, rec, &s3Emitter{}); err != nil {
			t.Fatal(err)
		}
	}
	shards := &collectEmitter{}
	if err := w.Commit(ctx, shards); err != nil {
		t.Fatal(err)
	}
	if n := len(shards.sent["shards"]); n != 3 {
		t.Fatalf("write-arrow sent %d shard records, want 3 (100 rows, 40 a shard)", n)
	}
	up := mustOpenS3Stage(t, s3Config(srv, "datasets"), filepath.Join(dir, "run"))
	up.process(t, shards.sent["shards"]...)
	up.finish(t)

	read := func() ([]*record.Record, error) {
		r := &readCompletions{cfg: readCompletionsConfig{Path: "s3://" + srv.Bucket + "/datasets/train", Endpoint: srv.Endpoint,
			Region: srv.Region, ForcePathStyle: true, OnBadLine: "fail", RequireCompletion: true}}
		got := &collectEmitter{}
		err := r.Read(ctx, got)
		return got.sent[""], err // "" is the default port
	}
	got, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records from s3, want %d", len(got), len(want))
	}
	for i, g := range got {
		if g.ID != want[i].ID || g.Messages[0].Content != want[i].Messages[0].Content || g.Completion.Answer != want[i].Completion.Answer ||
			fmt.Sprint(g.Completion.OutputIDs) != fmt.Sprint(want[i].Completion.OutputIDs) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, want[i])
		}
	}
	// A prefix uploaded before the manifest moved into .pipe/ (manifest.json
	// beside the shards) still reads.
	if err := os.Rename(srv.ObjectPath(srv.Bucket, "datasets/train/.pipe/manifest.json"), srv.ObjectPath(srv.Bucket, "datasets/train/manifest.json")); err != nil {
		t.Fatal(err)
	}
	if got, err := read(); err != nil || len(got) != len(want) {
		t.Fatalf("with the legacy manifest: %d records, %v", len(got), err)
	}
	// Change a shard in the bucket: its sha256 no longer matches the manifest.
	obj := srv.ObjectPath(srv.Bucket, "datasets/train/part-00001.parquet")
	data, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(obj, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); err == nil || !(strings.Contains(err.Error(), "sha256") || strings.Contains(err.Error(), "checksum did not match")) {
		t.Fatalf("a changed shard was read: %v", err)
	}
}
