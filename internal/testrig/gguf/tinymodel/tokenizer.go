package tinymodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Token types, as llama.cpp's GGUF converter assigns them.
const (
	TokenNormal      int32 = 1
	TokenControl     int32 = 3
	TokenUserDefined int32 = 4
	TokenUnused      int32 = 5
)

// Tokenizer is a Hugging Face byte-level BPE tokenizer in the form GGUF
// stores it (the tokenizer.ggml.* keys).
type Tokenizer struct {
	// Tokens is indexed by id; ids the tokenizer does not define are "[PADn]".
	Tokens []string
	Types  []int32
	// Merges are "left right", highest priority first.
	Merges []string
	// BOS, EOS, EOT and PAD are token ids, or -1 when undefined.
	BOS, EOS, EOT, PAD int
	AddBOS             bool
	// ChatTemplate is the Jinja template of tokenizer_config.json.
	ChatTemplate string
}

// ID returns the id of a token, or -1.
func (t *Tokenizer) ID(token string) int {
	for i, s := range t.Tokens {
		if s == token {
			return i
		}
	}
	return -1
}

type hfTokenizer struct {
	Model struct {
		Type   string          `json:"type"`
		Vocab  map[string]int  `json:"vocab"`
		Merges json.RawMessage `json:"merges"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
}

type hfTokenizerConfig struct {
	AddBOS       bool            `json:"add_bos_token"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	PAD          json.RawMessage `json:"pad_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// LoadTokenizer reads tokenizer.json and tokenizer_config.json from dir and
// lays the vocabulary out over vocabSize ids (the model's embedding rows;
// Qwen3 has 151,936 for 151,669 tokens). A vocabSize of 0 means exactly the
// tokens defined.
//
// As Qwen3 defines no BOS token, BOS is <|endoftext|> (never added, since
// add_bos_token is false); EOS and EOT are the configured eos_token
// (<|im_end|>), PAD the configured pad_token.
func LoadTokenizer(dir string, vocabSize int) (*Tokenizer, error) {
	var hf hfTokenizer
	if err := readJSON(filepath.Join(dir, "tokenizer.json"), &hf); err != nil {
		return nil, err
	}
	var cfg hfTokenizerConfig
	if err := readJSON(filepath.Join(dir, "tokenizer_config.json"), &cfg); err != nil {
		return nil, err
	}
	if hf.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q, want BPE", hf.Model.Type)
	}
	n := hf.tokenCount()
	if vocabSize == 0 {
		vocabSize = n
	}
	if vocabSize < n {
		return nil, fmt.Errorf("vocabulary size %d is smaller than the tokenizer's %d tokens", vocabSize, n)
	}
	tok := &Tokenizer{AddBOS: cfg.AddBOS}
	tok.layOut(&hf, vocabSize)
	var err error
	if tok.Merges, err = parseMerges(hf.Model.Merges); err != nil {
		return nil, err
	}
	tok.setSpecials(&cfg)
	if tok.ChatTemplate, err = chatTemplate(cfg.ChatTemplate); err != nil {
		return nil, err
	}
	return tok, nil
}

// tokenCount is one more than the highest id the tokenizer defines.
func (hf *hfTokenizer) tokenCount() int {
	n := len(hf.Model.Vocab)
	for _, a := range hf.AddedTokens {
		n = max(n, a.ID+1)
	}
	for _, id := range hf.Model.Vocab {
		n = max(n, id+1)
	}
	return n
}

// layOut fills Tokens and Types over vocabSize ids: the vocabulary's
// tokens normal, added ones control (special) or user-defined, the ids
// beyond them unused "[PADi]".
func (t *Tokenizer) layOut(hf *hfTokenizer, vocabSize int) {
	t.Tokens = make([]string, vocabSize)
	t.Types = make([]int32, vocabSize)
	for i := range t.Tokens {
		t.Tokens[i] = fmt.Sprintf("[PAD%d]", i)
		t.Types[i] = TokenUnused
	}
	for s, id := range hf.Model.Vocab {
		t.Tokens[id] = s
		t.Types[id] = TokenNormal
	}
	for _, a := range hf.AddedTokens {
		t.Tokens[a.ID] = a.Content
		if a.Special || looksSpecial(a.Content) {
			t.Types[a.ID] = TokenControl
		} else {
			t.Types[a.ID] = TokenUserDefined
		}
	}
}

// setSpecials sets BOS, EOS, EOT and PAD from the configured tokens (-1:
// none); BOS without one is <|endoftext|>, EOT is EOS.
func (t *Tokenizer) setSpecials(cfg *hfTokenizerConfig) {
	ids := make(map[string]int, len(t.Tokens))
	for i, s := range t.Tokens {
		ids[s] = i
	}
	lookup := func(raw json.RawMessage) int {
		s := tokenContent(raw)
		if id, ok := ids[s]; ok && s != "" {
			return id
		}
		return -1
	}
	t.EOS = lookup(cfg.EOS)
	t.EOT = t.EOS
	t.PAD = lookup(cfg.PAD)
	if t.BOS = lookup(cfg.BOS); t.BOS < 0 {
		if id, ok := ids["<|endoftext|>"]; ok {
			t.BOS = id
		}
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// parseMerges accepts both layouts of tokenizer.json: ["a b", …] (older) and
// [["a", "b"], …] (tokenizers ≥ 0.20).
func parseMerges(raw json.RawMessage) ([]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		merges := make([]string, len(pairs))
		for i, p := range pairs {
			if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
				return nil, fmt.Errorf("tokenizer.json: merge %d (%q, %q) contains a space, which GGUF's \"left right\" form cannot hold", i, p[0], p[1])
			}
			merges[i] = p[0] + " " + p[1]
		}
		return merges, nil
	}
	var merges []string
	if err := json.Unmarshal(raw, &merges); err != nil {
		return nil, fmt.Errorf("tokenizer.json: merges are neither strings nor pairs: %w", err)
	}
	return merges, nil
}

// tokenContent reads a special token given as a string or as an AddedToken
// object ({"content": …}); null gives "".
func tokenContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Content
	}
	return ""
}

// chatTemplate reads chat_template: a string, or a list of named templates of
// which "default" is taken.
func chatTemplate(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("tokenizer_config.json: chat_template: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", nil
}

// looksSpecial follows llama.cpp's converter: added tokens shaped like
// control tokens are control tokens even when not flagged special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}
