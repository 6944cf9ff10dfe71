package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// contaminationEdits are how a benchmark prompt reaches a prompt set:
// as it is, wrapped in an instruction, lightly reworded (a word in 12),
// heavily reworded (a word in 4, its sentences in another order), or as
// the second turn of a conversation.
var contaminationEdits = []string{"verbatim", "wrapped", "light-paraphrase", "heavy-paraphrase", "second-turn"}

// boxed is the instruction benchmark rows and training prompts share.
const boxed = "Please reason step by step, and put your final answer within \\boxed{}."

type plantedBench struct {
	files  map[string]string // reference files and the prompts file
	truth  map[string]string // contaminated prompt id → its edit
	source map[string]string // contaminated prompt id → "set row N"
}

func plantedBenchmarks(t *testing.T, seed uint64) *plantedBench {
	r := rand.New(rand.NewPCG(seed, 11))
	vocab := plantedWords(r, 6000)
	text := func(words int) string {
		w := make([]string, words)
		for i := range w {
			if r.IntN(10) < 4 {
				w[i] = plantedFunctionWords[r.IntN(len(plantedFunctionWords))]
			} else {
				w[i] = vocab[r.IntN(len(vocab))]
			}
			if r.IntN(10) == 0 {
				w[i] = fmt.Sprint(r.IntN(500))
			}
		}
		return strings.Join(w, " ") + "."
	}
	b := &plantedBench{files: map[string]string{}, truth: map[string]string{}, source: map[string]string{}}
	type ref struct {
		set  string
		row  int
		text string
	}
	var refs, turns []ref
	var gsm, mt bytes.Buffer
	for i := range 300 { // GSM8K's shape: a question, the shared instruction after it
		q := text(25+r.IntN(35)) + " " + boxed
		refs = append(refs, ref{"gsm_like", i + 1, q})
		json.NewEncoder(&gsm).Encode(map[string]any{"question": q, "answer": fmt.Sprint(r.IntN(100))})
	}
	for i := range 80 { // MT-Bench's: two turns
		t1, t2 := text(15+r.IntN(25)), text(10+r.IntN(15))
		refs = append(refs, ref{"mt_like", i + 1, t1})
		turns = append(turns, ref{"mt_like", i + 1, t2})
		json.NewEncoder(&mt).Encode(map[string]any{"question_id": 81 + i, "turns": []string{t1, t2}})
	}
	var code []string
	for i := range 160 { // HumanEval's, in Parquet: a "prompt" column
		p := fmt.Sprintf("def f%d(x):\n    \"\"\" %s\n    \"\"\"\n", i, text(12+r.IntN(20)))
		code = append(code, p)
		refs = append(refs, ref{"code_like", i + 1, p})
	}
	b.files["bench/gsm_like.jsonl"], b.files["bench/mt_like.jsonl"] = gsm.String(), mt.String()
	b.files["bench/code_like.parquet"] = parquetOfStrings(t, "prompt", code)

	reword := func(s string, every int) string {
		w := strings.Fields(s)
		for i := r.IntN(every); i < len(w); i += every {
			w[i] = vocab[r.IntN(len(vocab))]
		}
		return strings.Join(w, " ")
	}
	var lines []string
	add := func(id string, msgs ...string) {
		var m []map[string]string
		for i, c := range msgs {
			m = append(m, map[string]string{"role": []string{"user", "assistant"}[i%2], "content": c})
		}
		line, _ := json.Marshal(map[string]any{"id": id, "messages": m})
		lines = append(lines, string(line))
	}
	for i := range 3000 { // clean prompts; one in five ends with the shared instruction
		p := text(10 + r.IntN(80))
		if i%5 == 0 {
			p += " " + boxed
		}
		add(fmt.Sprintf("c%05d", i), p)
	}
	for i := range 500 {
		edit := contaminationEdits[i%len(contaminationEdits)]
		id := fmt.Sprintf("x%05d", i)
		var rf ref
		var msgs []string
		switch edit {
		case "verbatim":
			rf = refs[r.IntN(len(refs))]
			msgs = []string{rf.text}
		case "wrapped":
			rf = refs[r.IntN(len(refs))]
			msgs = []string{"Solve the following. " + rf.text + " Show your work."}
		case "light-paraphrase":
			rf = refs[r.IntN(len(refs))]
			msgs = []string{reword(rf.text, 12)}
		case "heavy-paraphrase":
			rf = refs[r.IntN(len(refs))]
			parts := strings.SplitAfter(reword(rf.text, 4), ".")
			r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
			msgs = []string{strings.Join(parts, " ")}
		case "second-turn":
			rf = turns[r.IntN(len(turns))]
			msgs = []string{text(20), text(30), rf.text}
		}
		b.truth[id], b.source[id] = edit, fmt.Sprintf("%s row %d", rf.set, rf.row)
		add(id, msgs...)
	}
	r.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	b.files["p.jsonl"] = strings.Join(lines, "\n") + "\n"
	return b
}

// parquetOfStrings is a Parquet file of one string column.
func parquetOfStrings(t *testing.T, column string, values []string) string {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: column, Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	bld.Field(0).(*array.StringBuilder).AppendValues(values, nil)
	rec := bld.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	if err := pqarrow.WriteTable(tbl, &buf, 64, nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

const decontaminatePipeline = `
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "p.jsonl"

[[stage]]
id         = "clean"
kind       = "decontaminate"
input      = "prompts"
references = ["bench/gsm_like.jsonl", "bench/mt_like.jsonl", "bench/code_like.parquet"]
%s

[[stage]]
id    = "kept"
kind  = "write-jsonl"
input = "clean"
path  = "out/kept.jsonl"

[[stage]]
id    = "dropped"
kind  = "write-jsonl"
input = "clean.rejected"
path  = "out/dropped.jsonl"
`

// TestDecontaminateAgainstPlantedTruth measures the kind's defaults on
// 3,000 clean prompts (600 of them ending with the instruction every
// GSM-like reference row has) and 500 planted benchmark prompts, 100 of
// each edit, from three reference sets (two JSONL, one Parquet). The
// floors are the figures measured, less a margin: see
// docs/prompt-hygiene.md.
func TestDecontaminateAgainstPlantedTruth(t *testing.T) {
	b := plantedBenchmarks(t, 1)
	keys := []string{""}
	if k := os.Getenv("PIPE_DECONT_KEYS"); k != "" { // for tuning: PIPE_DECONT_KEYS='ngram = 13|ngram = 5'
		keys = strings.Split(k, "|")
	}
	for _, k := range keys {
		dir, sum, err := runTestPipeline(t, fmt.Sprintf(decontaminatePipeline, k), b.files)
		if err != nil {
			t.Fatal(err)
		}
		kept := readRecords(t, filepath.Join(dir, "out/kept.jsonl"))
		dropped := readRecords(t, filepath.Join(dir, "out/dropped.jsonl"))
		if len(kept)+len(dropped) != 3500 {
			t.Fatalf("%d kept + %d rejected, want 3500", len(kept), len(dropped))
		}
		found, right := map[string]int{}, 0
		for _, r := range dropped {
			if r.Reject == nil || r.Reject.Reason != ReasonContaminated {
				t.Fatalf("%s: %+v", r.ID, r.Reject)
			}
			edit, ok := b.truth[r.ID]
			if !ok {
				t.Logf("false: %s %s", r.ID, r.Reject.Detail)
				continue
			}
			right++
			found[edit]++
			if !strings.Contains(r.Reject.Detail, "with "+b.source[r.ID]) {
				t.Errorf("%s: %q, want it to name %s", r.ID, r.Reject.Detail, b.source[r.ID])
			}
		}
		precision := float64(right) / float64(max(1, len(dropped)))
		recall := map[string]float64{}
		line := fmt.Sprintf("%-12s precision %.3f (%d rejected), recall %.3f:", k, precision, len(dropped), float64(right)/500)
		for _, e := range contaminationEdits {
			recall[e] = float64(found[e]) / 100
			line += fmt.Sprintf(" %s %.2f", e, recall[e])
		}
		t.Log(line)
		if f, _ := figure.Find(stageSummary(t, sum, "clean").Figures, "reference_texts"); f.Value != 300+160+160 {
			t.Errorf("reference_texts %v, want 620 (300 + 2×80 turns + 160)", f.Value)
		}
		if k != "" {
			continue
		}
		// Measured with the defaults: precision 1.000; recall 1.00 of
		// verbatim, wrapped, lightly reworded and second-turn copies, 0.00
		// of heavily reworded ones (a word in 4 changed leaves no 8 words
		// in a row: exact n-gram overlap cannot see them, in any tool that
		// uses it). Without the boilerplate cut, precision was 0.634.
		floors := map[string]float64{"verbatim": 1, "wrapped": 1, "second-turn": 1, "light-paraphrase": 0.97, "heavy-paraphrase": 0}
		for _, e := range contaminationEdits {
			if recall[e] < floors[e] {
				t.Errorf("recall of %s: %.2f, below its floor %.2f", e, recall[e], floors[e])
			}
		}
		if precision < 1 {
			t.Errorf("precision %.3f, want 1", precision)
		}
	}
}

// A replay: completions a run made long ago, read back and checked
// against a benchmark without a GPU. The record with the benchmark's
// question is rejected with its completion kept; the near duplicate of a
// kept one too.
func TestPromptHygieneInAReplay(t *testing.T) {
	q := "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether?"
	mk := func(id, prompt string) string {
		rec := completionRecord(goodCompletion())
		rec.ID = id
		rec.Messages = []record.Message{{Role: "user", Content: prompt}}
		return completionLine(t, rec)
	}
	lines := []string{
		mk("a", "Explain how tides are caused by the moon and the sun, with an example."),
		mk("b", "Solve: "+q),
		mk("c", "Hi! Explain how tides are caused by the moon and the sun, with an example."),
		mk("d", "Write a haiku about autumn leaves falling in a quiet garden."),
	}
	files := map[string]string{
		"c.jsonl":           strings.Join(lines, "\n") + "\n",
		"bench/gsm8k.jsonl": fmt.Sprintf("{\"question\": %q, \"answer\": \"72\"}\n", q),
	}
	dir, _, err := runTestPipeline(t, `
[[stage]]
id   = "in"
kind = "read-completions"
path = "c.jsonl"

[[stage]]
id    = "unique"
kind  = "dedupe-near-duplicates"
input = "in"

[[stage]]
id         = "clean"
kind       = "decontaminate"
input      = "unique"
references = ["bench/gsm8k.jsonl"]

[[stage]]
id    = "good"
kind  = "write-jsonl"
input = "clean"
path  = "out/good.jsonl"

[[stage]]
id    = "bad"
kind  = "write-jsonl"
input = ["unique.rejected", "clean.rejected"]
path  = "out/bad.jsonl"
`, files)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range readRecords(t, filepath.Join(dir, "out/good.jsonl")) {
		got[r.ID] = "good"
	}
	for _, r := range readRecords(t, filepath.Join(dir, "out/bad.jsonl")) {
		if r.Completion == nil || r.Completion.Answer == "" {
			t.Errorf("%s: the rejected record lost its completion", r.ID)
		}
		got[r.ID] = r.Reject.Reason + ": " + r.Reject.Detail
	}
	want := map[string]string{
		"a": "good", "d": "good",
		"b": `contaminated: shares "natalia sold clips to 48 of her friends in april and then she sold half as many clips in may how many clips did natalia sell altogether" with gsm8k row 1`,
		"c": `near_duplicate: nearly the same as "a", kept (estimated similarity 0.96)`, // Jaccard 13/14 = 0.93
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q, want %q", id, got[id], w)
		}
	}
}

// What pipe check and the start say of bad reference settings and files:
// the file and line, what is wrong, what is allowed.
func TestDecontaminateBadReferences(t *testing.T) {
	c := &decontaminateConfig{References: []string{"a/gsm8k.jsonl", "b/gsm8k.parquet", "c/notes.txt"}, ReferenceText: "question ??", NGram: 8, Text: "user"}
	var msgs []string
	for _, err := range c.Validate() {
		msgs = append(msgs, err.Error())
	}
	got := strings.Join(msgs, "\n")
	for _, want := range []string{"reference_text: ", `b/gsm8k.parquet are both named "gsm8k"`, `c/notes.txt: a reference file is .jsonl, .json, .ndjson or .parquet, not ".txt"`} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant one with %q", got, want)
		}
	}

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct{ name, content, want string }{
		{"numbers.jsonl", "{\"question\": \"What is two plus two, said in words?\"}\n{\"question\": 4}\n", `numbers.jsonl:2: reference_text "question ?? problem ?? prompt ?? turns ?? instruction ?? text" gave float64 4; want a string or a list of strings`},
		{"torn.jsonl", "{\"question\": \"What is two plus two?\"}\n{\"question\": \"What is\n", "torn.jsonl:2: want one JSON object a line"},
		{"other.jsonl", "{\"title\": \"no text field here\"}\n", `other.jsonl:1: reference_text "question ?? problem ?? prompt ?? turns ?? instruction ?? text" gave nothing (the row has none of those fields)`},
	} {
		d := &decontaminate{cfg: decontaminateConfig{References: []string{write(tt.name, tt.content)},
			ReferenceText: "question ?? problem ?? prompt ?? turns ?? instruction ?? text", NGram: 8, Text: "user"}}
		err := d.Open(context.Background(), &pipeline.Env{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}
