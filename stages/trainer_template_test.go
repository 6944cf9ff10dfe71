package stages

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/specforgeref"
	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// forcedTinyDir is the tiny Qwen3 tokenizer with its generation prompt
// changed to force thinking, as Qwen3.5/3.6's templates do.
func forcedTinyDir(t *testing.T) string { return forcedTemplateDir(t, testenv.TinyQwen3Dir(t)) }

// forcedTemplateDir is the model directory src (Qwen3's hybrid template)
// with its generation prompt changed to force thinking
// ("<|im_start|>assistant\n<think>\n"), its tokenizer.json linked.
func forcedTemplateDir(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	tmpl := cfg["chat_template"].(string)
	const hybrid = "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
	if !strings.Contains(tmpl, hybrid) {
		t.Fatal("the Qwen3 template's generation prompt is not where the test expects it")
	}
	cfg["chat_template"] = strings.Replace(tmpl, hybrid, "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}", 1)
	dir := t.TempDir()
	out, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, "tokenizer.json"), filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// [trainer] chat_template is checked at pipe check against the model's
// template: a name under which SpecForge would label the conversations
// otherwise than tokenize-and-mask's rows (qwen3.5 over Qwen3's hybrid
// template, qwen3-thinking over a forced one, qwen3-instruct dropping the
// reasoning) is a problem at [trainer]'s key that names the ones that
// agree; an unknown name lists SpecForge's.
func TestTrainerChatTemplateMatchesTheModel(t *testing.T) {
	hybrid, forced := testenv.TinyQwen3Dir(t), forcedTinyDir(t)
	for _, tc := range []struct {
		dir, name string
		want      []string // "" for no problem
	}{
		{hybrid, "qwen3-thinking", nil},
		{hybrid, "qwen", []string{`drops each turn's reasoning_content`, `SpecForge's name for it: "qwen3-thinking"`}},
		{hybrid, "qwen3.5", []string{"p.toml:4:1:", `chat_template = "qwen3.5" does not label the rows`, "does not force thinking", `its assistant_header is "<|im_start|>assistant\n<think>\n"`, `SpecForge's name for it: "qwen3-thinking"`}},
		{hybrid, "qwen3-instruct", []string{"drops each turn's reasoning_content"}},
		{forced, "qwen3.5", nil},
		{forced, "qwen3-next-thinking", nil},
		{forced, "qwen3-thinking", []string{"forces thinking", `"qwen3.5" or "qwen3-next-thinking"`}},
		{hybrid, "llama3", []string{"another family's template"}},
		{hybrid, "qwen35", []string{`is not one of SpecForge's templates`, `did you mean "qwen3.5"`}},
	} {
		src := fmt.Sprintf("[trainer]\nname = \"specforge\"\nmax_length = 4096\nchat_template = %q\n[[stage]]\nid = \"p\"\nkind = \"read-completions\"\npath = %q\n[[stage]]\nid = \"tok\"\nkind = \"tokenize-and-mask\"\ninput = \"p\"\ntokenizer = %q\n[[stage]]\nid = \"w\"\nkind = \"write-jsonl\"\ninput = \"tok\"\npath = \"out.jsonl\"\n",
			tc.name, filepath.Join(repoRoot(), "testdata", "completions", "completions.jsonl"), tc.dir)
		f, probs := pipefile.Parse(filepath.Join(t.TempDir(), "p.toml"), []byte(src), pipefile.Options{})
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		_, probs = pipeline.Build(f, pipeline.DefaultRegistry)
		got := fmt.Sprint(probs)
		if tc.want == nil {
			if len(probs) > 0 {
				t.Errorf("%s over %s: %v", tc.name, filepath.Base(tc.dir), probs)
			}
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s over %s: problems %s\nwant %q", tc.name, filepath.Base(tc.dir), got, w)
			}
		}
	}
}

// pipe init writes SpecForge's name for the model's template.
func TestTrainerTemplateFor(t *testing.T) {
	if got := TrainerTemplateFor(testenv.TinyQwen3Dir(t)); got != "qwen3-thinking" {
		t.Errorf("Qwen3's hybrid template: %q, want qwen3-thinking", got)
	}
	if got := TrainerTemplateFor(forcedTinyDir(t)); got != "qwen3.5" {
		t.Errorf("a forced template: %q, want qwen3.5", got)
	}
	if got := TrainerTemplateFor(t.TempDir()); got != "" {
		t.Errorf("no model: %q", got)
	}
}

// trainrow's labelling of SpecForge's templates agrees with the test
// oracle written from parse.py (specforgeref) on rendered conversations.
func TestSFTemplateCoveredMatchesTheOracle(t *testing.T) {
	tok, err := tokenize.LoadChat(testenv.TinyQwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := tok.Chat("")
	if err != nil {
		t.Fatal(err)
	}
	on := true
	thinking, _, err := tmpl.AssistantTurns(templateProbe(true), chat.Options{EnableThinking: &on}, false)
	if err != nil {
		t.Fatal(err)
	}
	// Without reasoning the last turn has an empty think block, which
	// qwen3-instruct ignores.
	plain, err := tmpl.Render(templateProbe(false), chat.Options{})
	if err != nil || !strings.Contains(plain, "<think>\n\n</think>\n\n") {
		t.Fatalf("render without reasoning: %v\n%s", err, plain)
	}
	for _, text := range []string{thinking, plain} {
		for _, ref := range []specforgeref.Template{specforgeref.Qwen3Thinking, specforgeref.Qwen3Instruct, specforgeref.Qwen35} {
			sf, _ := sfTemplateNamed(ref.Name)
			want := make([]bool, len(text))
			for _, sp := range specforgeref.Spans(text, ref, false) {
				for i := sp.Start; i < sp.End; i++ {
					want[i] = sp.Loss
				}
			}
			got := sf.Covered(text)
			for i := range want {
				if want[i] != got[i] {
					t.Fatalf("%s: byte %d (%q): covered %v, the oracle %v", ref.Name, i, text[i], got[i], want[i])
				}
			}
		}
	}
}
