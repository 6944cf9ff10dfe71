package stages

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// arrowEmitter records what a writer skips and fails; a writer emits nothing.
type arrowEmitter struct {
	discardEmitter
	skipped []string
	failed  []string
}

func (e *arrowEmitter) Skip(rec *record.Record, reason string) error {
	e.skipped = append(e.skipped, rec.ID+":"+reason)
	return nil
}

func (e *arrowEmitter) Fail(rec *record.Record, err error, _ int) error {
	e.failed = append(e.failed, rec.ID+": "+err.Error())
	return nil
}

// arrowCfg is the configuration with the defaults the pipeline file loader
// fills in from the struct tags.
func arrowCfg(dir, format string) writeArrowConfig {
	return writeArrowConfig{Path: dir, Format: format, MaxRows: 100000, MaxBytes: 512 << 20, RowGroupRows: 1024}
}

// openArrow opens a write-arrow stage; mem, if not nil, is its allocator.
func openArrow(t testing.TB, cfg writeArrowConfig, mem memory.Allocator, log io.Writer) *writeArrow {
	t.Helper()
	w := &writeArrow{cfg: cfg, mem: mem}
	if err := w.Open(context.Background(), &pipeline.Env{Log: log}); err != nil {
		t.Fatal(err)
	}
	return w
}

func arrowProcessAll(t testing.TB, w *writeArrow, em pipeline.Emitter, recs []*record.Record) {
	t.Helper()
	for _, r := range recs {
		if err := w.Process(context.Background(), r, em); err != nil {
			t.Fatalf("process %s: %v", r.ID, err)
		}
	}
}

// benchTokenIDs is n plausible Qwen token ids: mostly frequent ids (a Zipf-like
// draw over the vocabulary), with runs copied from earlier in the row as real
// text repeats itself.
func benchTokenIDs(rng *rand.Rand, n int) []int32 {
	ids := make([]int32, 0, n)
	zipf := rand.NewZipf(rng, 1.1, 8, 151_000)
	for len(ids) < n {
		if len(ids) > 64 && rng.IntN(10) == 0 { // repeat an earlier span
			start := rng.IntN(len(ids) - 32)
			k := min(8+rng.IntN(24), n-len(ids))
			ids = append(ids, ids[start:start+k]...)
			continue
		}
		ids = append(ids, int32(zipf.Uint64()))
	}
	return ids
}

// maskFrom is a loss mask of n tokens masking the first prompt: 0s, then 1s.
func maskFrom(n, prompt int) record.LossMask {
	m := make(record.LossMask, n)
	for i := prompt; i < n; i++ {
		m[i] = 1
	}
	return m
}

func intsOf(v []int32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

const nonASCIIAnswer = "答案是 42。😀👩‍👩‍👧 café naïve e\u0301 Ελληνικά Ω≈ç√ — עברית"

// arrowTestRecords is a set of records covering every column and every kind
// of null: a full generation with long token lists, a chat-API completion
// without ids, a prompt only, a rejected record, an id alone, tokens without
// a completion, and empty strings that are not nulls. It is deterministic,
// so a second call gives equal records.
func arrowTestRecords() []*record.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := benchTokenIDs(rng, 320)
	output := benchTokenIDs(rng, 5_200)
	full := append(append([]int32(nil), prompt...), output...)
	recs := []*record.Record{
		{
			ID: "full-0",
			Messages: []record.Message{
				{Role: "system", Content: "你是一个乐于助人的助手。"},
				{Role: "user", Content: "Combien font 6 × 7 ? 説明してください 🙏"},
			},
			Completion: &record.Completion{
				Reasoning:    "嗯，6 乘以 7… let me think 🤔 — e\u0301tude",
				Answer:       nonASCIIAnswer,
				FinishReason: "stop", MatchedStop: 151645,
				PromptTokens: len(prompt), CompletionTokens: len(output), CachedTokens: 128, ReasoningTokens: 4_000,
				PromptIDs: intsOf(prompt), OutputIDs: intsOf(output),
				SpecVerifyCt: 1_700, SpecAcceptLength: 3.25, LatencySeconds: 41.5,
				Server: "http://10.0.0.7:30000", Attempts: 2, SystemPrompt: "你是一个乐于助人的助手。",
				Request: map[string]any{"api": "generate", "model": "Qwen/Qwen3-8B", "temperature": 0.6, "top_p": 0.95,
					"top_k": 20, "min_p": 0.0, "max_new_tokens": 32768, "enable_thinking": true, "stop": []any{"<|im_end|>"}},
			},
			Tokens: &record.Tokens{InputIDs: full, LossMask: maskFrom(len(full), len(prompt)),
				NumTokens: len(full), NumLossTokens: len(output), Source: "ids"},
			Meta: map[string]any{"source": "gsm8k", "idx": 17, "tags": []string{"math", "数学"}, "nested": map[string]any{"k": "値", "f": 1.5}},
		},
		{
			ID:       "chat-1",
			Messages: []record.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello", ReasoningContent: "greet"}, {Role: "user", Content: "and?"}},
			Completion: &record.Completion{Reasoning: "r", Answer: "a", FinishReason: "length", MatchedStop: "</answer>",
				PromptTokens: 10, CompletionTokens: 20, LatencySeconds: 0.25, Server: "s1", Attempts: 1,
				Request: map[string]any{"api": "chat", "model": "m", "temperature": json.Number("1"), "top_k": json.Number("-1"), "enable_thinking": false}},
			Meta: map[string]any{},
		},
		{ID: "prompt-only", Messages: []record.Message{{Role: "user", Content: "only a prompt"}}},
		{
			ID:         "rejected",
			Messages:   []record.Message{{Role: "user", Content: "q"}},
			Completion: &record.Completion{Reasoning: "long", Answer: "", FinishReason: "length", Request: map[string]any{"model": "m2", "top_p": 1}},
			Reject:     &record.Rejection{Stage: "filter", Reason: "truncated", Detail: "finish_reason length — 截断"},
		},
		{ID: "bare"},
		{
			ID:     "tokens-only",
			Tokens: &record.Tokens{InputIDs: []int32{1, 2, 3}, LossMask: record.LossMask{0, 1, 1}, NumTokens: 3, NumLossTokens: 2, Source: "text"},
		},
		{
			// Empty strings and zeros, not nulls: a completion with nothing in it.
			ID:         "empty-completion",
			Messages:   []record.Message{},
			Completion: &record.Completion{},
			Reject:     &record.Rejection{Reason: "empty"},
		},
	}
	for i := range 40 { // more rows, so that shards have several batches
		n := 50 + rng.IntN(400)
		ids := benchTokenIDs(rng, n)
		recs = append(recs, &record.Record{
			ID:       fmt.Sprintf("gen-%03d-é", i),
			Messages: []record.Message{{Role: "user", Content: fmt.Sprintf("question %d ✓", i)}},
			Completion: &record.Completion{Reasoning: strings.Repeat("思", i), Answer: fmt.Sprintf("answer %d", i), FinishReason: "stop",
				PromptTokens: 10, CompletionTokens: n - 10, OutputIDs: intsOf(ids[10:]), LatencySeconds: float64(i) / 8,
				Request: map[string]any{"model": "Qwen/Qwen3-8B", "temperature": 0.7, "top_p": 0.8, "top_k": 20, "enable_thinking": i%2 == 0}},
			Tokens: &record.Tokens{InputIDs: ids, LossMask: maskFrom(n, 10), NumTokens: n, NumLossTokens: n - 10, Source: "ids"},
			Meta:   map[string]any{"i": i},
		})
	}
	return recs
}

// normalizeJSON replaces the fields of free JSON (meta, the request,
// matched_stop) by what they read back as from JSON.
func normalizeJSON(t testing.TB, recs []*record.Record) {
	t.Helper()
	norm := func(v any, dst any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, dst); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		if r.Meta != nil {
			var m map[string]any
			norm(r.Meta, &m)
			r.Meta = m
		}
		if c := r.Completion; c != nil {
			if c.Request != nil {
				var m map[string]any
				norm(c.Request, &m)
				c.Request = m
			}
			if c.MatchedStop != nil {
				var v any
				norm(c.MatchedStop, &v)
				c.MatchedStop = v
			}
		}
	}
}

// readArrowDir checks the manifest of dir against its shard files (names in
// order, bytes, sha256, rows, tokens, totals) and returns the rows of all
// shards in order, decoded by arrowrow.
func readArrowDir(t testing.TB, dir string) (*filecommit.Manifest, []*record.Record) {
	t.Helper()
	m, err := filecommit.ReadManifest(dir)
	if err != nil || m == nil {
		t.Fatalf("manifest: %v %v", m, err)
	}
	var all []*record.Record
	var rows, tokens, size int64
	for i, sh := range m.Shards {
		if want := fmt.Sprintf("part-%05d%s", i, arrowrow.Ext(m.Format)); sh.Name != want {
			t.Fatalf("shard %d is named %s, want %s", i, sh.Name, want)
		}
		path := filepath.Join(dir, sh.Name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != sh.Bytes || hex.EncodeToString(sum[:]) != sh.SHA256 {
			t.Fatalf("%s: %d bytes, sha256 %x; the manifest says %d bytes, sha256 %s", sh.Name, len(data), sum, sh.Bytes, sh.SHA256)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
			t.Fatalf("%s: mode %v, want 0644", sh.Name, st.Mode().Perm())
		}
		var recs []*record.Record
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		err = arrowrow.ReadFile(context.Background(), path, mem, func(b arrow.RecordBatch) error {
			r, err := arrowrow.Records(b)
			recs = append(recs, r...)
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", sh.Name, err)
		}
		mem.AssertSize(t, 0)
		var tok int64
		for _, r := range recs {
			if r.Tokens != nil {
				tok += int64(r.Tokens.NumTokens)
			}
		}
		if int64(len(recs)) != sh.Rows || tok != sh.Tokens {
			t.Fatalf("%s holds %d rows, %d tokens; the manifest says %d, %d", sh.Name, len(recs), tok, sh.Rows, sh.Tokens)
		}
		rows, tokens, size = rows+sh.Rows, tokens+sh.Tokens, size+sh.Bytes
		all = append(all, recs...)
	}
	if rows != m.Rows || tokens != m.Tokens || size != m.Bytes {
		t.Fatalf("manifest totals %d rows, %d tokens, %d bytes; its shards sum to %d, %d, %d", m.Rows, m.Tokens, m.Bytes, rows, tokens, size)
	}
	return m, all
}

func dirNames(t testing.TB, dir string) []string {
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

func recordIDs(recs []*record.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// What write-arrow writes reads back through arrowrow as the records it was
// given, in order, in both formats: long token lists, non-ASCII text, and
// nulls where a record has no completion, no tokens, no reject, no meta.
func TestWriteArrowRoundTrip(t *testing.T) {
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			cfg := arrowCfg(dir, format)
			cfg.RowGroupRows = 5
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			w := openArrow(t, cfg, mem, nil)
			em := &arrowEmitter{}
			arrowProcessAll(t, w, em, arrowTestRecords())
			if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			mem.AssertSize(t, 0)
			if len(em.skipped)+len(em.failed) > 0 {
				t.Fatalf("skipped %v, failed %v", em.skipped, em.failed)
			}
			m, got := readArrowDir(t, dir)
			if m.Format != format || len(m.Shards) != 1 || m.Schema != arrowrow.Version {
				t.Fatalf("manifest %+v", m)
			}
			want := arrowTestRecords()
			normalizeJSON(t, want)
			if len(got) != len(want) {
				t.Fatalf("read %d rows, wrote %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					g, _ := json.Marshal(got[i])
					w, _ := json.Marshal(want[i])
					t.Fatalf("row %d differs:\n got %.2000s\nwant %.2000s", i, g, w)
				}
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{filecommit.MetaDir, "part-00000" + arrowrow.Ext(format)}) {
				t.Fatalf("directory holds %v", names)
			}
		})
	}
}

// arrowRows is n rows with ids prefix-0 … and tokens tokens each.
func arrowRows(prefix string, n, tokens int) []*record.Record {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(tokens)))
	recs := make([]*record.Record, n)
	for i := range recs {
		ids := benchTokenIDs(rng, tokens)
		recs[i] = &record.Record{ID: fmt.Sprintf("%s-%d", prefix, i),
			Completion: &record.Completion{Answer: "a", FinishReason: "stop"},
			Tokens:     &record.Tokens{InputIDs: ids, LossMask: maskFrom(tokens, tokens/4), NumTokens: tokens, NumLossTokens: tokens - tokens/4}}
	}
	return recs
}

// Shards rotate at max_rows: 2,500 rows at 1,000 a shard are part-00000 …
// part-00002 with 1,000, 1,000 and 500 rows, and the manifest's figures are
// those of the files.
func TestWriteArrowRotatesByRows(t *testing.T) {
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			cfg := arrowCfg(dir, format)
			cfg.MaxRows, cfg.RowGroupRows = 1000, 256
			w := openArrow(t, cfg, nil, nil)
			in := arrowRows("r", 2500, 40)
			arrowProcessAll(t, w, &arrowEmitter{}, in)
			if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			m, got := readArrowDir(t, dir)
			var rows []int64
			for _, sh := range m.Shards {
				rows = append(rows, sh.Rows)
			}
			if !slices.Equal(rows, []int64{1000, 1000, 500}) || m.Rows != 2500 || m.Tokens != 2500*40 {
				t.Fatalf("shards of %v rows, %d rows and %d tokens in all; want 1000, 1000, 500", rows, m.Rows, m.Tokens)
			}
			if !slices.Equal(recordIDs(got), recordIDs(in)) {
				t.Fatal("the rows read back are not the rows written, in order")
			}
			ext := arrowrow.Ext(format)
			if names := dirNames(t, dir); !slices.Equal(names, []string{filecommit.MetaDir, "part-00000" + ext, "part-00001" + ext, "part-00002" + ext}) {
				t.Fatalf("directory holds %v", names)
			}
		})
	}
}

// Shards rotate at about max_bytes: each is at most max_bytes and one row
// group over it, and all but the last reach it.
func TestWriteArrowRotatesByBytes(t *testing.T) {
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		t.Run(format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			cfg := arrowCfg(dir, format)
			cfg.MaxBytes, cfg.RowGroupRows = 1<<20, 4
			w := openArrow(t, cfg, nil, nil)
			in := arrowRows("b", 200, 20_000) // ~100 KB a row in memory
			arrowProcessAll(t, w, &arrowEmitter{}, in)
			if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			m, got := readArrowDir(t, dir)
			if !slices.Equal(recordIDs(got), recordIDs(in)) {
				t.Fatal("the rows read back are not the rows written, in order")
			}
			checkShardBytes(t, m, cfg.MaxBytes, 4*100_000, cfg.MaxBytes/2)

			// Row groups larger than max_bytes: the shard is cut at max_bytes
			// all the same.
			dir = filepath.Join(t.TempDir(), "big-groups")
			cfg = arrowCfg(dir, format)
			cfg.MaxBytes, cfg.RowGroupRows = 1<<20, 1024
			w = openArrow(t, cfg, nil, nil)
			arrowProcessAll(t, w, &arrowEmitter{}, in)
			if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			m, got = readArrowDir(t, dir)
			if !slices.Equal(recordIDs(got), recordIDs(in)) {
				t.Fatal("the rows read back are not the rows written, in order")
			}
			// Rows not yet handed to the Parquet row group (up to a MiB)
			// count at their size in memory, so a compressed shard cut
			// while they were buffered is smaller.
			least := cfg.MaxBytes / 2
			if format == arrowrow.FormatParquet {
				least = cfg.MaxBytes / 10
			}
			checkShardBytes(t, m, cfg.MaxBytes, 100_000, least)
		})
	}
}

// checkShardBytes checks that a directory rotated at max: more than one
// shard, each at most over bytes over max, all but the last of at least
// least bytes.
func checkShardBytes(t *testing.T, m *filecommit.Manifest, max, over, least int64) {
	t.Helper()
	if len(m.Shards) < 3 {
		t.Fatalf("%d shards of %d bytes in all; want rotation at %d bytes", len(m.Shards), m.Bytes, max)
	}
	for i, sh := range m.Shards {
		if sh.Bytes > max+over {
			t.Errorf("%s: %d bytes, more than max_bytes and %d bytes", sh.Name, sh.Bytes, over)
		}
		if i < len(m.Shards)-1 && sh.Bytes < least {
			t.Errorf("%s: %d bytes, rotated early", sh.Name, sh.Bytes)
		}
	}
}

// snapshotFiles copies the files named from dir into a new directory.
func snapshotFiles(t testing.TB, dir string, names ...string) string {
	t.Helper()
	snap := t.TempDir()
	for _, n := range names {
		copyTestFile(t, filepath.Join(dir, n), filepath.Join(snap, n))
	}
	return snap
}

func copyTestFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func idLogLen(t testing.TB, dir string) int64 {
	t.Helper()
	st, err := os.Stat(filepath.Join(dir, filecommit.IDLogName))
	if err != nil {
		t.Fatal(err)
	}
	return (st.Size() - 8) / 8
}

// A run that stops before committing loses nothing committed: the next run
// removes what was not committed (a hidden temporary shard, a shard renamed
// but not yet in the manifest) and says so, keeps the committed shards
// byte for byte, skips the rows they hold as already_committed, and writes
// the rest into the next shards.
func TestWriteArrowCrashAndResume(t *testing.T) {
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			ext := arrowrow.Ext(format)
			dir := filepath.Join(t.TempDir(), "out")
			cfg := arrowCfg(dir, format)
			cfg.RowGroupRows = 8
			in := arrowRows("c", 100, 30)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())

			// Run 1: rows 0-29 committed (part-00000); 30-49 processed,
			// flushed into a temporary shard, never committed; the engine
			// closes the stage after a failure.
			w := openArrow(t, cfg, mem, nil)
			em := &arrowEmitter{}
			arrowProcessAll(t, w, em, in[:30])
			if err := w.Commit(ctx, &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			arrowProcessAll(t, w, em, in[30:50])
			if w.cur == nil {
				t.Fatal("no temporary shard after two row groups")
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			mem.AssertSize(t, 0)
			if names := dirNames(t, dir); !slices.Equal(names, []string{filecommit.MetaDir, "part-00000" + ext}) {
				t.Fatalf("after close without commit the directory holds %v", names)
			}
			shard0, _ := os.ReadFile(filepath.Join(dir, "part-00000"+ext))

			// A killed process leaves its temporary shard behind.
			s, _, err := filecommit.Open(dir, format, ext, arrowrow.Version)
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.Create()
			if err != nil {
				t.Fatal(err)
			}
			p.Write(bytes.Repeat([]byte("x"), 5000))
			s.Close() // no Commit, no Abort

			// Run 2: removes the temporary shard, skips rows 0-29, writes
			// 30-59 into part-00001.
			var log bytes.Buffer
			w = openArrow(t, cfg, mem, &log)
			if !strings.Contains(log.String(), "removed ["+filecommit.MetaDir+"/."+p.Name()) || !strings.Contains(log.String(), "continuing after 30 committed rows in 1 shards") {
				t.Fatalf("reopen logged %q", log.String())
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{filecommit.MetaDir, "part-00000" + ext}) {
				t.Fatalf("after reopen the directory holds %v", names)
			}
			em = &arrowEmitter{}
			arrowProcessAll(t, w, em, in[:60])
			want := make([]string, 30)
			for i := range want {
				want[i] = in[i].ID + ":already_committed"
			}
			if !slices.Equal(em.skipped, want) {
				t.Fatalf("skipped %v, want rows 0-29 as already_committed", em.skipped)
			}
			if err := w.Commit(ctx, &skipEmitter{}); err != nil {
				t.Fatal(err)
			}

			// Run 2 goes on: part-00002 with rows 60-79 is renamed and its
			// ids logged, and the process dies before the manifest names it
			// (the manifest of before is put back).
			before := snapshotFiles(t, dir, filecommit.ManifestName)
			arrowProcessAll(t, w, em, in[60:80])
			if err := w.Commit(ctx, &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			mem.AssertSize(t, 0)
			copyTestFile(t, filepath.Join(before, filecommit.ManifestName), filepath.Join(dir, filecommit.ManifestName))
			if n := idLogLen(t, dir); n != 80 {
				t.Fatalf("the id log holds %d ids, want 80", n)
			}

			// Run 3: part-00002 is removed, the id log cut back to 60
			// rows; rows 60-99 are written again into part-00002.
			log.Reset()
			w = openArrow(t, cfg, mem, &log)
			if !strings.Contains(log.String(), "removed [part-00002"+ext+"]") {
				t.Fatalf("reopen logged %q", log.String())
			}
			if n := idLogLen(t, dir); n != 60 {
				t.Fatalf("the id log holds %d ids after reopen, want 60", n)
			}
			em = &arrowEmitter{}
			arrowProcessAll(t, w, em, in)
			if len(em.skipped) != 60 || em.skipped[59] != in[59].ID+":already_committed" {
				t.Fatalf("skipped %d rows (%v), want 60", len(em.skipped), em.skipped)
			}
			if err := w.Commit(ctx, &skipEmitter{}); err != nil {
				t.Fatal(err)
			}
			w.Close()
			mem.AssertSize(t, 0)

			m, got := readArrowDir(t, dir)
			if !slices.Equal(recordIDs(got), recordIDs(in)) {
				t.Fatalf("read back %v", recordIDs(got))
			}
			var rows []int64
			for _, sh := range m.Shards {
				rows = append(rows, sh.Rows)
			}
			if !slices.Equal(rows, []int64{30, 30, 40}) {
				t.Fatalf("shards of %v rows, want 30, 30, 40", rows)
			}
			if again, _ := os.ReadFile(filepath.Join(dir, "part-00000"+ext)); !bytes.Equal(again, shard0) {
				t.Fatal("part-00000 changed")
			}
			if n := idLogLen(t, dir); n != 100 {
				t.Fatalf("the id log holds %d ids, want 100", n)
			}

			// Another format in the same directory is refused.
			other := arrowCfg(dir, arrowrow.FormatArrow)
			if format == arrowrow.FormatArrow {
				other.Format = arrowrow.FormatParquet
			}
			w = &writeArrow{cfg: other}
			if err := w.Open(ctx, &pipeline.Env{}); err == nil || !strings.Contains(err.Error(), "holds "+format+" shards") {
				t.Fatalf("opening %s shards as %s: %v", format, other.Format, err)
			}
		})
	}
}

// A crash between the rename of the very first shard and the first manifest
// leaves part-00000 without a manifest entry; the next run removes it and
// writes the rows again.
func TestWriteArrowCrashBeforeFirstManifest(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out")
	cfg := arrowCfg(dir, arrowrow.FormatParquet)
	in := arrowRows("f", 10, 20)
	w := openArrow(t, cfg, nil, nil)
	// The directory as Open left it, before any shard.
	_, err := os.Stat(filepath.Join(dir, filecommit.ManifestName))
	hadManifest := err == nil
	var before string
	if hadManifest {
		before = snapshotFiles(t, dir, filecommit.ManifestName)
	}
	arrowProcessAll(t, w, &arrowEmitter{}, in)
	if err := w.Commit(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The crash: the manifest is as it was before the commit.
	if hadManifest {
		copyTestFile(t, filepath.Join(before, filecommit.ManifestName), filepath.Join(dir, filecommit.ManifestName))
	} else {
		os.Remove(filepath.Join(dir, filecommit.ManifestName))
	}
	var log bytes.Buffer
	w = openArrow(t, cfg, nil, &log)
	if !strings.Contains(log.String(), "removed [part-00000.parquet]") {
		t.Fatalf("reopen logged %q", log.String())
	}
	em := &arrowEmitter{}
	arrowProcessAll(t, w, em, in)
	if len(em.skipped) != 0 {
		t.Fatalf("skipped %v: rows that were never committed", em.skipped)
	}
	if err := w.Commit(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, got := readArrowDir(t, dir); !slices.Equal(recordIDs(got), recordIDs(in)) {
		t.Fatalf("read back %v", recordIDs(got))
	}
}

// A directory with part files that has no manifest was not written by
// write-arrow: it is refused, and left as it is.
func TestWriteArrowRefusesForeignShards(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "part-00000.parquet"), []byte("PAR1 theirs"), 0o644)
	w := &writeArrow{cfg: arrowCfg(dir, arrowrow.FormatParquet)}
	err := w.Open(context.Background(), &pipeline.Env{})
	if err == nil || !strings.Contains(err.Error(), "holds shards but no "+filecommit.ManifestName) {
		t.Fatalf("open: %v", err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"part-00000.parquet"}) {
		t.Fatalf("the directory holds %v after the refusal", names)
	}
}

// A record that cannot be written as a row (free JSON that does not encode)
// fails alone; the rows around it are written whole, columns aligned.
func TestWriteArrowBadRecordFailsAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	cfg := arrowCfg(dir, arrowrow.FormatParquet)
	cfg.RowGroupRows = 2
	w := openArrow(t, cfg, nil, nil)
	in := arrowRows("x", 4, 10)
	bad := &record.Record{ID: "bad", Messages: []record.Message{{Role: "user", Content: "q"}},
		Completion: &record.Completion{Answer: "a", Request: map[string]any{"model": "m"}},
		Meta:       map[string]any{"ch": make(chan int)}}
	em := &arrowEmitter{}
	arrowProcessAll(t, w, em, []*record.Record{in[0], bad, in[1], in[2], in[3]})
	if len(em.failed) != 1 || !strings.HasPrefix(em.failed[0], "bad: ") {
		t.Fatalf("failed %v, want bad", em.failed)
	}
	if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	_, got := readArrowDir(t, dir)
	want := arrowRows("x", 4, 10)
	normalizeJSON(t, want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %v, want %v", recordIDs(got), recordIDs(want))
	}
}

// peakAllocator is a CheckedAllocator that also keeps the highest
// allocation it reached.
type peakAllocator struct {
	*memory.CheckedAllocator
	mu   sync.Mutex
	peak int
}

func (p *peakAllocator) note() {
	p.mu.Lock()
	p.peak = max(p.peak, p.CurrentAlloc())
	p.mu.Unlock()
}

func (p *peakAllocator) Allocate(n int) []byte {
	b := p.CheckedAllocator.Allocate(n)
	p.note()
	return b
}

func (p *peakAllocator) Reallocate(n int, b []byte) []byte {
	b = p.CheckedAllocator.Reallocate(n, b)
	p.note()
	return b
}

// rowPool is a few rows of tokens tokens each, reused under new ids: the
// writer keeps nothing of a record, so this costs the test no memory.
type rowPool struct{ recs []*record.Record }

func (p *rowPool) row(i int) *record.Record {
	r := *p.recs[i%len(p.recs)]
	r.ID = fmt.Sprintf("row-%d", i)
	return &r
}

// The shard directory's id log damaged while pipe is stopped (cut short,
// a torn header): it is rebuilt from the committed shards' rows, in order,
// with a warning, and the writer goes on knowing every row it holds.
func TestWriteArrowRebuildsADamagedIDLog(t *testing.T) {
	for _, format := range []string{arrowrow.FormatParquet, arrowrow.FormatArrow} {
		for _, damage := range []string{"cut short", "torn header"} {
			t.Run(format+"/"+damage, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "out")
				cfg := arrowCfg(dir, format)
				cfg.MaxRows = 100
				w := openArrow(t, cfg, nil, nil)
				in := arrowRows("r", 250, 10)
				arrowProcessAll(t, w, &arrowEmitter{}, in)
				if err := w.Commit(context.Background(), &skipEmitter{}); err != nil {
					t.Fatal(err)
				}
				w.Close()
				ids := filepath.Join(dir, filecommit.IDLogName)
				before, _ := os.ReadFile(ids)
				if damage == "cut short" {
					os.Truncate(ids, int64(len(before)-8*30))
				} else {
					f, _ := os.OpenFile(ids, os.O_WRONLY, 0)
					f.WriteAt(make([]byte, 8), 0)
					f.Close()
				}
				var notice strings.Builder
				w = &writeArrow{cfg: cfg}
				if err := w.Open(context.Background(), &pipeline.Env{StageID: "completions", Notice: &notice}); err != nil {
					t.Fatalf("a damaged id log stopped the writer: %v", err)
				}
				defer w.Close()
				if !strings.Contains(notice.String(), "rebuilt from the 3 shards' rows") {
					t.Errorf("notice %q", notice.String())
				}
				if after, _ := os.ReadFile(ids); !bytes.Equal(after, before) {
					t.Error("the rebuilt id log differs from the one the writer kept")
				}
				for _, r := range in {
					if !w.shards.Has(r.ID) {
						t.Fatalf("%s is not known as committed after the rebuild", r.ID)
					}
				}
			})
		}
	}
}

// A record a shard directory already holds (committed there before a crash
// that came before the other outputs committed it) is skipped by
// write-arrow as already committed: that is its copy's commit, and the id
// finishes once the other outputs have it.
func TestWriteArrowAlreadyCommittedFinishesTheID(t *testing.T) {
	src := func(outputs string) string {
		return `[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"
` + outputs
	}
	arrow := `
[[stage]]
id    = "shards"
kind  = "write-arrow"
input = "prompts"
path  = "out/shards"
`
	jsonl := `
[[stage]]
id    = "lines"
kind  = "write-jsonl"
input = "prompts"
path  = "out/lines.jsonl"
`
	dir, sum, err := runTestPipelineWith(t, context.Background(), src(arrow), map[string]string{"prompts.jsonl": genPrompts(20)}, engine.Options{})
	if err != nil || sum.Finished != 20 {
		t.Fatalf("first run: %v, %d finished", err, sum.Finished)
	}
	// As after a crash between the shard's commit and the other outputs':
	// the ids are in the shards, not finished.
	if err := commitlog.WriteIDLog(filepath.Join(dir, "run", "done.ids"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.toml"), []byte(src(arrow+jsonl)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, probs := pipefile.Load(filepath.Join(dir, "p.toml"), pipefile.Options{})
	plan, bprobs := pipeline.Build(f, pipeline.DefaultRegistry)
	if len(probs)+len(bprobs) > 0 {
		t.Fatal(probs, bprobs)
	}
	sum, err = engine.Run(context.Background(), plan, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := stageSummary(t, sum, "shards"); s.Skips["already_committed"] != 20 {
		t.Fatalf("shards skipped %v, want 20 already committed", s.Skips)
	}
	if sum.Finished != 20 {
		t.Fatalf("%d ids finished, want the 20 (each committed in both outputs now)", sum.Finished)
	}
}
