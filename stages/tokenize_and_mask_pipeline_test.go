package stages

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
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
	msgs     []record.Message
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
	fxUser   = []record.Message{{Role: "user", Content: "How many r's are in the word \"strawberry\"?"}}
	fxThink  = "Let me spell it out: s-t-r-a-w-b-e-r-r-y. The r's are at positions 3, 8 and 9. That's three."
	fxAnswer = "There are **3** r's in \"strawberry\": s-t-**r**-a-w-b-e-**r**-**r**-y."
	fxMulti  = []record.Message{
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
	tok := testTokenizer(t)
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
