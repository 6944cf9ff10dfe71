package hfhub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The token's places, in huggingface_hub's order (utils/_auth.py
// get_token), and what each failure says.
func TestToken(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	write := func(path, s string) {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env["XDG_CACHE_HOME"] = home
	if _, _, err := Token(getenv); err == nil || !strings.Contains(err.Error(), filepath.Join(home, "huggingface", "token")) {
		t.Fatalf("no token anywhere: %v", err)
	}
	write(filepath.Join(home, "huggingface", "token"), "hf_fromcachefile\r\n")
	if tok, src, err := Token(getenv); tok != "hf_fromcachefile" || src != filepath.Join(home, "huggingface", "token") || err != nil {
		t.Fatalf("cache file: %q %q %v", tok, src, err)
	}
	env["HF_HOME"] = filepath.Join(home, "hf")
	write(filepath.Join(home, "hf", "token"), "  hf_fromhfhome\n")
	if tok, _, _ := Token(getenv); tok != "hf_fromhfhome" {
		t.Fatalf("HF_HOME: %q", tok)
	}
	env["HF_TOKEN_PATH"] = filepath.Join(home, "empty")
	write(env["HF_TOKEN_PATH"], "\n")
	if _, _, err := Token(getenv); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty token file: %v", err)
	}
	env["HUGGING_FACE_HUB_TOKEN"] = "hf_legacy"
	if tok, src, _ := Token(getenv); tok != "hf_legacy" || src != "$HUGGING_FACE_HUB_TOKEN" {
		t.Fatalf("legacy variable: %q %q", tok, src)
	}
	env["HF_TOKEN"] = "hf_first"
	if tok, src, _ := Token(getenv); tok != "hf_first" || src != "$HF_TOKEN" {
		t.Fatalf("HF_TOKEN: %q %q", tok, src)
	}
}
