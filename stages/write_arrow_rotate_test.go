package stages

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/filecommit"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// rotatePipeline is prompts → generate (simulated) → write-arrow with
// max_rows = 100.
func rotatePipeline(urls []string) string {
	return `
[pipeline]
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "gen"
kind  = "generate"
input = "prompts"
` + serversKey(urls) + fastGenKeys + readyKey + `concurrency = 16

[[stage]]
id       = "train"
kind     = "write-arrow"
input    = "gen"
path     = "out/train"
max_rows = 100
`
}

func shardRows(t *testing.T, dir string) []int64 {
	t.Helper()
	m, err := filecommit.ReadManifest(dir)
	if err != nil || m == nil {
		t.Fatalf("manifest of %s: %v", dir, err)
	}
	var rows []int64
	for i, sh := range m.Shards {
		if want := fmt.Sprintf("part-%05d.parquet", i); sh.Name != want {
			t.Fatalf("shard %d is %s, want %s (numbering continues)", i, sh.Name, want)
		}
		rows = append(rows, sh.Rows)
	}
	return rows
}

// Commit rounds many times a second do not cut shards: every shard has
// max_rows rows but the last, which the end of the input commits. Between
// shards the ids of the open shard's rows are not finished (their
// completions are in the journal until then).
func TestWriteArrowShardsSpanCommitRounds(t *testing.T) {
	f := startTestFleet(t, quickSim(2))
	var mu sync.Mutex
	var sawOpenShard bool
	progress := func(s *engine.Summary) {
		var in, committed int64
		for _, st := range s.Stages {
			if st.ID != "train" {
				continue
			}
			in = st.Out
			for _, fig := range st.Figures {
				if fig.Name == "committed_rows" {
					committed = int64(fig.Value)
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if int64(s.Finished) > committed {
			t.Errorf("%d ids finished with %d rows in committed shards: ids of the open shard were finished", s.Finished, committed)
		}
		if in > committed {
			sawOpenShard = true
		}
	}
	dir, sum, err := runGenPipeline(t, context.Background(), rotatePipeline(f.URLs()), genPrompts(1050),
		engine.Options{CommitEvery: 2 * time.Millisecond, ProgressEvery: time.Millisecond, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Repeat([]int64{100}, 10), 50)
	if got := shardRows(t, filepath.Join(dir, "out/train")); !slices.Equal(got, want) {
		t.Fatalf("shards of %v rows, want %v", got, want)
	}
	if sum.Finished != 1050 {
		t.Fatalf("%d ids finished, want 1050", sum.Finished)
	}
	mu.Lock()
	defer mu.Unlock()
	if !sawOpenShard {
		t.Error("never saw rows waiting in an open shard: the test did not test rotation across rounds")
	}
}

// A stop commits the partial shard; the resumed run continues the
// numbering and again fills shards to max_rows. Every id is in exactly one
// shard.
func TestWriteArrowStopCommitsPartialShardAndResumeContinues(t *testing.T) {
	f := startTestFleet(t, quickSim(2))
	src := rotatePipeline(f.URLs())
	const n = 600
	files := map[string]string{"prompts.jsonl": genPrompts(n)}
	root := t.TempDir()
	var counts [][]int64
	for run := 0; run < 20; run++ {
		stop := make(chan struct{})
		var once sync.Once
		opts := engine.Options{Stop: stop, CommitEvery: 2 * time.Millisecond, ProgressEvery: time.Millisecond,
			Progress: func(s *engine.Summary) {
				for _, st := range s.Stages {
					if st.ID == "train" && st.Out >= 230 {
						once.Do(func() { close(stop) })
					}
				}
			}}
		sum, err := runInDir(t, root, src, files, opts)
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, shardRows(t, filepath.Join(root, "out/train")))
		if !sum.Drained {
			break
		}
	}
	if len(counts) < 2 {
		t.Fatalf("the run finished without a stop: %v", counts)
	}
	prev := 0
	for i, rows := range counts {
		mine := rows[prev:]
		for j, r := range mine {
			if r != 100 && j != len(mine)-1 {
				t.Errorf("run %d made shards of %v rows: only its last may be short of max_rows", i, mine)
			}
		}
		prev = len(rows)
	}
	var total int64
	for _, r := range counts[len(counts)-1] {
		total += r
	}
	if total != n {
		t.Fatalf("shards hold %d rows, want %d (shards per run %v)", total, n, counts)
	}
	ids, err := commitlog.ReadIDLog(filepath.Join(root, "out/train/.ids"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, h := range ids {
		if seen[h] {
			t.Fatal("an id is in two shards")
		}
		seen[h] = true
	}
	t.Logf("shards after each run: %v", counts)
}

// runInDir checks and runs src in dir, writing files there first (the same
// directory again: a resume).
func runInDir(t *testing.T, dir, src string, files map[string]string, opts engine.Options) (*engine.Summary, error) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	f, probs := pipefile.Load(path, pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	return engine.Run(context.Background(), plan, opts)
}

// CommitDue (a commit round) leaves a young shard open and commits one
// past max_age; Commit (the end of the input) commits whatever is open.
// Durable follows what the committed shards hold.
func TestWriteArrowCommitDueHonoursMaxAge(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out")
	cfg := arrowCfg(dir, "parquet")
	cfg.MaxAge = config.Duration{Duration: time.Hour}
	cfg.MaxRows = 10
	w := openArrow(t, cfg, memory.NewGoAllocator(), nil)
	defer w.Close()
	in := arrowRows("a", 25, 5)
	arrowProcessAll(t, w, &arrowEmitter{}, in[:15])
	if d := w.Durable(); d != 10 {
		t.Fatalf("Durable = %d after 15 rows with max_rows 10, want 10", d)
	}
	if err := w.CommitDue(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, dir); !slices.Equal(got, []int64{10}) || w.Durable() != 10 {
		t.Fatalf("a commit round cut a young shard: shards %v, durable %d", got, w.Durable())
	}
	w.started = w.started.Add(-2 * time.Hour) // the open shard's first row is 2 h old
	if err := w.CommitDue(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, dir); !slices.Equal(got, []int64{10, 5}) || w.Durable() != 15 {
		t.Fatalf("past max_age: shards %v, durable %d; want [10 5], 15", got, w.Durable())
	}
	arrowProcessAll(t, w, &arrowEmitter{}, in[15:18])
	if err := w.Commit(ctx, &skipEmitter{}); err != nil {
		t.Fatal(err)
	}
	if got := shardRows(t, dir); !slices.Equal(got, []int64{10, 5, 3}) || w.Durable() != 18 {
		t.Fatalf("Commit: shards %v, durable %d; want [10 5 3], 18", got, w.Durable())
	}
}
