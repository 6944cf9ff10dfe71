//go:build e2e

package tokenize

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/stages/tokenize/internal/corpus"
)

func BenchmarkLoad(b *testing.B) {
	dir := testenv.Qwen3Dir(b)
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeCorpus encodes the reference corpus one document at a time
// on one goroutine, as bench/tokenizer.sh compares with Hugging Face.
func BenchmarkEncodeCorpus(b *testing.B) {
	tok := qwen3(b)
	texts := testCorpus(b)
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	b.SetBytes(int64(size))
	tokens := 0
	b.ResetTimer()
	for b.Loop() {
		tokens = 0
		for _, s := range texts {
			tokens += len(tok.Encode(s))
		}
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeCorpusParallel spreads the documents over GOMAXPROCS
// goroutines sharing one tokenizer.
func BenchmarkEncodeCorpusParallel(b *testing.B) {
	tok := qwen3(b)
	texts := testCorpus(b)
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	b.SetBytes(int64(size))
	var tokens atomic.Int64
	b.ResetTimer()
	for b.Loop() {
		tokens.Store(0)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				for i := int(next.Add(1) - 1); i < len(texts); i = int(next.Add(1) - 1) {
					n += len(tok.Encode(texts[i]))
				}
				tokens.Add(int64(n))
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(tokens.Load())*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkRenderQwen3 renders the 200 reference conversations with the
// real Qwen3 template.
func BenchmarkRenderQwen3(b *testing.B) {
	tok := qwen3(b)
	tmpl, err := tok.Chat("")
	if err != nil {
		b.Fatal(err)
	}
	convs := corpus.Conversations(200)
	b.ResetTimer()
	for b.Loop() {
		for _, c := range convs {
			if _, err := renderConv(tmpl, c); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(convs))*float64(b.N)/b.Elapsed().Seconds(), "conversations/s")
}

// BenchmarkEncodeFamily encodes the reference corpus with each family's
// real tokenizer (scripts/fetch-tokenizers.sh), one document at a time on
// one goroutine; bench/tokenizer.sh compares the same with Hugging Face.
func BenchmarkEncodeFamily(b *testing.B) {
	texts := testCorpus(b)
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	for _, name := range families {
		b.Run(name, func(b *testing.B) {
			tok, _ := loadFamily(b, name)
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, s := range texts {
					tok.Encode(s)
				}
			}
		})
	}
}
