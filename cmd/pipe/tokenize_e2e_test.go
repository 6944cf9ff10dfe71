//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
)

func runTokenize(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"tokenize"}, args...), &stdio{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

func TestTokenizeCommand(t *testing.T) {
	dir := testenv.Qwen3Dir(t)
	in := `{"text": "Hello <|im_end|> world"}

{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "reasoning_content": "think"}]}
{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true, "enable_thinking": false}
`
	out, errs, code := runTokenize(t, in, "--tokenizer", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Ids as Hugging Face tokenizers gives them for these texts.
	want := `{"input_ids":[9707,220,151645,1879]}
{"input_ids":[151644,872,198,6023,151645,198,151644,77091,198,151667,198,26865,198,151668,271,16032,151645,198],"loss_mask":[0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,1],"rendered":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\nthink\n</think>\n\nyo<|im_end|>\n"}
{"input_ids":[151644,872,198,6023,151645,198,151644,77091,198,151667,271,151668,271],"loss_mask":[0,0,0,0,0,0,0,0,0,0,0,0,0],"rendered":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"}
`
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}

	// Flags give the defaults; a row's own keys win.
	out, errs, code = runTokenize(t, `{"messages": [{"role": "user", "content": "hi"}]}
{"messages": [{"role": "user", "content": "hi"}], "enable_thinking": true, "tools": [{"name": "f"}]}
`, "--tokenizer", dir, "--render-only", "--add-generation-prompt", "--enable-thinking=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var r0, r1 struct{ Rendered string }
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &r0) != nil || json.Unmarshal([]byte(lines[1]), &r1) != nil {
		t.Fatalf("render-only output: %s", out)
	}
	if !strings.HasSuffix(r0.Rendered, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Fatalf("--enable-thinking=false not applied: %q", r0.Rendered)
	}
	if !strings.HasSuffix(r1.Rendered, "<|im_start|>assistant\n") || !strings.Contains(r1.Rendered, `{"name": "f"}`) {
		t.Fatalf("row options not applied: %q", r1.Rendered)
	}
	if strings.Contains(out, "input_ids") {
		t.Fatalf("--render-only wrote ids: %s", out)
	}
}

func TestTokenizeCommandErrors(t *testing.T) {
	dir := testenv.Qwen3Dir(t)
	cases := []struct {
		name, in string
		args     []string
		code     int
		stderr   string
	}{
		{"bad line", "{\"text\": \"a\"}\n{\"text\": 1}\n", nil, 1, "stdin:2: not a JSON object"},
		{"neither", "{\"id\": 1}\n", nil, 1, `stdin:1: a row needs "text"`},
		{"both", `{"text": "a", "messages": []}`, nil, 1, `stdin:1: a row has "text" or "messages", not both`},
		{"render text", `{"text": "a"}`, []string{"--render-only"}, 1, "stdin:1: --render-only needs"},
		{"bad mask", "", []string{"--mask", "all"}, 2, `mask mode "all"`},
		{"null content", `{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": null}]}`, nil, 1, "stdin:1: chat template:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, errs, code := runTokenize(t, c.in, append([]string{"--tokenizer", dir}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, c.code, c.stderr)
			}
		})
	}
	if _, errs, code := runTokenize(t, ""); code != 2 || !strings.Contains(errs, "--tokenizer DIR is required") {
		t.Fatalf("no --tokenizer: exit %d, %q", code, errs)
	}

	// A model without a chat template needs --template chatml.
	bare := t.TempDir()
	if err := os.Symlink(filepath.Join(mustAbs(t, dir), "tokenizer.json"), filepath.Join(bare, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	msg := `{"messages": [{"role": "user", "content": "hi"}]}`
	if _, errs, code := runTokenize(t, msg, "--tokenizer", bare); code != 1 || !strings.Contains(errs, `set template = "chatml"`) {
		t.Fatalf("no template: exit %d, %q", code, errs)
	}
	out, errs, code := runTokenize(t, msg, "--tokenizer", bare, "--template", "chatml", "--render-only")
	if code != 0 || out != `{"rendered":"<|im_start|>user\nhi<|im_end|>\n"}`+"\n" {
		t.Fatalf("chatml: exit %d, %q, %q", code, out, errs)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
