//go:build e2e

package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/internal/numfmt"
	"github.com/pipe-dev/pipe/internal/testrig/readers"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// The shards read with readers that are not ours — DuckDB for Parquet,
// apache-arrow for Arrow IPC — give the values written, with the documented
// column types.
func TestWriteArrowForeignReaders(t *testing.T) {
	in := arrowTestRecords()
	byID := map[string]*record.Record{}
	for _, r := range in {
		byID[r.ID] = r
	}
	for _, tc := range []struct {
		format string
		read   func(testing.TB, string) ([]readers.Field, []map[string]any)
		types  map[string]string
	}{
		{arrowrow.FormatParquet, readers.Parquet, map[string]string{
			"id": "VARCHAR", "input_ids": "INTEGER[]", "loss_mask": "UTINYINT[]", "output_ids": "INTEGER[]", "answer": "VARCHAR",
			"num_tokens": "INTEGER", "model": "VARCHAR", "temperature": "DOUBLE", "top_k": "INTEGER", "enable_thinking": "BOOLEAN", "meta": "VARCHAR"}},
		{arrowrow.FormatArrow, readers.ArrowIPC, map[string]string{
			"id": "Utf8", "input_ids": "List<Int32>", "loss_mask": "List<Uint8>", "output_ids": "List<Int32>", "answer": "Utf8",
			"num_tokens": "Int32", "model": "Utf8", "temperature": "Float64", "top_k": "Int32", "enable_thinking": "Bool", "meta": "Utf8"}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			readers.Dirs(t) // skip early (fail under PIPE_CI=1) without the readers
			dir := filepath.Join(t.TempDir(), "out")
			cfg := arrowCfg(dir, tc.format)
			cfg.RowGroupRows, cfg.MaxRows = 16, 30 // two shards, several row groups
			w := openArrow(t, cfg, nil, nil)
			arrowProcessAll(t, w, &arrowEmitter{}, arrowTestRecords())
			if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			m, _ := readArrowDir(t, dir)
			if len(m.Shards) != 2 {
				t.Fatalf("%d shards, want 2", len(m.Shards))
			}
			var rows []map[string]any
			for _, sh := range m.Shards {
				schema, r := tc.read(t, filepath.Join(dir, sh.Name))
				types := map[string]string{}
				var names []string
				for _, f := range schema {
					types[f.Name] = f.Type
					names = append(names, f.Name)
				}
				if want := arrowrow.Schema.Fields(); len(names) != len(want) {
					t.Fatalf("%s: %d columns %v, want %d", sh.Name, len(names), names, len(want))
				}
				for col, typ := range tc.types {
					if types[col] != typ {
						t.Errorf("%s: column %s is %s, want %s", sh.Name, col, types[col], typ)
					}
				}
				rows = append(rows, r...)
			}
			if len(rows) != len(in) {
				t.Fatalf("read %d rows, wrote %d", len(rows), len(in))
			}
			for i, row := range rows {
				rec := byID[readers.String(t, row["id"])]
				if rec == nil || rec.ID != in[i].ID {
					t.Fatalf("row %d has id %v, want %s", i, row["id"], in[i].ID)
				}
				checkForeignRow(t, rec, row)
			}
		})
	}
}

func checkForeignRow(t *testing.T, rec *record.Record, row map[string]any) {
	t.Helper()
	if rec.Tokens == nil {
		for _, col := range []string{"input_ids", "loss_mask", "num_tokens"} {
			if row[col] != nil {
				t.Fatalf("%s: %s is %v, want null", rec.ID, col, row[col])
			}
		}
	} else {
		got := readers.Int64s(t, row["input_ids"])
		want := make([]int64, len(rec.Tokens.InputIDs))
		for i, x := range rec.Tokens.InputIDs {
			want[i] = int64(x)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: input_ids differ (%d read, %d written)", rec.ID, len(got), len(want))
		}
		mask := readers.Int64s(t, row["loss_mask"])
		if len(mask) != len(rec.Tokens.LossMask) {
			t.Fatalf("%s: loss_mask has %d values, want %d", rec.ID, len(mask), len(rec.Tokens.LossMask))
		}
		for i, v := range mask {
			if v != int64(rec.Tokens.LossMask[i]) {
				t.Fatalf("%s: loss_mask[%d] = %d, want %d", rec.ID, i, v, rec.Tokens.LossMask[i])
			}
		}
		if n := readers.Int64(t, row["num_tokens"]); n != int64(rec.Tokens.NumTokens) {
			t.Fatalf("%s: num_tokens %d, want %d", rec.ID, n, rec.Tokens.NumTokens)
		}
	}
	c := rec.Completion
	if c == nil {
		for _, col := range []string{"answer", "reasoning", "model", "temperature", "output_ids"} {
			if row[col] != nil {
				t.Fatalf("%s: %s is %v, want null", rec.ID, col, row[col])
			}
		}
		return
	}
	if a := readers.String(t, row["answer"]); a != c.Answer {
		t.Fatalf("%s: answer %q, want %q", rec.ID, a, c.Answer)
	}
	if r := readers.String(t, row["reasoning"]); r != c.Reasoning {
		t.Fatalf("%s: reasoning %q, want %q", rec.ID, r, c.Reasoning)
	}
	if model, ok := c.Request["model"].(string); ok {
		if got := readers.String(t, row["model"]); got != model {
			t.Fatalf("%s: model %q, want %q", rec.ID, got, model)
		}
	} else if row["model"] != nil {
		t.Fatalf("%s: model %v, want null", rec.ID, row["model"])
	}
	temp, hasTemp := c.Request["temperature"]
	switch {
	case !hasTemp && row["temperature"] != nil:
		t.Fatalf("%s: temperature %v, want null", rec.ID, row["temperature"])
	case hasTemp:
		got, ok := row["temperature"].(json.Number)
		g, err := got.Float64()
		want := fmt.Sprint(temp)
		if !ok || err != nil || fmt.Sprint(g) != want {
			t.Fatalf("%s: temperature %v, want %s", rec.ID, row["temperature"], want)
		}
	}
	if c.OutputIDs != nil {
		if got := readers.Int64s(t, row["output_ids"]); len(got) != len(c.OutputIDs) || got[len(got)-1] != int64(c.OutputIDs[len(c.OutputIDs)-1]) {
			t.Fatalf("%s: output_ids differ", rec.ID)
		}
	} else if row["output_ids"] != nil {
		t.Fatalf("%s: output_ids %v, want null", rec.ID, row["output_ids"])
	}
}

func newPeakAllocator() *peakAllocator {
	return &peakAllocator{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
}

func (p *peakAllocator) Peak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

func newRowPool(tokens int) *rowPool {
	return &rowPool{recs: arrowRows("pool", 16, tokens)}
}

// Memory is bounded by the row group, not the shard: writing 20,000 rows of
// 3,000 tokens into one shard peaks no higher than 5,000 rows do, and when
// the stage is closed (after a commit, or without one) all is freed.
func TestWriteArrowMemoryBoundedByRowGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 25,000 rows of 3,000 tokens per format")
	}
	pool := newRowPool(3000)
	ctx := context.Background()
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		t.Run(format, func(t *testing.T) {
			peak, heapPeak := map[int]int{}, map[int]uint64{}
			for _, n := range []int{5_000, 20_000} {
				dir := filepath.Join(t.TempDir(), "out")
				cfg := arrowCfg(dir, format)
				cfg.RowGroupRows, cfg.MaxRows, cfg.MaxBytes = 256, 1<<30, 1<<50
				mem := newPeakAllocator()
				runtime.GC()
				base := heapNow()
				heap := startHeapSampler()
				w := openArrow(t, cfg, mem, nil)
				em := &arrowEmitter{}
				for i := range n {
					if err := w.Process(ctx, pool.row(i), em); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Commit(ctx, &skipEmitter{}); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				heapPeak[n] = heap.Stop() - base
				mem.AssertSize(t, 0)
				m, err := filecommit.ReadManifest(dir)
				if err != nil || len(m.Shards) != 1 || m.Rows != int64(n) {
					t.Fatalf("manifest %+v, %v; want one shard of %d rows", m, err, n)
				}
				peak[n] = mem.Peak()
				t.Logf("%s: %d rows of 3,000 tokens, one shard of %s: allocator peak %s, Go heap peak %s", format, n,
					numfmt.Bytes(m.Bytes), numfmt.Bytes(int64(peak[n])), numfmt.Bytes(int64(heapPeak[n])))
				os.RemoveAll(dir)
			}
			// A row group of 256 rows of 3,000 tokens is ~3.8 MB of
			// columns; allow the builders' doubling and the encoder.
			if float64(peak[20_000]) > 1.3*float64(peak[5_000]) || peak[20_000] > 48<<20 {
				t.Fatalf("allocator peak %d bytes for 20,000 rows, %d for 5,000: grows with the shard", peak[20_000], peak[5_000])
			}
			// The Go heap too (the Parquet encoder allocates outside the
			// allocator); sampled, garbage included, so with more slack —
			// a shard held in memory would add hundreds of MB.
			if float64(heapPeak[20_000]) > 1.5*float64(heapPeak[5_000])+32<<20 {
				t.Fatalf("Go heap peak %d bytes for 20,000 rows, %d for 5,000: grows with the shard", heapPeak[20_000], heapPeak[5_000])
			}

			// Closed without a commit, with a shard half written: all freed.
			mem := newPeakAllocator()
			cfg := arrowCfg(filepath.Join(t.TempDir(), "out"), format)
			cfg.RowGroupRows = 256
			w := openArrow(t, cfg, mem, nil)
			for i := range 600 {
				if err := w.Process(ctx, pool.row(i), &arrowEmitter{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			mem.AssertSize(t, 0)
		})
	}
}
