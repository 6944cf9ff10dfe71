package hfhub

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Token finds the Hub token as huggingface_hub does
// (src/huggingface_hub/utils/_auth.py, get_token): the HF_TOKEN variable,
// then HUGGING_FACE_HUB_TOKEN, then the token file — HF_TOKEN_PATH, else
// HF_HOME/token, HF_HOME being XDG_CACHE_HOME/huggingface or
// ~/.cache/huggingface. It returns the token and where it came from (for
// messages: never the token itself).
func Token(getenv func(string) string) (token, source string, err error) {
	for _, name := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := clean(getenv(name)); t != "" {
			return t, "$" + name, nil
		}
	}
	path := getenv("HF_TOKEN_PATH")
	if path == "" {
		home := getenv("HF_HOME")
		if home == "" {
			cache := getenv("XDG_CACHE_HOME")
			if cache == "" {
				h, herr := os.UserHomeDir()
				if herr != nil {
					return "", "", errors.New("no Hub token: set HF_TOKEN, or log in with `hf auth login` (the token file needs a home directory)")
				}
				cache = filepath.Join(h, ".cache")
			}
			home = filepath.Join(cache, "huggingface")
		}
		path = filepath.Join(home, "token")
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", "", fmt.Errorf("no Hub token: HF_TOKEN is not set and there is no token file %s (`hf auth login` writes it)", path)
	case err != nil:
		return "", "", fmt.Errorf("reading the Hub token file: %w", err)
	}
	if t := clean(string(b)); t != "" {
		return t, path, nil
	}
	return "", "", fmt.Errorf("the Hub token file %s is empty", path)
}

// clean is the token without line ends and surrounding space (_auth.py's
// _clean_token).
func clean(t string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(t))
}
