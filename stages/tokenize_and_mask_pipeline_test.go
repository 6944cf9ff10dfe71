package stages

import (
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

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
