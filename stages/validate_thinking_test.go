package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// thinkTestEmitter collects what a processor emits, by port.
type thinkTestEmitter struct {
	emitted  map[string][]*record.Record
	rejected []*record.Record
}

func newThinkTestEmitter() *thinkTestEmitter {
	return &thinkTestEmitter{emitted: map[string][]*record.Record{}}
}

func (e *thinkTestEmitter) Emit(port string, rec *record.Record) error {
	e.emitted[port] = append(e.emitted[port], rec)
	return nil
}

func (e *thinkTestEmitter) Reject(rec *record.Record, reason, detail string) error {
	rec.Reject = &record.Rejection{Stage: "test", Reason: reason, Detail: detail}
	e.rejected = append(e.rejected, rec)
	return nil
}

func (e *thinkTestEmitter) Fail(rec *record.Record, err error, attempts int) error {
	return errors.New("unexpected Fail: " + err.Error())
}

func (e *thinkTestEmitter) Took(int)                          {}
func (e *thinkTestEmitter) SkipFinished(string) bool          { return false }
func (e *thinkTestEmitter) Skip(*record.Record, string) error { return nil }

var testTok struct {
	tok *tokenize.Tokenizer
	err error
	dir string
}

// testTokenizer loads the checked-in Qwen3-like tokenizer once per test
// binary (testenv.TinyQwen3Dir: Qwen3's template, added tokens and ids, a
// smaller vocabulary), so these tables run on a fresh clone.
func testTokenizer(t testing.TB) *tokenize.Tokenizer {
	t.Helper()
	dir := testenv.TinyQwen3Dir(t)
	if testTok.tok == nil && testTok.err == nil {
		testTok.tok, testTok.err = tokenize.Load(dir)
		testTok.dir = dir
	}
	if testTok.err != nil {
		t.Fatal(testTok.err)
	}
	return testTok.tok
}

// A realistic Qwen3 thinking-mode completion and variants of it.
const (
	goodReasoning = "Okay, the user wants the derivative of x^3 * sin(x). That's a product, so I'll use the product rule: (uv)' = u'v + uv'.\n\nHere u = x^3, so u' = 3x^2; v = sin(x), so v' = cos(x).\n\nSo the derivative is 3x^2 sin(x) + x^3 cos(x). I could factor out x^2: x^2(3 sin(x) + x cos(x)). Let me double-check by expanding — yes, both terms match."
	goodAnswer    = "Using the product rule with u = x³ and v = sin x:\n\n$$\\frac{d}{dx}\\left[x^3 \\sin x\\right] = 3x^2 \\sin x + x^3 \\cos x = x^2\\,(3\\sin x + x\\cos x).$$"
)

func goodCompletion() *record.Completion {
	return &record.Completion{
		Reasoning: goodReasoning, Answer: goodAnswer, FinishReason: "stop", MatchedStop: 151645,
		PromptTokens: 24, CompletionTokens: 180,
		Request: map[string]any{"api": "chat", "chat_template_kwargs": map[string]any{"enable_thinking": true}},
	}
}

func completionRecord(c *record.Completion) *record.Record {
	return &record.Record{
		ID:         "q-0001",
		Messages:   []record.Message{{Role: "user", Content: "What is the derivative of x^3 sin(x)?"}},
		Completion: c,
	}
}

// loop is degenerate thinking: the model repeats itself until it stops.
func loop(n int) string {
	var b strings.Builder
	b.WriteString("Let me compute 17 * 23. ")
	for range n {
		b.WriteString("Wait, let me recompute that: 17 * 23 is 17 * 20 plus 17 * 3, which is 340 plus 51. ")
	}
	return b.String()
}

func TestValidateThinkingReasons(t *testing.T) {
	tok := testTokenizer(t)
	// ids builds output ids as a native /generate response has them.
	ids := func(text string) []int { return append(tok.Encode(text), 151645) }

	tests := []struct {
		name    string
		cfg     func(*validateThinkingConfig)
		change  func(c *record.Completion)
		history []record.Message // replaces the prompt turns when set
		reason  string           // "" = accepted
	}{
		{name: "good", change: func(c *record.Completion) {}},
		{name: "good with output ids", change: func(c *record.Completion) {
			c.OutputIDs = ids("<think>\n" + goodReasoning + "\n</think>\n\n" + goodAnswer)
		}},
		{name: "thinking then empty answer", reason: ReasonEmptyAnswer, change: func(c *record.Completion) {
			c.Answer = ""
			c.OutputIDs = ids("<think>\n" + goodReasoning + "\n</think>\n\n")
		}},
		{name: "whitespace answer", reason: ReasonEmptyAnswer, change: func(c *record.Completion) { c.Answer = "\n\n  \t\n" }},
		{name: "empty thinking", reason: ReasonEmptyThinking, change: func(c *record.Completion) {
			c.Reasoning = ""
			c.OutputIDs = ids("<think>\n\n</think>\n\n" + goodAnswer)
		}},
		{name: "whitespace thinking", reason: ReasonEmptyThinking, change: func(c *record.Completion) { c.Reasoning = " \n\n " }},
		{name: "empty thinking with thinking off is fine", change: func(c *record.Completion) {
			c.Reasoning = ""
			c.Request = map[string]any{"enable_thinking": false}
		}},
		{name: "thinking forced on overrides the request", reason: ReasonEmptyThinking,
			cfg:    func(c *validateThinkingConfig) { c.Thinking = "on" },
			change: func(c *record.Completion) { c.Reasoning = ""; c.Request = map[string]any{"enable_thinking": false} }},
		// Ids of another tokenizer: said as such, not as think_unclosed.
		{name: "ids that do not spell the text", reason: ReasonIDsTextMismatch, change: func(c *record.Completion) {
			c.OutputIDs = ids("an entirely different output of another tokenizer")
		}},
		// Forced thinking: the prompt opened the reasoning.
		{name: "forced: good output without <think>", change: func(c *record.Completion) {
			c.Request = map[string]any{"enable_thinking": true, "thinking_forced": true}
			c.OutputIDs = ids(goodReasoning + "\n</think>\n\n" + goodAnswer)
		}},
		{name: "forced: a <think> of its own", reason: ReasonThinkRepeated, change: func(c *record.Completion) {
			c.Request = map[string]any{"enable_thinking": true, "thinking_forced": true}
			c.OutputIDs = ids("<think>\n" + goodReasoning + "\n</think>\n\n" + goodAnswer)
		}},
		// Chat, no ids: an output that stopped by itself with no answer
		// after its reasoning is an empty answer (whether </think> came
		// cannot be told); one the length limit cut there is unclosed.
		{name: "forced: empty answer after reasoning (chat, no ids)", reason: ReasonEmptyAnswer, change: func(c *record.Completion) {
			c.Request = map[string]any{"enable_thinking": true, "thinking_forced": true}
			c.Answer = ""
		}},
		{name: "forced: cut inside the reasoning (chat, no ids)", reason: ReasonThinkUnclosed, cfg: func(c *validateThinkingConfig) { c.Disable = []string{ReasonTruncated} },
			change: func(c *record.Completion) {
				c.Request = map[string]any{"enable_thinking": true, "thinking_forced": true}
				c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			}},
		// Cut by the length limit where the row fills the trainer's
		// max_length: kept, whatever the cut left unsaid.
		{name: "cut in thinking, row full: kept", cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			c.PromptTokens, c.CompletionTokens = 96, 4000
			c.Reasoning = goodReasoning[:200]
			c.OutputIDs = tok.Encode("<think>\n" + c.Reasoning) // no end of turn: cut
		}},
		{name: "cut in answer, row full: kept", cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop = "length", nil
			c.Answer = goodAnswer[:3]
			c.PromptTokens, c.CompletionTokens = 96, 4000
		}},
		{name: "forced chat cut in thinking, row full: kept", cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.Request = map[string]any{"enable_thinking": true, "thinking_forced": true}
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			c.PromptTokens, c.CompletionTokens = 96, 4000
		}},
		{name: "cut one token short of the row: truncated", reason: ReasonTruncated, cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			c.PromptTokens, c.CompletionTokens = 96, 3999
		}},
		// The server counted the prompt one token shorter than generate
		// did: the cut is still at the room the row had.
		{name: "cut at the row's room generate set: kept", cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			c.PromptTokens, c.CompletionTokens = 95, 4000
			c.Request = map[string]any{"enable_thinking": true, "max_tokens": float64(4000), RequestRowMaxLength: float64(4096)}
		}},
		{name: "cut at max_output_tokens below the room: truncated", reason: ReasonTruncated, cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			c.PromptTokens, c.CompletionTokens = 95, 1024
			c.Request = map[string]any{"enable_thinking": true, "max_tokens": float64(1024)}
		}},
		// Sound reasoning, then a loop until the row is full: under half
		// of the whole, but the part the limit cut loops.
		{name: "cut at length in a late loop: repetition", reason: ReasonRepetition, cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			var b strings.Builder
			for i := range 120 { // 600 words, no 10-gram twice
				fmt.Fprintf(&b, "step %d weighs factor %d. ", i, 7*i+3)
			}
			c.Reasoning = b.String() + strings.Repeat("so the answer is twelve and so ", 43)
			c.PromptTokens, c.CompletionTokens = 96, 4000
		}},
		{name: "row full but length = reject: truncated", reason: ReasonTruncated, cfg: func(c *validateThinkingConfig) { c.MaxLength, c.Length = 4096, "reject" },
			change: func(c *record.Completion) {
				c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
				c.PromptTokens, c.CompletionTokens = 96, 4000
			}},
		{name: "row full, but a marker leaked: still rejected", reason: ReasonThinkLeaked, cfg: func(c *validateThinkingConfig) { c.MaxLength = 4096 }, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop = "length", nil
			c.Answer = "<think>\n" + goodAnswer
			c.PromptTokens, c.CompletionTokens = 96, 4000
		}},
		{name: "forced: stopped inside the reasoning (ids)", reason: ReasonThinkUnclosed, change: func(c *record.Completion) {
			c.Request = map[string]any{"enable_thinking": true, "thinking_forced": true}
			c.Answer = ""
			c.OutputIDs = ids(goodReasoning)
		}},
		{name: "unclosed think block (EOS inside thinking)", reason: ReasonThinkUnclosed, change: func(c *record.Completion) {
			c.Answer = ""
			c.OutputIDs = ids("<think>\n" + goodReasoning)
		}},
		{name: "truncated in thinking", reason: ReasonTruncated, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop, c.Answer = "length", nil, ""
			c.CompletionTokens = 4096
		}},
		{name: "truncated in answer", reason: ReasonTruncated, change: func(c *record.Completion) {
			c.FinishReason, c.MatchedStop = "length", nil
			c.Answer = goodAnswer[:40]
		}},
		{name: "aborted", reason: ReasonAborted, change: func(c *record.Completion) { c.FinishReason = "abort" }},
		{name: "end marker leaked into the answer", reason: ReasonThinkLeaked, change: func(c *record.Completion) {
			c.Answer = goodAnswer[:30] + "\n</think>\n\n" + goodAnswer[30:]
		}},
		{name: "start marker leaked into the answer", reason: ReasonThinkLeaked, change: func(c *record.Completion) {
			c.Answer = "<think>\nHmm.\n" + goodAnswer
		}},
		{name: "thinking opens twice", reason: ReasonThinkRepeated, change: func(c *record.Completion) {
			c.Reasoning = "<think>\n" + goodReasoning
		}},
		{name: "two end markers in the output ids", reason: ReasonThinkRepeated, change: func(c *record.Completion) {
			// The answer text was cleaned by a parser, but the ids show it.
			c.OutputIDs = ids("<think>\n" + goodReasoning + "\n</think>\n\n</think>\n\n" + goodAnswer)
		}},
		{name: "placeholder answer", reason: ReasonPlaceholderAnswer, change: func(c *record.Completion) { c.Answer = "  N/A\n" }},
		{name: "ellipsis answer", reason: ReasonPlaceholderAnswer, change: func(c *record.Completion) { c.Answer = "..." }},
		{name: "answer too short in tokens", reason: ReasonAnswerTooShort,
			// 4 characters but 2 tokens: the minimum counts tokens.
			cfg:    func(c *validateThinkingConfig) { c.MinAnswerLength = 3 },
			change: func(c *record.Completion) { c.Answer = "The." }},
		{name: "thinking too short", reason: ReasonThinkingTooShort,
			cfg:    func(c *validateThinkingConfig) { c.MinThinkingLength = 32 },
			change: func(c *record.Completion) { c.Reasoning = "Product rule." }},
		{name: "degenerate thinking loop", reason: ReasonRepetition, change: func(c *record.Completion) { c.Reasoning = loop(60) }},
		{name: "degenerate answer loop", reason: ReasonRepetition, change: func(c *record.Completion) {
			c.Answer = strings.Repeat("The answer is 3x^2 sin x + x^3 cos x. ", 40)
		}},
		{name: "no completion", reason: ReasonNoCompletion, change: nil},
		{name: "empty earlier assistant turn", reason: ReasonEmptyAnswer, history: []record.Message{
			{Role: "user", Content: "Differentiate x^2."}, {Role: "assistant", Content: "\n"},
			{Role: "user", Content: "What is the derivative of x^3 sin(x)?"}}, change: func(c *record.Completion) {}},
		{name: "marker in an earlier assistant turn", reason: ReasonThinkLeaked, history: []record.Message{
			{Role: "user", Content: "Differentiate x^2."}, {Role: "assistant", Content: "</think>\n\n2x"},
			{Role: "user", Content: "What is the derivative of x^3 sin(x)?"}}, change: func(c *record.Completion) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testValidateConfig(t)
			if tt.cfg != nil {
				tt.cfg(cfg)
			}
			v := newValidateThinking(cfg)
			v.useTokenizer(tok)
			rec := completionRecord(goodCompletion())
			if tt.history != nil {
				rec.Messages = tt.history
			}
			if tt.change == nil {
				rec.Completion = nil
			} else {
				tt.change(rec.Completion)
			}
			before := *rec
			e := newThinkTestEmitter()
			if err := v.Process(context.Background(), rec, e); err != nil {
				t.Fatal(err)
			}
			if tt.reason == "" {
				if len(e.rejected) > 0 {
					t.Fatalf("rejected as %s: %s", e.rejected[0].Reject.Reason, e.rejected[0].Reject.Detail)
				}
				if len(e.emitted["accepted"]) != 1 {
					t.Fatalf("emitted %v, want one record on accepted", e.emitted)
				}
				return
			}
			if len(e.rejected) != 1 || len(e.emitted) != 0 {
				t.Fatalf("accepted; want rejected as %s", tt.reason)
			}
			got := e.rejected[0]
			if got.Reject.Reason != tt.reason {
				t.Fatalf("rejected as %s (%s), want %s", got.Reject.Reason, got.Reject.Detail, tt.reason)
			}
			t.Logf("%s: %s", got.Reject.Reason, got.Reject.Detail)
			// The rejected record keeps everything.
			if got.Completion != before.Completion || got.ID != before.ID || len(got.Messages) != len(before.Messages) {
				t.Fatal("rejected record lost its content")
			}
			// Turning the rule off lets the record through or to a later rule.
			cfg.Disable = append(cfg.Disable, tt.reason)
			v2 := newValidateThinking(cfg)
			v2.useTokenizer(tok)
			e2 := newThinkTestEmitter()
			rec.Reject = nil
			if err := v2.Process(context.Background(), rec, e2); err != nil {
				t.Fatal(err)
			}
			if len(e2.rejected) == 1 && e2.rejected[0].Reject.Reason == tt.reason {
				t.Fatalf("rule %s disabled but still applied", tt.reason)
			}
		})
	}
}

// testValidateConfig is the config with every default applied, decoded the
// way pipe check decodes it.
func testValidateConfig(t testing.TB) *validateThinkingConfig {
	t.Helper()
	return decodeTestConfig(t, "validate-thinking", "").(*validateThinkingConfig)
}

// decodeTestConfig decodes a stage's keys (TOML lines) through the real
// registry, as `pipe check` does, and fails the test on any problem.
func decodeTestConfig(t testing.TB, kind, keys string) any {
	t.Helper()
	src := "[[stage]]\nid = \"s\"\nkind = \"" + kind + "\"\ninput = \"x\"\n" + keys + "\n"
	f, probs := pipefile.Parse("test.toml", []byte(src), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	plan, probs := pipeline.Build(f, pipeline.DefaultRegistry)
	for _, p := range probs {
		// The stage stands alone: its input (line 4) dangles and its ports
		// (header, line 1) lead nowhere. Any other problem is the test's.
		if p.Pos.Line != 4 && p.Pos.Line != 1 {
			t.Fatal(p)
		}
	}
	return plan.Lookup("s").Config
}

func TestValidateThinkingLengthsInCharactersWithoutTokenizer(t *testing.T) {
	cfg := testValidateConfig(t)
	cfg.MinAnswerLength = 20
	v := newValidateThinking(cfg)
	rec := completionRecord(goodCompletion())
	rec.Completion.Answer = "x²(3 sin x + x cos x)" // 21 characters, 23 bytes
	e := newThinkTestEmitter()
	if err := v.Process(context.Background(), rec, e); err != nil {
		t.Fatal(err)
	}
	if len(e.emitted["accepted"]) != 1 {
		t.Fatalf("21-character answer rejected with min 20: %+v", e.rejected[0].Reject)
	}
	cfg.MinAnswerLength = 22
	v = newValidateThinking(cfg)
	e = newThinkTestEmitter()
	if err := v.Process(context.Background(), rec, e); err != nil {
		t.Fatal(err)
	}
	if len(e.rejected) != 1 || e.rejected[0].Reject.Reason != ReasonAnswerTooShort {
		t.Fatal("21-character answer accepted with min 22")
	}
	if !strings.Contains(e.rejected[0].Reject.Detail, "21 characters") {
		t.Fatalf("detail %q does not say 21 characters", e.rejected[0].Reject.Detail)
	}
}

func TestValidateThinkingConfigErrors(t *testing.T) {
	src := "[[stage]]\nid = \"s\"\nkind = \"validate-thinking\"\ninput = \"p\"\ndisable = [\"empty_anwser\"]\nmax_repetition = 1.5\nthinking = \"maybe\"\n"
	f, probs := pipefile.Parse("test.toml", []byte(src), pipefile.Options{})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	_, probs = pipeline.Build(f, pipeline.DefaultRegistry)
	all := probs.Error()
	for _, want := range []string{`unknown reason code "empty_anwser"`, "max_repetition must be 0..1, got 1.5", `thinking must be one of "auto", "on", "off", got "maybe"`} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

func TestRepeatedShare(t *testing.T) {
	if share, _ := repeatedShare(goodReasoning+" "+goodAnswer, 10, 20); share > 0.05 {
		t.Errorf("normal text: share %.2f", share)
	}
	if share, _ := repeatedShare(loop(30), 10, 20); share < 0.9 {
		t.Errorf("loop: share %.2f, want > 0.9", share)
	}
	cjk := strings.Repeat("我们再检查一下这个计算结果是否正确。", 30)
	if share, words := repeatedShare(cjk, 10, 20); share < 0.9 || words < 300 {
		t.Errorf("CJK loop: share %.2f over %d words", share, words)
	}
	if share, _ := repeatedShare("short short short", 2, 100); share != 0 {
		t.Errorf("text under the minimum checked: %.2f", share)
	}
}

// repeatedShareOracle is repeatedShare as first written (a map of n-grams,
// unicode tables for every rune): the fast one must agree with it exactly.
func repeatedShareOracle(s string, n, minWords int) (float64, int) {
	var words []uint64
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
			continue
		case isWordRune(r) && !isCJK(r):
			j := i + size
			for j < len(s) {
				r2, size2 := utf8.DecodeRuneInString(s[j:])
				if !isWordRune(r2) || isCJK(r2) {
					break
				}
				j += size2
			}
			words = append(words, maphash.String(wordSeed, s[i:j]))
			i = j
		default:
			words = append(words, maphash.String(wordSeed, s[i:i+size]))
			i += size
		}
	}
	if len(words) < minWords || len(words) < n+1 {
		return 0, len(words)
	}
	seen := map[uint64]bool{}
	total, repeats := 0, 0
	for i := 0; i+n <= len(words); i++ {
		h := uint64(14695981039346656037)
		for _, w := range words[i : i+n] {
			h = (h ^ w) * 1099511628211
			h ^= h >> 29
		}
		total++
		if seen[h] {
			repeats++
		}
		seen[h] = true
	}
	return float64(repeats) / float64(total), len(words)
}

func TestRepeatedShareOracle(t *testing.T) {
	// Pieces that exercise every class: ASCII words, digits, _, symbols,
	// every ASCII and Unicode space, accented and Cyrillic letters that
	// continue a word, CJK that does not, emoji, and invalid UTF-8.
	pieces := []string{"the", "loop", "x_1", "42", ".", ",", "(", ")", " ", "  ", "\t", "\n", "\v", "\f", "\r",
		"\u0085", "\u00a0", "\u3000", "\u2028", "café", "naïve", "über", "слово", "日本", "語", "ひらがな", "カタカナ",
		"한국어", "😀", "\xff", "\xe6\x97", "a\xc3", "Ω", "٣", "mixed日本word", "again", "and", "so", "on"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var b strings.Builder
		words := rng.IntN(400)
		vocab := 1 + rng.IntN(len(pieces)) // few pieces: loops; many: prose
		for range words {
			b.WriteString(pieces[rng.IntN(vocab)])
			if rng.IntN(3) > 0 {
				b.WriteByte(' ')
			}
		}
		s := b.String()
		for _, n := range []int{2, 3, 10} {
			for _, minWords := range []int{1, 20, 100} {
				gotShare, gotWords := repeatedShare(s, n, minWords)
				wantShare, wantWords := repeatedShareOracle(s, n, minWords)
				if gotShare != wantShare || gotWords != wantWords {
					t.Fatalf("round %d, n %d, min %d: %q: share %v over %d words, oracle %v over %d", round, n, minWords, s, gotShare, gotWords, wantShare, wantWords)
				}
			}
		}
	}
}

// BenchmarkValidateThinking: the rules over one completion, without a
// tokenizer (lengths in characters), as validate-thinking judges each
// record. plain is the usual completion; long has ~6 KB of reasoning and
// ~2 KB of answer (the cost of scanning texts); tool-call is a record
// with tools whose answer calls one in Qwen3's format.
//
//	go test ./stages -run '^$' -bench BenchmarkValidateThinking -cpu 1
func BenchmarkValidateThinking(b *testing.B) {
	long := goodCompletion()
	steps := func(n int) string {
		var sb strings.Builder
		for i := range n {
			fmt.Fprintf(&sb, "Step %d: %d times %d is %d, so carry %d. ", i+1, 17+i, 23+2*i, (17+i)*(23+2*i), i%7)
		}
		return sb.String()
	}
	long.Reasoning = steps(120)
	long.Answer = steps(40)
	tool := completionRecord(goodCompletion())
	tool.Tools = json.RawMessage(`[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"search_web","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`)
	tool.Completion.Reasoning = "The user wants the weather in Paris. I have a get_weather tool; I'll call it with city Paris."
	tool.Completion.Answer = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	for _, bc := range []struct {
		name string
		rec  *record.Record
	}{
		{"plain", completionRecord(goodCompletion())},
		{"long", completionRecord(long)},
		{"tool-call", tool},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := testValidateConfig(b)
			v := newValidateThinking(cfg)
			b.SetBytes(int64(len(bc.rec.Completion.Reasoning) + len(bc.rec.Completion.Answer)))
			b.ReportAllocs()
			for b.Loop() {
				if r, d := v.check(bc.rec); r != "" {
					b.Fatal(r, d)
				}
			}
		})
	}
	// The bad_tool_call rule alone, on a long completion that calls no
	// tool: what it adds to every record without tool calls.
	b.Run("long/tool-call-rule", func(b *testing.B) {
		v := newValidateThinking(testValidateConfig(b))
		rec := completionRecord(long)
		b.SetBytes(int64(len(long.Reasoning) + len(long.Answer)))
		b.ReportAllocs()
		for b.Loop() {
			if r, d := v.toolCallRule(rec, false); r != "" {
				b.Fatal(r, d)
			}
		}
	})
}

// toolsWeatherSearch declares two tools, as OpenAI's tools parameter has them.
const toolsWeatherSearch = `[{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}}},{"type":"function","function":{"name":"search_web","description":"Search the web","parameters":{"type":"object","properties":{"q":{"type":"string"},"filters":{"type":"object"}},"required":["q"]}}}]`

// toolRecord is a Qwen3 thinking-mode completion of a conversation with
// tools: on /generate (ids set) the calls are in the answer's text.
func toolRecord(tools, reasoning, answer string) *record.Record {
	rec := completionRecord(&record.Completion{
		Reasoning: reasoning, Answer: answer, FinishReason: "stop", MatchedStop: 151645,
		PromptTokens: 310, CompletionTokens: 90,
		Request: map[string]any{"api": "generate", "enable_thinking": true},
	})
	rec.Messages = []record.Message{{Role: "user", Content: "What's the weather in Paris, and is there a café open near me?"}}
	if tools != "" {
		rec.Tools = json.RawMessage(tools)
	}
	return rec
}

const toolReasoning = "The user asks two things: the weather in Paris and a café nearby. I have get_weather and search_web, so I'll call both."

func TestValidateThinkingToolCalls(t *testing.T) {
	tok := testTokenizer(t)
	args := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		name      string
		tools     string
		reasoning string
		answer    string
		calls     []record.ToolCall // completion.tool_calls (chat API)
		history   []record.Message  // replaces the prompt turns when set
		cut       bool              // cut by the length limit where the row fills max_length
		ids       bool              // output ids of the whole output, decoded by the tokenizer
		reason    string
		detail    string // substring of the detail
	}{
		{name: "one call", tools: toolsWeatherSearch, answer: qwenCallWeather, ids: true},
		{name: "content and two calls", tools: toolsWeatherSearch, ids: true,
			answer: "I'll look up both.\n" + qwenCallWeather + "\n" + qwenCallSearch},
		{name: "no calls with tools", tools: toolsWeatherSearch, answer: "Paris is usually mild in spring; I can look it up if you like."},
		{name: "flat tool schema", tools: `[{"name":"get_time","description":"The time now","parameters":{"type":"object","properties":{}}}]`, answer: qwenCallNoArgs},
		{name: "tool schema without a name: names not checked", tools: `[{"type":"function","function":{"parameters":{}}}]`, answer: qwenCallWeather},
		{name: "the tag mentioned in the thinking", tools: toolsWeatherSearch, answer: qwenCallWeather,
			reasoning: "I'll wrap the call in <tool_call> tags, as the system prompt says."},
		{name: "undeclared name", tools: toolsWeatherSearch, reason: ReasonBadToolCall,
			answer: "<tool_call>\n{\"name\": \"get_wether\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			detail: `answer: tool call 1 ("get_wether"): names no tool the conversation declares ("get_weather", "search_web")`},
		{name: "second call undeclared", tools: toolsWeatherSearch, reason: ReasonBadToolCall,
			answer: qwenCallWeather + "\n" + qwenCallNoArgs, detail: `tool call 2 ("get_time"): names no tool`},
		{name: "no tools declared", reason: ReasonBadToolCall, answer: qwenCallWeather, ids: true,
			detail: `tool call 1 ("get_weather"): the conversation declares no tools`},
		{name: "invalid JSON", tools: toolsWeatherSearch, reason: ReasonBadToolCall, ids: true,
			answer: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>",
			detail: "tool call 1: its body is not valid JSON: unexpected end of JSON input"},
		{name: "invalid JSON without tools", reason: ReasonBadToolCall,
			answer: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris}}\n</tool_call>", detail: "not valid JSON"},
		{name: "arguments as a string", tools: toolsWeatherSearch, reason: ReasonBadToolCall,
			answer: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}\n</tool_call>",
			detail: `tool call 1 ("get_weather"): its "arguments" is a string`},
		{name: "unclosed", tools: toolsWeatherSearch, reason: ReasonBadToolCall, ids: true,
			answer: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}", detail: "never closed"},
		{name: "cut inside a call where the row fills max_length", tools: toolsWeatherSearch, cut: true,
			answer: qwenCallWeather + "\n<tool_call>\n{\"name\": \"search_web\", \"arguments\": {\"q\": \"caf"},
		{name: "cut inside a bad call", tools: toolsWeatherSearch, cut: true, reason: ReasonBadToolCall,
			answer: "<tool_call>\n{\"name\": \"get_wether\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"na", detail: `"get_wether"`},
		{name: "text after the call", tools: toolsWeatherSearch, reason: ReasonBadToolCall,
			answer: qwenCallWeather + "\nI'll tell you as soon as I know.", detail: `tool call 1 ("get_weather"): text after it`},
		{name: "call in the thinking", tools: toolsWeatherSearch, reason: ReasonBadToolCall, ids: true,
			reasoning: "I need the weather first.\n" + qwenCallWeather + "\nThen I'll answer.",
			answer:    "It is 18 °C and sunny in Paris.", detail: "the thinking makes a tool call at byte 26"},
		{name: "a terminal escape in the name is escaped", tools: toolsWeatherSearch, reason: ReasonBadToolCall,
			answer: "<tool_call>\n{\"name\": \"get_weather\\u001b[2J" + strings.Repeat("x", 500) + "\", \"arguments\": {}}\n</tool_call>",
			detail: `"get_weather\x1b[2J`},
		// The chat API with a tool-call parser: the calls apart from the text.
		{name: "parsed call", tools: toolsWeatherSearch, answer: "",
			calls: []record.ToolCall{{ID: "call_0", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: args(`"{\"city\": \"Paris\"}"`)}}}},
		{name: "parsed call with content", tools: toolsWeatherSearch, answer: "I'll look it up.",
			calls: []record.ToolCall{{Function: record.FunctionCall{Name: "search_web", Arguments: args(`{"q": "café"}`)}}}},
		{name: "parsed call undeclared", tools: toolsWeatherSearch, answer: "", reason: ReasonBadToolCall,
			calls: []record.ToolCall{
				{Function: record.FunctionCall{Name: "get_weather", Arguments: args(`"{}"`)}},
				{Function: record.FunctionCall{Name: "book_table", Arguments: args(`"{}"`)}}},
			detail: `completion.tool_calls[1] ("book_table"): names no tool`},
		{name: "parsed call without tools", answer: "", reason: ReasonBadToolCall,
			calls:  []record.ToolCall{{Function: record.FunctionCall{Name: "get_weather", Arguments: args(`"{}"`)}}},
			detail: "the conversation declares no tools"},
		{name: "parsed call with arguments encoded twice", tools: toolsWeatherSearch, answer: "", reason: ReasonBadToolCall,
			calls:  []record.ToolCall{{Function: record.FunctionCall{Name: "get_weather", Arguments: args(`"\"{\\\"city\\\": \\\"Paris\\\"}\""`)}}},
			detail: `completion.tool_calls[0] ("get_weather"): its arguments are a string that does not hold a JSON object`},
		// An earlier assistant turn that only calls a tool is not empty.
		{name: "history turn with a call and its result", tools: toolsWeatherSearch, answer: "It is 18 °C and sunny in Paris.",
			history: []record.Message{
				{Role: "user", Content: "What's the weather in Paris?"},
				{Role: "assistant", ToolCalls: []record.ToolCall{{ID: "call_0", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: args(`{"city": "Paris"}`)}}}},
				{Role: "tool", ToolCallID: "call_0", Name: "get_weather", Content: `{"temp_c": 18, "sky": "sunny"}`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reasoning := tt.reasoning
			if reasoning == "" {
				reasoning = toolReasoning
			}
			rec := toolRecord(tt.tools, reasoning, tt.answer)
			c := rec.Completion
			c.ToolCalls = tt.calls
			if tt.history != nil {
				rec.Messages = tt.history
			}
			cfg := testValidateConfig(t)
			cfg.MinAnswerLength = 2
			if tt.cut {
				cfg.MaxLength = 400
				c.FinishReason = "length"
			}
			if tt.ids {
				c.OutputIDs = append(tok.Encode("<think>\n"+reasoning+"\n</think>\n\n"+tt.answer), 151645)
			}
			v := newValidateThinking(cfg)
			v.useTokenizer(tok)
			reason, detail := v.check(rec)
			if reason != tt.reason || !strings.Contains(detail, tt.detail) {
				t.Fatalf("got %q %q, want %q with %q", reason, detail, tt.reason, tt.detail)
			}
			if reason == "" {
				return
			}
			checkDetail(t, detail)
			cfg.Disable = []string{ReasonBadToolCall}
			if r, d := newValidateThinking(cfg).check(rec); r != "" {
				t.Errorf("bad_tool_call disabled, yet rejected: %s %s", r, d)
			}
		})
	}
}

// A bad call goes to "rejected" through Process, and the code is one the
// disable list takes.
func TestValidateThinkingToolCallProcess(t *testing.T) {
	cfg := decodeTestConfig(t, "validate-thinking", `disable = ["repetition"]`).(*validateThinkingConfig)
	v := newValidateThinking(cfg)
	e := newThinkTestEmitter()
	good := toolRecord(toolsWeatherSearch, toolReasoning, qwenCallWeather)
	bad := toolRecord(toolsWeatherSearch, toolReasoning, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>")
	for _, rec := range []*record.Record{good, bad} {
		if err := v.Process(context.Background(), rec, e); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.emitted["accepted"]) != 1 || e.emitted["accepted"][0] != good {
		t.Errorf("accepted %v", e.emitted["accepted"])
	}
	if len(e.rejected) != 1 || e.rejected[0].Reject.Reason != ReasonBadToolCall {
		t.Fatalf("rejected %v", e.rejected)
	}
	decodeTestConfig(t, "validate-thinking", `disable = ["bad_tool_call"]`)

	// Conversations with other tools, one after another: each call is
	// checked against its own conversation's tools.
	other := toolRecord(`[{"type":"function","function":{"name":"get_time","parameters":{}}}]`, toolReasoning, qwenCallWeather)
	for i, rec := range []*record.Record{good, other, good, other} {
		want := []string{"", ReasonBadToolCall}[i%2]
		if r, d := v.check(rec); r != want {
			t.Errorf("record %d: %q %s, want %q", i, r, d, want)
		}
	}
}
