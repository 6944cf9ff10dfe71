package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

var updateCompletions = flag.Bool("update-completions", false, "rewrite testdata/completions/completions.jsonl")

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// fixtureCompletion is one record of testdata/completions/completions.jsonl
// and what pipelines/revalidate.toml must do with it.
type fixtureCompletion struct {
	id       string
	msgs     []pipeline.Message
	thinking bool
	api      string // "generate" (ids) or "chat"
	// output is the raw generated text (the think block and answer); the
	// completion's fields are what a parser makes of it.
	output            string
	reasoning, answer string
	finish            string // default "stop"
	// ids overrides the output ids (e.g. a non-canonical tokenization).
	ids    func(encode func(string) []int) []int
	reason string // expected rejection reason; "" = a training row
}

var (
	fxUser   = []pipeline.Message{{Role: "user", Content: "How many r's are in the word \"strawberry\"?"}}
	fxThink  = "Let me spell it out: s-t-r-a-w-b-e-r-r-y. The r's are at positions 3, 8 and 9. That's three."
	fxAnswer = "There are **3** r's in \"strawberry\": s-t-**r**-a-w-b-e-**r**-**r**-y."
	fxMulti  = []pipeline.Message{
		{Role: "system", Content: "You answer in one short paragraph."},
		{Role: "user", Content: "What is a goroutine?"},
		{Role: "assistant", Content: "A goroutine is a function running concurrently with others in the same address space, scheduled by the Go runtime onto OS threads."},
		{Role: "user", Content: "And how is it different from a thread?"},
	}
	fxLoop = strings.Repeat("Wait, let me recount the letters one more time to be sure. s, t, r, a, w, b, e, r, r, y. ", 30)
)

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
	tok := testQwen3(t)
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i, fx := range fixtureCompletions {
		c := &pipeline.Completion{Reasoning: fx.reasoning, Answer: fx.answer, FinishReason: fx.finish,
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
		rec := pipeline.Record{ID: fx.id, Messages: fx.msgs, Completion: c}
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

// TestRevalidatePipeline runs pipelines/revalidate.toml on the fixture.
func TestRevalidatePipeline(t *testing.T) {
	testQwen3Dir(t)
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
	f, probs := pipeline.LoadFile(path, pipeline.LoadOptions{Set: sets})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	probs = append(probs, plan.CheckOutputs()...)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	sum, err := pipeline.Run(context.Background(), plan, pipeline.RunOptions{})
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
	for _, st := range stageSummary(t, sum, "tok").Stats {
		stats = append(stats, st.Name+": "+st.Value)
	}
	t.Logf("check reasons %v; tok: %s", check.Reasons, strings.Join(stats, "; "))
}

func quoteTOML(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
