package stages

import (
	"strings"
	"testing"
)

// Each request asks for what its row can still train: the trainer's
// max_length minus the prompt, never above max_output_tokens; a prompt
// with no room, or too long for the servers' context, is rejected before
// it is sent. 0 means the settings' own bound (max_output_tokens).
func TestGenerateOutputBound(t *testing.T) {
	ids := func(n int) []int { return make([]int, n) }
	for _, tc := range []struct {
		name                      string
		maxOut, maxLength, ctxLen int
		prompt                    []int
		bound                     int
		reject                    string // in the rejection's detail
	}{
		{name: "no trainer", maxOut: 32768, prompt: ids(100)},
		{name: "the row's room", maxOut: 32768, maxLength: 4096, prompt: ids(100), bound: 3996},
		{name: "max_output_tokens lower than the room", maxOut: 1024, maxLength: 4096, prompt: ids(100)},
		{name: "no prompt ids (chat without tokenizer): max_length", maxOut: 32768, maxLength: 4096, bound: 4096},
		{name: "no room left", maxOut: 32768, maxLength: 4096, prompt: ids(4095), reject: "max_length 4096 leaves 1 for a reply"},
		{name: "prompt longer than the row", maxOut: 32768, maxLength: 4096, prompt: ids(5000), reject: "leaves 0 for a reply"},
		{name: "the context counts the bound sent", maxOut: 32768, maxLength: 4096, ctxLen: 8192, prompt: ids(100), bound: 3996},
		{name: "too long for the context", maxOut: 8192, ctxLen: 8192, prompt: ids(100), reject: "does not fit the servers' context length 8192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &generate{cfg: generateConfig{MaxOutputTokens: tc.maxOut, MaxLength: tc.maxLength}, ctxLen: tc.ctxLen}
			bound, rej := g.outputBound(tc.prompt)
			switch {
			case tc.reject != "" && (rej == nil || rej.Reason != "prompt_too_long" || !strings.Contains(rej.Detail, tc.reject)):
				t.Fatalf("got %d, %+v; want prompt_too_long with %q", bound, rej, tc.reject)
			case tc.reject == "" && (rej != nil || bound != tc.bound):
				t.Fatalf("got %d, %+v; want %d", bound, rej, tc.bound)
			}
		})
	}
}
