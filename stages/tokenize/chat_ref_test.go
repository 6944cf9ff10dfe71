package tokenize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testenv"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
	"github.com/pipe-dev/pipe/stages/tokenize/internal/corpus"
)

// pyRender renders conversations with Python jinja2 configured as
// transformers does (testdata/hf_render.py); an entry is "" with err set
// where Python raised.
func pyRender(t *testing.T, tok *Tokenizer, convs []corpus.Conversation) (rendered []string, errs []string) {
	t.Helper()
	if err := exec.Command("python3", "-c", "import jinja2").Run(); err != nil {
		missing(t, "python3 with jinja2 is not available")
	}
	dir := t.TempDir()
	tmplPath := filepath.Join(dir, "template.jinja")
	if err := os.WriteFile(tmplPath, []byte(tok.ChatTemplate()), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, c := range convs {
		row := map[string]any{
			"messages":              c.Messages,
			"add_generation_prompt": c.AddGenerationPrompt,
			"special":               tok.SpecialTokenVars(),
			"kwargs":                map[string]any{},
		}
		if c.Tools != nil {
			row["tools"] = c.Tools
		}
		if c.EnableThinking != nil {
			row["kwargs"] = map[string]any{"enable_thinking": *c.EnableThinking}
		}
		b, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	in := filepath.Join(dir, "convs.jsonl")
	if err := os.WriteFile(in, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "testdata/hf_render.py", tmplPath, in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference renderer: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var row struct {
			Rendered string `json:"rendered"`
			Error    string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		rendered = append(rendered, row.Rendered)
		errs = append(errs, row.Error)
	}
	if len(rendered) != len(convs) {
		t.Fatalf("reference renderer returned %d rows for %d conversations", len(rendered), len(convs))
	}
	return rendered, errs
}

func renderConv(tmpl *chat.Template, c corpus.Conversation) (string, error) {
	var msgs []chat.Message
	if err := json.Unmarshal(c.Messages, &msgs); err != nil {
		return "", err
	}
	return tmpl.Render(msgs, chat.Options{AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking, Tools: c.Tools})
}

// TestChatTemplateMatchesJinja2 renders 200 conversations with the real Qwen3
// template in Go and in Python jinja2, compares the text, then compares the
// ids of the rendered text with Hugging Face's and checks the loss mask.
func TestChatTemplateMatchesJinja2(t *testing.T) {
	t.Parallel()
	tok := qwen3(t)
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	convs := corpus.Conversations(200)
	want, wantErr := pyRender(t, tok, convs)
	var texts []string
	bad := 0
	for i, c := range convs {
		got, err := renderConv(tmpl, c)
		switch {
		case wantErr[i] != "":
			t.Errorf("conversation %d: jinja2 failed (%s); the generator should make valid conversations", i, wantErr[i])
			continue
		case err != nil:
			t.Errorf("conversation %d: %v", i, err)
			continue
		case got != want[i]:
			bad++
			if bad <= 3 {
				t.Errorf("conversation %d renders differently:\n%s", i, diffText(got, want[i]))
			}
			continue
		}
		texts = append(texts, got)
	}
	if bad > 0 || t.Failed() {
		t.Fatalf("%d of %d conversations render differently from jinja2", bad, len(convs))
	}
	t.Logf("%d conversations: rendered text identical to jinja2", len(convs))

	hf := hfEncode(t, testenv.Qwen3Dir(t), texts)
	for i, s := range texts {
		ids, mask := tok.EncodeChat(s, MaskAssistant)
		if !equalInts(ids, hf[i]) {
			t.Fatalf("rendered conversation %d: %s", i, firstDiff(tok, s, ids, hf[i]))
		}
		checkMask(t, tok, s, ids, mask, chat.AssistantSpans(s, false))
		_, last := tok.EncodeChat(s, MaskLastTurn)
		checkMask(t, tok, s, ids, last, chat.AssistantSpans(s, true))
	}
	t.Logf("%d rendered conversations: ids identical to Hugging Face tokenizers, masks cover exactly the assistant turns", len(texts))
}

// checkMask asserts that the tokens with mask 1 decode to exactly the span
// texts, except that a reply starting with whitespace may lose that
// whitespace to a token that starts in the header's "\n" (the "\n\n" case:
// the model never saw those bytes as a token of the reply).
func checkMask(t *testing.T, tok *Tokenizer, s string, ids, mask []int, spans [][2]int) {
	t.Helper()
	_, offsets := tok.EncodeOffsets(s)
	got := make([]strings.Builder, len(spans))
	for i, id := range ids {
		if mask[i] == 0 {
			continue
		}
		k := 0
		for k < len(spans) && offsets[i][0] >= spans[k][1] {
			k++
		}
		if k == len(spans) || offsets[i][0] < spans[k][0] {
			t.Fatalf("token %d at %v has mask 1 outside every span %v", i, offsets[i], spans)
		}
		got[k].WriteString(tok.Decode([]int{id}))
	}
	for k, sp := range spans {
		want := nfcBetweenAdded(tok, s[sp[0]:sp[1]])
		g := got[k].String()
		if g == want {
			continue
		}
		if lost, ok := strings.CutSuffix(want, g); ok && strings.TrimSpace(lost) == "" {
			continue
		}
		t.Fatalf("span %d: mask selects %q\nwant %q", k, g, want)
	}
}

func diffText(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-80)
	return "at byte " + itoa(i) + "\n got: " + quoteCut(got[lo:], 160) + "\nwant: " + quoteCut(want[lo:], 160)
}

func quoteCut(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
