package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// tokenizer.json is 11 MB for Qwen3, almost all of it model.vocab and
// model.merges; encoding/json takes about a second on it. jsonScanner reads
// those two directly and hands every other (small) value to encoding/json.

type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("byte %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScanner) expect(c byte) error {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end of JSON, want %q", c)
		}
		return s.errorf("want %q, got %q", c, s.data[s.pos])
	}
	s.pos++
	return nil
}

// peek returns the next non-space byte, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// str reads a JSON string. Strings without escapes are sliced directly.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	escaped := false
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			raw := s.data[start:s.pos]
			s.pos++
			if !escaped {
				return string(raw), nil
			}
			var out string
			if err := json.Unmarshal(s.data[start-1:s.pos], &out); err != nil {
				return "", s.errorf("bad string: %v", err)
			}
			return out, nil
		case c == '\\':
			escaped = true
			s.pos += 2
		case c < 0x20:
			return "", s.errorf("control character in string")
		default:
			s.pos++
		}
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) integer() (int, error) {
	s.ws()
	start := s.pos
	for s.pos < len(s.data) && (s.data[s.pos] == '-' || (s.data[s.pos] >= '0' && s.data[s.pos] <= '9')) {
		s.pos++
	}
	n, err := strconv.Atoi(string(s.data[start:s.pos]))
	if err != nil {
		return 0, s.errorf("want an integer id")
	}
	return n, nil
}

// skip passes over any JSON value and returns its bytes; encoding/json
// validates them when they are decoded.
func (s *jsonScanner) skip() ([]byte, error) {
	s.ws()
	start := s.pos
	if c := s.peek(); c != '{' && c != '[' && c != '"' {
		// A number or literal: up to the next delimiter.
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.data[start:s.pos], nil
			}
			s.pos++
		}
		return s.data[start:s.pos], nil
	}
	depth := 0
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; c {
		case '"':
			if _, err := s.str(); err != nil {
				return nil, err
			}
			if depth == 0 {
				return s.data[start:s.pos], nil
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return nil, s.errorf("unexpected %q", c)
			}
			if depth == 0 {
				s.pos++
				return s.data[start:s.pos], nil
			}
		}
		s.pos++
	}
	if depth != 0 {
		return nil, s.errorf("unexpected end of JSON")
	}
	return s.data[start:s.pos], nil
}

// object calls fn for each key of an object; fn must consume the value.
func (s *jsonScanner) object(fn func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or '}' in object")
		}
	}
}

// array calls fn for each element; fn must consume it.
func (s *jsonScanner) array(fn func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or ']' in array")
		}
	}
}

// readTokenizerFile fills f from tokenizer.json, reading model.vocab and
// model.merges with the scanner and everything else with encoding/json.
// With componentsOnly, vocab and merges are only passed over (CheckFile):
// f.Model.Vocab stays nil and f.Model.vocabEmpty tells whether it was {}.
// A vocab that is not an object is skipped and flagged (vocabNotObject).
func readTokenizerFile(data []byte, f *tokenizerFile, componentsOnly bool) (merges [][2]string, err error) {
	s := &jsonScanner{data: data}
	vocabSeen := false
	err = s.object(func(key string) error {
		if key == "model" {
			return s.object(func(key string) error {
				if key == "vocab" && s.peek() != '{' {
					// Not a BPE vocabulary (Unigram's is a list): passed
					// over, so that checkModel names the model type.
					vocabSeen, f.Model.vocabNotObject = true, true
					_, err := s.skip()
					return err
				}
				if componentsOnly && (key == "vocab" || key == "merges") {
					raw, err := s.skip()
					if key == "vocab" && err == nil {
						vocabSeen = true
						f.Model.vocabEmpty = len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
						f.Model.vocabRaw = raw
					}
					return err
				}
				switch key {
				case "vocab":
					vocabSeen = true
					f.Model.Vocab = make(map[string]int, 160000)
					return s.object(func(tok string) error {
						id, err := s.integer()
						f.Model.Vocab[tok] = id
						return err
					})
				case "merges":
					return s.array(func() error {
						if s.peek() == '"' {
							m, err := s.str()
							if err != nil {
								return err
							}
							for i := 0; i < len(m); i++ {
								if m[i] == ' ' {
									merges = append(merges, [2]string{m[:i], m[i+1:]})
									return nil
								}
							}
							return fmt.Errorf("model.merges[%d] %q is not \"left right\"", len(merges), m)
						}
						var pair [2]string
						n := 0
						err := s.array(func() error {
							p, err := s.str()
							if n < 2 {
								pair[n] = p
							}
							n++
							return err
						})
						if err == nil && n != 2 {
							err = fmt.Errorf("model.merges[%d] has %d parts, want 2", len(merges), n)
						}
						merges = append(merges, pair)
						return err
					})
				}
				raw, err := s.skip()
				if err != nil {
					return err
				}
				if err := unmarshalModelField(&f.Model, key, raw); err != nil {
					return fmt.Errorf("model.%s: %w", key, err)
				}
				return nil
			})
		}
		raw, err := s.skip()
		if err != nil {
			return err
		}
		var dst any
		switch key {
		case "added_tokens":
			dst = &f.AddedTokens
		case "normalizer":
			f.Normalizer = raw
		case "pre_tokenizer":
			f.PreTokenizer = raw
		case "post_processor":
			f.PostProcessor = raw
		case "decoder":
			f.Decoder = raw
		}
		if dst != nil {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.peek() != 0 {
		return nil, s.errorf("data after the top-level object")
	}
	if !vocabSeen {
		return nil, errors.New("model.vocab is missing")
	}
	if !componentsOnly && !f.Model.vocabNotObject {
		f.Model.vocabEmpty = len(f.Model.Vocab) == 0
	}
	return merges, nil
}

// probeVocab returns the tokens of a vocab object (raw JSON) that checkVocab
// may ask for — byte tokens <0xXX>, single characters, unk — without
// building the whole vocabulary.
func probeVocab(raw []byte, unk *string) (map[string]bool, error) {
	probe := map[string]bool{}
	s := &jsonScanner{data: raw}
	err := s.object(func(tok string) error {
		if _, isByte := byteToken(tok); isByte || utf8.RuneCountInString(tok) == 1 || (unk != nil && tok == *unk) {
			probe[tok] = true
		}
		_, err := s.skip()
		return err
	})
	return probe, err
}

// unmarshalModelField decodes one of the model's small fields.
func unmarshalModelField(m *tokenizerModel, key string, raw []byte) error {
	var dst any
	switch key {
	case "type":
		dst = &m.Type
	case "dropout":
		dst = &m.Dropout
	case "unk_token":
		dst = &m.UnkToken
	case "continuing_subword_prefix":
		dst = &m.ContinuingSubwordPrefix
	case "end_of_word_suffix":
		dst = &m.EndOfWordSuffix
	case "byte_fallback":
		dst = &m.ByteFallback
	case "ignore_merges":
		dst = &m.IgnoreMerges
	case "fuse_unk":
		dst = &m.FuseUnk
	default:
		return nil
	}
	return json.Unmarshal(raw, dst)
}
