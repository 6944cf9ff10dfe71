//go:build e2e

package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/sglang/sim"
	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// TestRevalidatePipeline runs pipelines/revalidate.toml on the fixture.
func TestRevalidatePipeline(t *testing.T) {
	testenv.Qwen3Dir(t)
	out := t.TempDir()
	path := filepath.Join(repoRoot(), "pipelines", "revalidate.toml")
	sets := []string{
		"pipeline.run_dir=" + quoteTOML(filepath.Join(out, "run")),
		"train.path=" + quoteTOML(filepath.Join(out, "train.jsonl")),
		"rejects.path=" + quoteTOML(filepath.Join(out, "rejected.jsonl")),
	}
	if dir := os.Getenv("PIPE_QWEN3_DIR"); dir != "" {
		sets = append(sets, "check.tokenizer="+quoteTOML(dir), "tok.tokenizer="+quoteTOML(dir))
	}
	f, probs := pipefile.Load(path, pipefile.Options{Set: sets})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	probs = append(probs, plan.CheckOutputs()...)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	sum, err := engine.Run(context.Background(), plan, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sum.Stages {
		if !s.Balanced() {
			t.Errorf("stage %s: in %d != out %d + rejected %d + failed %d", s.ID, s.In, s.Out, s.Rejected, s.Failed)
		}
	}
	wantReasons := map[string]int64{}
	var wantTrain []string
	for _, fx := range fixtureCompletions {
		if fx.reason != "" {
			wantReasons[fx.reason]++
		} else {
			wantTrain = append(wantTrain, fx.id)
		}
	}
	check := stageSummary(t, sum, "check")
	for r, n := range wantReasons {
		if check.Reasons[r] != n {
			t.Errorf("check rejected %d as %s, want %d (all: %v)", check.Reasons[r], r, n, check.Reasons)
		}
	}
	if tok := stageSummary(t, sum, "tok"); tok.Rejected != 0 {
		t.Errorf("tok rejected %d: %v", tok.Rejected, tok.Reasons)
	}

	train := readRecords(t, filepath.Join(out, "train.jsonl"))
	var gotTrain []string
	for _, r := range train {
		gotTrain = append(gotTrain, r.ID)
		if r.Tokens == nil || r.Tokens.NumLossTokens < 2 || r.Completion == nil || strings.TrimSpace(r.Completion.Answer) == "" {
			t.Errorf("%s: bad training row", r.ID)
		}
		wantSource := "ids"
		if r.Completion.OutputIDs == nil {
			wantSource = "text"
		}
		if r.Tokens.Source != wantSource {
			t.Errorf("%s: row from %s, want %s", r.ID, r.Tokens.Source, wantSource)
		}
		_, differs := r.Meta["retokenized_differs_at"]
		if differs != (r.ID == "ok-native-noncanonical") {
			t.Errorf("%s: retokenized_differs_at present = %v", r.ID, differs)
		}
	}
	slices.Sort(gotTrain)
	slices.Sort(wantTrain)
	if !slices.Equal(gotTrain, wantTrain) {
		t.Errorf("training rows %v, want %v", gotTrain, wantTrain)
	}
	rejected := readRecords(t, filepath.Join(out, "rejected.jsonl"))
	if len(rejected) != len(fixtureCompletions)-len(wantTrain) {
		t.Errorf("%d rejected records, want %d", len(rejected), len(fixtureCompletions)-len(wantTrain))
	}
	for _, r := range rejected {
		if r.Reject == nil || r.Completion == nil || len(r.Messages) == 0 {
			t.Errorf("%s: rejected record lost its content or reason", r.ID)
		}
	}
	var stats []string
	for _, st := range stageSummary(t, sum, "tok").Figures {
		stats = append(stats, st.Name+": "+st.FormatValue())
	}
	t.Logf("check reasons %v; tok: %s", check.Reasons, strings.Join(stats, "; "))
}

func quoteTOML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestEmptyAnswersNeverReachTraining is the end-to-end check:
// read-prompts → generate against simulated SGLang servers (real Qwen3
// tokens, a high empty-answer fault rate and some of every other content
// fault) → validate-thinking → tokenize-and-mask. Every empty answer must
// end on a rejected port with its reason, none in the training rows.
func TestEmptyAnswersNeverReachTraining(t *testing.T) {
	dir := testenv.Qwen3Dir(t)
	tok := testQwen3(t)
	for _, api := range []string{"generate", "chat"} {
		t.Run(api, func(t *testing.T) {
			fleet, err := sim.Start(context.Background(), sim.Config{
				Count: 2, Speed: 200, ThinkTokensMean: 80, AnswerTokensMean: 30, Seed: 6, Tokenizer: tok,
				Faults: []sim.Fault{
					{Kind: sim.FaultEmptyAnswer, Rate: 0.5},
					{Kind: sim.FaultEmptyThinking, Rate: 0.05},
					{Kind: sim.FaultNoThinkEnd, Rate: 0.05},
					{Kind: sim.FaultLeakedThink, Rate: 0.05},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer fleet.Close()
			const n = 300
			var prompts strings.Builder
			for i := range n {
				fmt.Fprintf(&prompts, `{"id":"p%03d","prompt":"Question %d: explain why %d is or is not prime."}`+"\n", i, i, 1000+i)
			}
			src := `
[[stage]]
id   = "prompts"
kind = "read-prompts"
path = "prompts.jsonl"

[[stage]]
id                = "gen"
kind              = "generate"
input             = "prompts"
servers           = ["` + strings.Join(fleet.URLs(), `", "`) + `"]
concurrency       = 16
api               = "` + api + `"
tokenizer         = "` + dir + `"
max_output_tokens = 2048
ready_timeout     = "10s"

[[stage]]
id    = "completions"
kind  = "write-jsonl"
input = "gen"
path  = "out/completions.jsonl"

[[stage]]
id        = "check"
kind      = "validate-thinking"
input     = "gen"
tokenizer = "` + dir + `"

[[stage]]
id        = "tok"
kind      = "tokenize-and-mask"
input     = "check.accepted"
tokenizer = "` + dir + `"

[[stage]]
id    = "train"
kind  = "write-jsonl"
input = "tok"
path  = "out/train.jsonl"

[[stage]]
id    = "rejects"
kind  = "write-jsonl"
input = ["gen.rejected", "check.rejected", "tok.rejected"]
path  = "out/rejected.jsonl"
`
			out, sum, err := runTestPipeline(t, src, map[string]string{"prompts.jsonl": prompts.String()})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range sum.Stages {
				if !s.Balanced() {
					t.Errorf("stage %s: in %d != out %d + rejected %d + failed %d", s.ID, s.In, s.Out, s.Rejected, s.Failed)
				}
			}
			completions := readRecords(t, filepath.Join(out, "out/completions.jsonl"))
			train := readRecords(t, filepath.Join(out, "out/train.jsonl"))
			rejected := readRecords(t, filepath.Join(out, "out/rejected.jsonl"))
			if len(completions) != n || len(train)+len(rejected) != n {
				t.Fatalf("%d completions, %d training rows + %d rejected; want %d each way", len(completions), len(train), len(rejected), n)
			}
			rejectedAs := map[string]string{}
			for _, r := range rejected {
				rejectedAs[r.ID] = r.Reject.Reason
			}
			empty := 0
			for _, c := range completions {
				if strings.TrimSpace(c.Completion.Answer) != "" {
					continue
				}
				empty++
				reason, ok := rejectedAs[c.ID]
				switch {
				case !ok:
					t.Errorf("%s: empty answer not rejected", c.ID)
				// An empty answer after thinking that did close: exactly this reason.
				case c.Completion.Reasoning != "" && !strings.Contains(c.Completion.Reasoning, "</think>") && reason != ReasonEmptyAnswer &&
					((api == "chat" && len(c.Completion.OutputIDs) == 0) || slices.Contains(c.Completion.OutputIDs, 151668)):
					t.Errorf("%s: empty answer rejected as %s", c.ID, reason)
				}
			}
			if empty < n/3 {
				t.Fatalf("only %d of %d answers empty; the fault rate did not apply", empty, n)
			}
			for _, r := range train {
				if strings.TrimSpace(r.Completion.Answer) == "" || r.Tokens == nil {
					t.Errorf("%s: empty answer in the training rows", r.ID)
				}
				// The last turn's loss-masked run decodes to the reply the
				// template renders for this completion.
				runs := maskedRuns(tok, r.Tokens)
				want := "<think>\n" + r.Completion.Reasoning + "\n</think>\n\n" + r.Completion.Answer + "<|im_end|>\n"
				if len(runs) != 1 || runs[0] != want {
					t.Errorf("%s: masked runs %q, want %q", r.ID, runs, want)
				}
			}
			check := stageSummary(t, sum, "check")
			var stats []string
			for _, st := range stageSummary(t, sum, "tok").Figures {
				stats = append(stats, st.Name+": "+st.FormatValue())
			}
			t.Logf("%s API: %d prompts, %d empty answers; check: %d accepted, rejected by reason %v; %d training rows; tok: %s",
				api, n, empty, check.Out, check.Reasons, len(train), strings.Join(stats, "; "))
		})
	}
}

var updateCompletions = flag.Bool("update-completions", false, "rewrite testdata/completions/completions.jsonl")

var fixtureCompletions = []fixtureCompletion{
	{id: "ok-native-thinking", msgs: fxUser, thinking: true, api: "generate",
		output: "<think>\n" + fxThink + "\n</think>\n\n" + fxAnswer, reasoning: fxThink, answer: fxAnswer},
	{id: "ok-chat-thinking", msgs: fxUser, thinking: true, api: "chat",
		output: "<think>\n" + fxThink + "\n</think>\n\n" + fxAnswer, reasoning: fxThink, answer: fxAnswer},
	{id: "ok-native-no-thinking", msgs: fxUser, thinking: false, api: "generate",
		output: fxAnswer, answer: fxAnswer},
	{id: "ok-native-multi-turn", msgs: fxMulti, thinking: true, api: "generate",
		output:    "<think>\nThe user wants the difference. Goroutines are cheap, start with small stacks, and are multiplexed M:N by the runtime.\n</think>\n\nGoroutines are managed by the Go runtime, not the OS: they start with a few KB of stack that grows as needed, are multiplexed onto a small pool of OS threads, and are far cheaper to create and switch between, so a program can run hundreds of thousands of them.",
		reasoning: "The user wants the difference. Goroutines are cheap, start with small stacks, and are multiplexed M:N by the runtime.",
		answer:    "Goroutines are managed by the Go runtime, not the OS: they start with a few KB of stack that grows as needed, are multiplexed onto a small pool of OS threads, and are far cheaper to create and switch between, so a program can run hundreds of thousands of them."},
	{id: "ok-native-noncanonical", msgs: fxUser, thinking: true, api: "generate",
		output: "<think>\n" + fxThink + "\n</think>\n\n" + fxAnswer, reasoning: fxThink, answer: fxAnswer,
		// The model sampled " spell" as " sp" + "ell": valid, but not what
		// encoding the text gives. The row keeps the sampled ids.
		ids: func(encode func(string) []int) []int {
			return slices.Concat(encode("<think>\nLet me"), encode(" sp"), encode("ell"), encode(strings.TrimPrefix("<think>\n"+fxThink, "<think>\nLet me spell")+"\n</think>\n\n"+fxAnswer))
		}},
	{id: "bad-empty-answer-native", msgs: fxUser, thinking: true, api: "generate",
		output: "<think>\n" + fxThink + "\n</think>\n\n", reasoning: fxThink, reason: ReasonEmptyAnswer},
	{id: "bad-empty-answer-chat", msgs: fxUser, thinking: true, api: "chat",
		output: "<think>\n" + fxThink + "\n</think>\n\n", reasoning: fxThink, reason: ReasonEmptyAnswer},
	{id: "bad-empty-thinking", msgs: fxUser, thinking: true, api: "generate",
		output: "<think>\n\n</think>\n\n" + fxAnswer, answer: fxAnswer, reason: ReasonEmptyThinking},
	{id: "bad-unclosed-think", msgs: fxUser, thinking: true, api: "generate",
		output: "<think>\n" + fxThink, reasoning: fxThink, reason: ReasonThinkUnclosed},
	{id: "bad-truncated", msgs: fxUser, thinking: true, api: "generate", finish: "length",
		output: "<think>\n" + fxThink[:40], reasoning: fxThink[:40], reason: ReasonTruncated},
	{id: "bad-leaked-marker", msgs: fxUser, thinking: true, api: "generate",
		output:    "<think>\n" + fxThink + "\n</think>\n\nThere are 3.\n</think>\n\n" + fxAnswer,
		reasoning: fxThink, answer: "There are 3.\n</think>\n\n" + fxAnswer, reason: ReasonThinkLeaked},
	{id: "bad-placeholder", msgs: fxUser, thinking: true, api: "chat",
		output: "<think>\n" + fxThink + "\n</think>\n\nN/A", reasoning: fxThink, answer: "N/A", reason: ReasonPlaceholderAnswer},
	{id: "bad-loop", msgs: fxUser, thinking: true, api: "generate",
		output: "<think>\n" + fxLoop + "\n</think>\n\n" + fxAnswer, reasoning: fxLoop, answer: fxAnswer, reason: ReasonRepetition},
}

// buildFixture renders the fixture records with the real tokenizer and chat
// template, as generate would have recorded them.
func buildFixture(t *testing.T) []byte {
	t.Helper()
	tok, err := tokenize.Load(testenv.Qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i, fx := range fixtureCompletions {
		c := &record.Completion{Reasoning: fx.reasoning, Answer: fx.answer, FinishReason: fx.finish,
			LatencySeconds: 3.2 + float64(i)/10, Server: "http://127.0.0.1:30000", Attempts: 1}
		if c.FinishReason == "" {
			c.FinishReason, c.MatchedStop = "stop", 151645
		}
		var msgs []chat.Message
		for _, m := range fx.msgs {
			msgs = append(msgs, chat.NewMessage(m.Role, m.Content))
		}
		think := fx.thinking
		prompt, err := tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true, EnableThinking: &think})
		if err != nil {
			t.Fatal(err)
		}
		promptIDs := tok.Encode(prompt)
		outIDs := tok.Encode(fx.output)
		if fx.ids != nil {
			outIDs = fx.ids(tok.Encode)
			if tok.Decode(outIDs) != fx.output {
				t.Fatalf("%s: ids decode to %q", fx.id, tok.Decode(outIDs))
			}
		}
		if c.FinishReason == "stop" {
			outIDs = append(outIDs, 151645)
		}
		c.PromptTokens, c.CompletionTokens = len(promptIDs), len(outIDs)
		switch fx.api {
		case "generate":
			c.PromptIDs, c.OutputIDs = promptIDs, outIDs
			c.Request = map[string]any{"api": "generate", "enable_thinking": fx.thinking, "sampling_params": map[string]any{"max_new_tokens": 4096, "temperature": 0.6, "top_p": 0.95}}
		case "chat":
			c.Request = map[string]any{"api": "chat", "model": "Qwen/Qwen3-8B", "max_tokens": 4096, "chat_template_kwargs": map[string]any{"enable_thinking": fx.thinking}, "separate_reasoning": true}
		}
		rec := record.Record{ID: fx.id, Messages: fx.msgs, Completion: c}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// TestCompletionsFixture keeps testdata/completions/completions.jsonl what
// buildFixture makes (go test -run TestCompletionsFixture -update-completions).
func TestCompletionsFixture(t *testing.T) {
	path := filepath.Join(repoRoot(), "testdata", "completions", "completions.jsonl")
	want := buildFixture(t)
	if *updateCompletions {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./stages -run TestCompletionsFixture -update-completions", path)
	}
}

var realQwen3 struct {
	once sync.Once
	tok  *tokenize.Tokenizer
	err  error
}

// testQwen3 loads the real Qwen3 tokenizer once per test binary: for the
// e2e tests whose servers (pipe sim --tokenizer) or references use it,
// where the checked-in fixture (testTokenizer) would not agree id for id.
func testQwen3(t testing.TB) *tokenize.Tokenizer {
	t.Helper()
	dir := testenv.Qwen3Dir(t)
	realQwen3.once.Do(func() { realQwen3.tok, realQwen3.err = tokenize.Load(dir) })
	if realQwen3.err != nil {
		t.Fatal(realQwen3.err)
	}
	return realQwen3.tok
}
