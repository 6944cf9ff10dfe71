//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

// hygieneRig is a run that removes near duplicates and benchmark
// prompts before generating on in-process simulated servers.
type hygieneRig struct {
	t    *testing.T
	bin  string
	dir  string
	log  *os.File
	file string
}

// newHygieneRig writes 3,000 prompts (with planted near duplicates and
// benchmark copies), a benchmark file and the pipeline into a new
// directory. The prompts are the same for every rig.
func newHygieneRig(t *testing.T) *hygieneRig {
	t.Helper()
	r := &hygieneRig{t: t, bin: testenv.PipeBinary(t), dir: t.TempDir()}
	qwen := testenv.Qwen3Dir(t)
	rng := rand.New(rand.NewPCG(3, 3))
	words := strings.Fields("river stone light cloud number garden engine letter market winter signal paper bridge orbit field metal forest story machine planet theory music")
	sentence := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	var bench, prompts strings.Builder
	var refs []string
	for i := range 50 {
		q := fmt.Sprintf("Benchmark question %d: %s?", i, sentence(20))
		refs = append(refs, q)
		fmt.Fprintf(&bench, "{\"question\":%q}\n", q)
	}
	var texts []string
	for i := range 3000 {
		var p string
		switch {
		case i > 100 && i%10 == 0: // a near duplicate of an earlier prompt
			p = "Hello! " + texts[rng.IntN(len(texts))]
		case i%97 == 0: // a benchmark question
			p = refs[rng.IntN(len(refs))]
		default:
			p = fmt.Sprintf("Prompt %d: %s.", i, sentence(25))
		}
		texts = append(texts, p)
		fmt.Fprintf(&prompts, "{\"id\":\"p%d\",\"prompt\":%q}\n", i, p)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("prompts.jsonl", prompts.String())
	write("bench.jsonl", bench.String())
	write("p.toml", fmt.Sprintf(`[pipeline]
name    = "hygiene"
run_dir = "run"

[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id    = "unique"
kind  = "dedupe-near-duplicates"
input = "prompts"

[[stage]]
id         = "clean"
kind       = "decontaminate"
input      = "unique"
references = ["bench.jsonl"]

[[stage]]
id    = "todo"
kind  = "dedupe-against-progress"
input = "clean"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "todo"
servers           = ["sim:2?speed=100"]
concurrency       = 16
api               = "generate"
tokenizer         = %q
max_output_tokens = 256

[[stage]]
id    = "out"
kind  = "write-jsonl"
input = "gen"
path  = "out/completions.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["unique.rejected", "clean.rejected", "gen.rejected"]
path  = "out/rejected.jsonl"
`, qwen))
	r.file = filepath.Join(r.dir, "p.toml")
	r.log = runsLog(t, "pipe-hygiene-*.log")
	return r
}

func (r *hygieneRig) start() *exec.Cmd {
	cmd := exec.Command(r.bin, "run", r.file, "--commit-every", "300ms")
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd
}

// outcome is where each id ended: "out", or the reject reason. An id
// in two places fails the test.
func (r *hygieneRig) outcome() map[string]string {
	r.t.Helper()
	got := map[string]string{}
	put := func(id, where string) {
		if prev, dup := got[id]; dup {
			r.t.Fatalf("id %s is in the outputs twice: %s and %s", id, prev, where)
		}
		got[id] = where
	}
	for _, row := range readJSONL(r.t, filepath.Join(r.dir, "out/completions.jsonl")) {
		put(row["id"].(string), "out")
	}
	for _, row := range readJSONL(r.t, filepath.Join(r.dir, "out/rejected.jsonl")) {
		rej := row["reject"].(map[string]any)
		put(row["id"].(string), rej["reason"].(string)+" "+fmt.Sprint(rej["detail"]))
	}
	return got
}

// kill -9 at random moments, then the same command to the end: the same
// prompts are kept and rejected (with the same details) as by a run never
// killed, and every id is in the outputs once.
func TestPromptHygieneKillNineThenResume(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	ref := newHygieneRig(t)
	if out, err := exec.Command(ref.bin, "run", ref.file).CombinedOutput(); err != nil {
		t.Fatalf("the run never killed: %v\n%s", err, tail(string(out), 3000))
	}
	want := ref.outcome()
	counts := map[string]int{}
	for _, w := range want {
		counts[strings.Fields(w)[0]]++
	}
	t.Logf("never killed: %v", counts)
	if len(want) != 3000 || counts["near_duplicate"] < 250 || counts["contaminated"] < 20 {
		t.Fatalf("never killed: %d ids, %v: want 3000 ids, most planted duplicates and benchmark copies rejected", len(want), counts)
	}

	r := newHygieneRig(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 9))
	t.Logf("seed %d", seed)
	kills := 0
	for k := range 3 {
		cmd := r.start()
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			break // the run ended first: what is left is the last start's check
		}
		kills++
		fmt.Fprintf(r.log, "=== killed %d\n", k+1)
	}
	if kills == 0 {
		t.Fatal("the run ended before the first kill; make it longer")
	}
	t.Logf("%d kills", kills)
	cmd := r.start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run after the kills: %v", err)
	}
	got := r.outcome()
	var diff []string
	for id, w := range want {
		if g := got[id]; g != w && !(g == "out" && w == "out") {
			diff = append(diff, fmt.Sprintf("%s: %q, never killed %q", id, g, w))
		}
	}
	slices.Sort(diff)
	if len(got) != len(want) || len(diff) > 0 {
		t.Fatalf("%d ids after kills, %d never killed; %d decided otherwise: %v", len(got), len(want), len(diff), diff[:min(len(diff), 10)])
	}
}

// A finished run started again with a looser threshold (and
// --force-new-config): prompts it would now call near duplicates are
// already finished, in the output or the rejects, and stay where they
// are: no id gets a second verdict.
func TestPromptHygieneChangedThresholdKeepsOneVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	r := newHygieneRig(t)
	if out, err := exec.Command(r.bin, "run", r.file).CombinedOutput(); err != nil {
		t.Fatalf("first run: %v\n%s", err, tail(string(out), 3000))
	}
	before := r.outcome()
	out, err := exec.Command(r.bin, "run", r.file, "--set", "unique.threshold=0.2", "--force-new-config").CombinedOutput()
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, tail(string(out), 3000))
	}
	if !strings.Contains(string(out), "skipped by unique: done") {
		t.Fatalf("the looser threshold found no finished prompt to skip:\n%s", tail(string(out), 3000))
	}
	after := r.outcome()
	if len(after) != len(before) {
		t.Fatalf("%d ids after, %d before", len(after), len(before))
	}
	for id, w := range before {
		if after[id] != w {
			t.Errorf("%s: %q, before %q", id, after[id], w)
		}
	}
}

// pipe plan says what the stages before generation rejected in its
// sample and projects it over the prompts left; after the run, pipe report
// counts every prompt they rejected and the decode that spared.
func TestPlanAndReportCountPromptsRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: real processes")
	}
	r := newHygieneRig(t)
	out, err := exec.Command(r.bin, "plan", r.file, "--sample", "600", "--json").Output()
	if err != nil {
		t.Fatalf("pipe plan: %v", err)
	}
	var p struct {
		Left   float64 `json:"prompts_left"`
		Spared *struct {
			Sample   int64                              `json:"sample_rejected"`
			SampleOf int64                              `json:"sample_prompts"`
			Share    float64                            `json:"share"`
			Prompts  struct{ Value, Low, High float64 } `json:"prompts_left_rejected"`
			Decode   float64                            `json:"decode_tokens_spared"`
		} `json:"rejected_before_generation"`
		Mean float64 `json:"output_tokens_per_prompt"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sp := p.Spared
	if sp == nil || sp.Sample == 0 || sp.SampleOf != 600 || sp.Decode <= 0 {
		t.Fatalf("plan: %s", out)
	}
	if want := p.Left * float64(sp.Sample) / 600; math.Abs(sp.Prompts.Value-want) > 1 || sp.Prompts.Low > want || sp.Prompts.High < want ||
		math.Abs(sp.Decode-want*p.Mean) > want {
		t.Fatalf("plan projects %+v of %v left at a mean of %v, want %v prompts", sp, p.Left, p.Mean, want)
	}
	t.Logf("plan: %d of 600 rejected before generation; %.0f of %.0f left projected", sp.Sample, sp.Prompts.Value, p.Left)

	if out, err := exec.Command(r.bin, "run", r.file).CombinedOutput(); err != nil {
		t.Fatalf("pipe run: %v\n%s", err, tail(string(out), 3000))
	}
	out, err = exec.Command(r.bin, "report", "--json", filepath.Join(r.dir, "run")).Output()
	if err != nil {
		t.Fatalf("pipe report: %v", err)
	}
	var rep struct {
		Spared *struct {
			Prompts int64   `json:"prompts"`
			Mean    float64 `json:"mean_output_tokens"`
			Decode  int64   `json:"decode_tokens_spared"`
		} `json:"spared"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, w := range r.outcome() {
		if f := strings.Fields(w)[0]; f == "near_duplicate" || f == "contaminated" {
			removed++
		}
	}
	if s := rep.Spared; s == nil || s.Prompts != int64(removed) || s.Mean <= 0 || math.Abs(float64(s.Decode)-float64(removed)*s.Mean) > 1 {
		t.Fatalf("report: %+v, want %d prompts spared at the mean", rep.Spared, removed)
	}
}
