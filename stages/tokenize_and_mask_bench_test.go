package stages

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// benchRows builds n realistic rows (a prompt, ~5 KB of thinking, ~2 KB of
// answer) from the Go distribution's own sources: prose comments and code,
// varied, so the tokenizer's word cache does not make every row cheap.
func benchRows(b *testing.B, n int) []*record.Record {
	b.Helper()
	var files []string
	for _, dir := range []string{"net/http", "runtime", "go/types", "crypto/tls", "encoding/json", "database/sql", "text/template"} {
		fs, _ := filepath.Glob(filepath.Join(goRoot(), "src", dir, "*.go"))
		sort.Strings(fs)
		files = append(files, fs...)
	}
	var text strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil {
			text.Write(data)
		}
		if text.Len() > n*8000 {
			break
		}
	}
	src := text.String()
	if len(src) < n*8000 {
		b.Skip("no Go sources under GOROOT to build rows from")
	}
	tok := testTokenizer(b)
	tmpl, err := tok.Chat("")
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]*record.Record, n)
	for i := range recs {
		off := i * 8000 // distinct text for every row
		prompt := "Explain what this code does and point out anything surprising:\n\n" + src[off:off+600]
		reasoning := strings.TrimSpace(src[off+600 : off+5600])
		answer := strings.TrimSpace(src[off+5600 : off+7600])
		think := true
		p, err := tmpl.Render([]chat.Message{chat.NewMessage("user", prompt)}, chat.Options{AddGenerationPrompt: true, EnableThinking: &think})
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = &record.Record{ID: "bench", Messages: []record.Message{{Role: "user", Content: prompt}},
			Completion: &record.Completion{Reasoning: reasoning, Answer: answer, FinishReason: "stop", MatchedStop: 151645,
				PromptIDs: tok.Encode(p), OutputIDs: append(tok.Encode("<think>\n"+reasoning+"\n</think>\n\n"+answer), 151645),
				Request: map[string]any{"api": "generate", "enable_thinking": true}}}
	}
	return recs
}

// processCPU is the user+system CPU time of the process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type discardEmitter struct{ rejected int }

func (d *discardEmitter) Emit(string, *record.Record) error { return nil }
func (d *discardEmitter) Reject(*record.Record, string, string) error {
	d.rejected++
	return nil
}
func (d *discardEmitter) Fail(*record.Record, error, int) error { return nil }
func (d *discardEmitter) Took(int)                              {}
func (d *discardEmitter) SkipFinished(string) bool              { return false }
func (d *discardEmitter) Skip(*record.Record, string) error     { return nil }

// BenchmarkTokenizeAndMask reports rows/s through the stage, next to the
// references measured in the same run: the raw tokenizer encoding the same
// rendered text, and rendering plus encoding. Run on one core:
//
//	go test ./stages -run '^$' -bench TokenizeAndMask -cpu 1
func BenchmarkTokenizeAndMask(b *testing.B) {
	const n = 256
	recs := benchRows(b, n)
	tok := testTokenizer(b)
	tmpl, _ := tok.Chat("")
	rendered := make([]string, n)
	var bytes, tokens int
	for i, r := range recs {
		s, err := tmpl.Render([]chat.Message{chat.NewMessage("user", r.Messages[0].Content),
			chat.NewMessage("assistant", r.Completion.Answer).With("reasoning_content", r.Completion.Reasoning)}, chat.Options{})
		if err != nil {
			b.Fatal(err)
		}
		rendered[i] = s
		bytes += len(s)
		tokens += len(tok.Encode(s))
	}
	// CPU time per row is reported too: on a shared machine it is steadier
	// than wall time.
	var cpu0 time.Duration
	start := func() { cpu0 = processCPU() }
	report := func(b *testing.B) {
		b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/row")
		rows := float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(rows, "rows/s")
		b.ReportMetric(rows*float64(tokens)/n, "tokens/s")
		b.ReportMetric(rows*float64(bytes)/n/1e6, "MB/s")
	}
	b.Run("reference=encode", func(b *testing.B) {
		b.SetBytes(int64(bytes / n))
		start()
		for i := 0; b.Loop(); i++ {
			tok.Encode(rendered[i%n])
		}
		report(b)
	})
	b.Run("reference=render+encode", func(b *testing.B) {
		b.SetBytes(int64(bytes / n))
		start()
		for i := 0; b.Loop(); i++ {
			r := recs[i%n]
			s, _ := tmpl.Render([]chat.Message{chat.NewMessage("user", r.Messages[0].Content),
				chat.NewMessage("assistant", r.Completion.Answer).With("reasoning_content", r.Completion.Reasoning)}, chat.Options{})
			tok.EncodeOffsets(s)
		}
		report(b)
	})
	for _, c := range []struct{ name, source, compare string }{
		{"stage=text", "text", "false"},
		{"stage=ids", "ids", "false"},
		{"stage=ids+compare", "ids", "true"},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := &tokenizeAndMaskConfig{Tokenizer: testTok.dir, Mask: "assistant", OnTooLong: "reject",
				MinAdjacentLossTokens: 2, Source: c.source, CompareText: c.compare == "true", Workers: 1}
			s := newTokenizeAndMask(cfg)
			if err := s.use(tok); err != nil {
				b.Fatal(err)
			}
			var e discardEmitter
			b.SetBytes(int64(bytes / n))
			start()
			for i := 0; b.Loop(); i++ {
				rec := *recs[i%n]
				rec.Meta = nil
				if err := s.Process(context.Background(), &rec, &e); err != nil {
					b.Fatal(err)
				}
			}
			if e.rejected > 0 {
				b.Fatalf("%d rows rejected", e.rejected)
			}
			report(b)
		})
	}
}

// goRoot is the Go installation whose sources the benchmarks read as text
// (`go env GOROOT`: runtime.GOROOT is deprecated); "" when there is no go
// command, and the benchmarks fall back to their words.
func goRoot() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
