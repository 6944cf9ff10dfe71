package runreport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// benchRows are training rows shaped like the regenerate job's: ~1,500
// thinking and ~400 answer tokens of text, a 2,000-token row with its mask.
func benchRows(n int) []*record.Record {
	think := strings.Repeat("Let us consider the next step of the argument. ", 130) // ~6 KB
	answer := strings.Repeat("The answer follows from it. ", 55)                    // ~1.5 KB
	out := make([]*record.Record, n)
	for i := range out {
		ids := make([]int32, 2000+i%500)
		mask := make(record.LossMask, len(ids))
		for j := range ids {
			ids[j] = int32(j*7919) % 151000
			if j > 40 {
				mask[j] = 1
			}
		}
		out[i] = &record.Record{
			ID:         fmt.Sprintf("p%07d", i),
			Messages:   []record.Message{{Role: "user", Content: fmt.Sprintf("Question %d: explain topic %d.", i, i*7)}},
			Completion: &record.Completion{Reasoning: think, Answer: answer, FinishReason: "stop", PromptTokens: 40, CompletionTokens: 1900 + i%500, Server: "http://gpu1:30000", Attempts: 1},
			Tokens:     &record.Tokens{InputIDs: ids, LossMask: mask, NumTokens: len(ids), NumLossTokens: len(ids) - 41, Source: "ids"},
		}
	}
	return out
}

// benchRunDir writes rows as one output (write-jsonl or write-arrow) of a
// run directory and returns the directory and the output's path.
func benchRunDir(b *testing.B, kind string, rows []*record.Record) (string, string) {
	dir := b.TempDir()
	out := filepath.Join(dir, "out.jsonl")
	if kind == "write-arrow" {
		out = filepath.Join(dir, "train")
		writeArrowOutput(b, out, rows)
	} else {
		l, err := commitlog.Open(out, recordline.ID)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			line, _ := json.Marshal(r)
			l.Append(r.ID, line)
		}
		if err := l.Commit(); err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	run, _ := json.Marshal(map[string]any{"pipeline": "/x.toml", "created": time.Now(),
		"settings": map[string]any{"out": map[string]any{"kind": kind, "path": out}},
		"outputs":  []any{map[string]any{"stage": "out", "kind": kind, "path": out}}, "history": []any{map[string]any{}}})
	os.WriteFile(filepath.Join(dir, "run.json"), run, 0o644)
	return dir, out
}

// writeArrowOutput writes rows as write-arrow does: Parquet shards of 1024
// rows in out, committed to its manifest.
func writeArrowOutput(tb testing.TB, out string, rows []*record.Record) {
	tb.Helper()
	os.MkdirAll(out, 0o755)
	sh, _, err := filecommit.Open(out, arrowrow.FormatParquet, ".parquet", arrowrow.Version)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := sh.Create()
	if err != nil {
		tb.Fatal(err)
	}
	fw, err := arrowrow.NewFileWriter(p, arrowrow.FormatParquet, "zstd", 1024, memory.DefaultAllocator)
	if err != nil {
		tb.Fatal(err)
	}
	var hashes []uint64
	for i := 0; i < len(rows); i += 1024 {
		bl := arrowrow.NewBuilder(memory.DefaultAllocator)
		for _, r := range rows[i:min(i+1024, len(rows))] {
			if err := bl.Append(r); err != nil {
				tb.Fatal(err)
			}
			hashes = append(hashes, commitlog.Hash(r.ID))
		}
		batch := bl.NewBatch()
		if err := fw.Write(batch); err != nil {
			tb.Fatal(err)
		}
		batch.Release()
		bl.Release()
	}
	if err := fw.Close(); err != nil {
		tb.Fatal(err)
	}
	if _, err := p.Commit(int64(len(rows)), 0, hashes); err != nil {
		tb.Fatal(err)
	}
	sh.Close()
}

// BenchmarkReport measures Build over one output of realistic rows, against
// the reference of decoding the same output into whole records (what
// read-completions and pipe inspect do): the report reads only the fields it
// needs.
//
//	go test ./cmd/pipe/runreport -run '^$' -bench Report -benchtime 3x
func BenchmarkReport(b *testing.B) {
	const n = 5000
	rows := benchRows(n)
	for _, kind := range []string{"write-jsonl", "write-arrow"} {
		dir, out := benchRunDir(b, kind, rows)
		b.Run(kind+"/report", func(b *testing.B) {
			for b.Loop() {
				r, err := Build(context.Background(), dir, Options{})
				if err != nil || r.Outputs[0].Rows != n {
					b.Fatalf("%v %+v", err, r.Notes)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(kind+"/reference-decode-records", func(b *testing.B) {
			for b.Loop() {
				got := 0
				if kind == "write-arrow" {
					m, _ := filecommit.ReadManifest(out)
					for _, sh := range m.Shards {
						arrowrow.ReadFile(context.Background(), filepath.Join(out, sh.Name), memory.DefaultAllocator, func(batch arrow.RecordBatch) error {
							recs, err := arrowrow.Records(batch)
							got += len(recs)
							return err
						})
					}
				} else {
					f, _ := os.Open(out)
					sc := bufio.NewScanner(f)
					sc.Buffer(nil, 64<<20)
					for sc.Scan() {
						var rec record.Record
						if json.Unmarshal(sc.Bytes(), &rec) == nil {
							got++
						}
					}
					f.Close()
				}
				if got != n {
					b.Fatalf("decoded %d rows", got)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
