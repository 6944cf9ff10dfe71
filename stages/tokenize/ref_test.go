package tokenize

import (
	"sync"
)

// The reference tests compare against Hugging Face's own implementations,
// set up by scripts/setup-tokenizer-ref.sh. Without them the tests skip, or
// fail under PIPE_CI=1 where skipping would hide a regression.

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

var (
	corpusOnce  sync.Once
	corpusTexts []string
	corpusErr   error
)

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
