package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// countingAllocator is the Go allocator counting the bytes it has out and
// the most it had: the Arrow buffers of a writer (cheap, unlike
// memory.CheckedAllocator, which records a stack per allocation).
type countingAllocator struct {
	mem       memory.Allocator
	cur, peak atomic.Int64
}

func (c *countingAllocator) add(n int) {
	v := c.cur.Add(int64(n))
	for {
		p := c.peak.Load()
		if v <= p || c.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

func (c *countingAllocator) Allocate(n int) []byte {
	c.add(n)
	return c.mem.Allocate(n)
}

func (c *countingAllocator) Reallocate(n int, b []byte) []byte {
	c.add(n - len(b))
	return c.mem.Reallocate(n, b)
}

func (c *countingAllocator) Free(b []byte) {
	c.add(-len(b))
	c.mem.Free(b)
}

// benchText is prose and code from the Go distribution's sources, or, without
// them, words; rows cut their reasoning and answer from it.
func benchText(size int) string {
	var text strings.Builder
	for _, dir := range []string{"net/http", "runtime", "go/types", "encoding/json", "text/template"} {
		fs, _ := filepath.Glob(filepath.Join(goRoot(), "src", dir, "*.go"))
		sort.Strings(fs)
		for _, f := range fs {
			if data, err := os.ReadFile(f); err == nil {
				text.Write(data)
			}
			if text.Len() >= size {
				return text.String()
			}
		}
	}
	words := strings.Fields("the a of to and in is that for it as with be on not this are by or from at an which we can so if then step answer let us consider therefore value number sum")
	rng := rand.New(rand.NewPCG(7, 7))
	for text.Len() < size {
		text.WriteString(words[rng.IntN(len(words))])
		text.WriteByte(' ')
	}
	return text.String()
}

// arrowBenchRows is n distinct rows of about tokens tokens as a native
// generation makes them: a prompt of 150-450 tokens, the rest generated;
// input_ids = prompt + output with the prompt masked out, the completion's
// own prompt_ids/output_ids, and reasoning and answer text of ~3.5
// characters a token.
func arrowBenchRows(n, tokens int) []*record.Record {
	rng := rand.New(rand.NewPCG(3, 4))
	text := benchText(n * tokens * 4)
	recs := make([]*record.Record, n)
	off := 0
	cut := func(k int) string {
		if off+k > len(text) {
			off = 0
		}
		s := text[off : off+k]
		off += k
		return s
	}
	for i := range recs {
		total := tokens - tokens/10 + rng.IntN(tokens/5+1)
		prompt := 150 + rng.IntN(300)
		ids := benchTokenIDs(rng, total)
		output := total - prompt
		reasoning := output * 3 / 4
		recs[i] = &record.Record{
			ID:       fmt.Sprintf("bench-%06d", i),
			Messages: []record.Message{{Role: "user", Content: cut(prompt * 7 / 2)}},
			Completion: &record.Completion{
				Reasoning: cut(reasoning * 7 / 2), Answer: cut((output - reasoning) * 7 / 2),
				FinishReason: "stop", MatchedStop: 151645,
				PromptTokens: prompt, CompletionTokens: output, ReasoningTokens: reasoning,
				PromptIDs: intsOf(ids[:prompt]), OutputIDs: intsOf(ids[prompt:]),
				SpecVerifyCt: output / 3, SpecAcceptLength: 2.9, LatencySeconds: 30 + rng.Float64()*60,
				Server: fmt.Sprintf("http://10.0.0.%d:30000", 1+rng.IntN(8)), Attempts: 1,
				Request: map[string]any{"api": "generate", "model": "Qwen/Qwen3-8B", "temperature": 0.6, "top_p": 0.95,
					"top_k": 20, "min_p": 0.0, "max_new_tokens": 8192, "enable_thinking": true},
			},
			Tokens: &record.Tokens{InputIDs: ids, LossMask: maskFrom(total, prompt), NumTokens: total,
				NumLossTokens: output, Source: "ids"},
			Meta: map[string]any{"source": "bench", "index": i},
		}
	}
	return recs
}

// heapSampler samples the bytes of heap objects (live and not yet swept)
// every few milliseconds and keeps the highest.
type heapSampler struct {
	stop chan struct{}
	done sync.WaitGroup
	peak uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.done.Add(1)
	go func() {
		defer h.done.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			h.peak = max(h.peak, heapNow())
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	h.done.Wait()
	return max(h.peak, heapNow())
}

// benchWriter is one of the writers under test, opened on a fresh path.
type benchWriter interface {
	pipeline.Processor
	pipeline.Committer
	pipeline.Closer
}

// BenchmarkWriteArrow writes b.N rows of ~3,000 tokens with write-arrow
// (Parquet, zstd; Arrow IPC, uncompressed) and write-jsonl, each into a
// fresh directory, committed at the end (fsync included), and reports:
//
//   - rows/s, and MB/s of input counted as the rows' JSON size (what
//     write-jsonl writes, so the same bytes for every writer);
//   - disk-B/row: the bytes of the files written, per row;
//   - peak-heap-MB: the highest heap (objects, live or not yet swept) above
//     what it was before the writer opened, sampled every 2 ms;
//   - arrow-peak-MB: the most Arrow buffers the writer had allocated at
//     once (write-arrow only).
//
// Run with a fixed row count, e.g. -benchtime 10000x (bench/write_arrow.sh).
func BenchmarkWriteArrow(b *testing.B) {
	// As many distinct rows as a row group holds: a row group with a row
	// twice compresses as real data does not (zstd finds the repeat).
	const pool = 1024
	rows := arrowBenchRows(pool, 3000)
	sizes := make([]int, pool)
	var tokens int
	for i, r := range rows {
		data, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		sizes[i] = len(data) + 1 // and the newline
		tokens += r.Tokens.NumTokens
	}
	b.Logf("%d distinct rows, %.0f tokens and %.1f KB of JSON a row on average", pool, float64(tokens)/pool, float64(sumInts(sizes))/pool/1e3)
	ctx := context.Background()
	for _, kind := range []string{"parquet", "arrow", "jsonl"} {
		b.Run(kind, func(b *testing.B) {
			dir := b.TempDir()
			var counter *countingAllocator
			open := func() benchWriter {
				switch kind {
				case "jsonl":
					w := &writeJSONL{cfg: writeJSONLConfig{Path: filepath.Join(dir, "out.jsonl")}}
					if err := w.Open(ctx, &pipeline.Env{}); err != nil {
						b.Fatal(err)
					}
					return w
				default:
					counter = &countingAllocator{mem: memory.NewGoAllocator()}
					w := &writeArrow{cfg: arrowCfg(filepath.Join(dir, "out"), kind), mem: counter}
					if err := w.Open(ctx, &pipeline.Env{}); err != nil {
						b.Fatal(err)
					}
					return w
				}
			}
			recs := make([]record.Record, b.N) // shallow copies with their own ids
			var input int64
			for i := range recs {
				recs[i] = *rows[i%pool]
				recs[i].ID = fmt.Sprintf("row-%09d", i)
				input += int64(sizes[i%pool] + len(recs[i].ID) - len(rows[i%pool].ID))
			}
			runtime.GC()
			base := heapNow()
			em := &discardEmitter{}
			b.ReportAllocs()
			b.ResetTimer()
			heap := startHeapSampler()
			w := open()
			for i := range recs {
				if err := w.Process(ctx, &recs[i], em); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Commit(ctx, em); err != nil {
				b.Fatal(err)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			peak := heap.Stop()
			b.StopTimer()
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/secs, "rows/s")
			b.ReportMetric(float64(input)/secs/1e6, "MB/s")
			b.ReportMetric(float64(treeBytes(b, dir))/float64(b.N), "disk-B/row")
			b.ReportMetric(float64(input)/float64(b.N), "json-B/row")
			b.ReportMetric(float64(peak-min(peak, base))/1e6, "peak-heap-MB")
			if counter != nil {
				b.ReportMetric(float64(counter.peak.Load())/1e6, "arrow-peak-MB")
				if c := counter.cur.Load(); c != 0 {
					b.Fatalf("%d bytes of Arrow buffers not freed at Close", c)
				}
			}
		})
	}
}

func sumInts(v []int) (s int) {
	for _, x := range v {
		s += x
	}
	return s
}

// treeBytes is the size of the files under dir, the hidden ones (the id log)
// included.
func treeBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
