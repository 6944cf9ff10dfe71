package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// tokenizerFile is the subset of tokenizer.json this package understands;
// anything else that would change ids is rejected by parseTokenizerJSON.
// It is read with go-json-experiment/json: model.vocab and model.merges,
// almost all of Qwen3's 11 MB, token by token with jsontext; the small
// components are kept raw for the parsers in pipeline.go.
type tokenizerFile struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         tokenizerModel   `json:"model"`
}

type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type tokenizerModel struct {
	Type                    string         `json:"type"`
	Dropout                 *float64       `json:"dropout"`
	UnkToken                *string        `json:"unk_token"`
	ContinuingSubwordPrefix *string        `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string        `json:"end_of_word_suffix"`
	ByteFallback            bool           `json:"byte_fallback"`
	FuseUnk                 bool           `json:"fuse_unk"`
	IgnoreMerges            bool           `json:"ignore_merges"`
	VocabJSON               vocab          `json:"vocab"`
	MergesJSON              merges         `json:"merges"`
	Vocab                   map[string]int `json:"-"`
	vocabEmpty              bool           // {} (or not an object)
	vocabNotObject          bool
	vocabRaw                []byte // CheckFile: the vocab object, not decoded
}

// vocab is model.vocab, an object of token: id. With skip (CheckFile) it
// is kept raw, not decoded; a value that is not an object is passed over
// and flagged, so that checkModel names the model type (Unigram's vocab is
// a list).
type vocab struct {
	skip      bool
	seen      bool
	notObject bool
	raw       []byte
	ids       map[string]int
}

func (v *vocab) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v.seen = true
	if dec.PeekKind() != '{' {
		v.notObject = true
		return dec.SkipValue()
	}
	if v.skip {
		raw, err := dec.ReadValue()
		v.raw = bytes.Clone(raw)
		return err
	}
	v.ids = make(map[string]int, 160000)
	return eachMember(dec, func(tok string) error {
		id, err := readInt(dec)
		if err != nil {
			return place(err, fmt.Sprintf("model.vocab[%q]", tok))
		}
		v.ids[tok] = id
		return nil
	})
}

// merges is model.merges: "left right" strings or [left, right] pairs.
// With skip (CheckFile) it is passed over.
type merges struct {
	skip  bool
	pairs [][2]string
}

func (m *merges) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if m.skip {
		return dec.SkipValue()
	}
	if err := readDelim(dec, '['); err != nil {
		return place(err, "model.merges")
	}
	for dec.PeekKind() != ']' {
		pair, err := readMerge(dec, len(m.pairs))
		if err != nil {
			return place(err, "")
		}
		m.pairs = append(m.pairs, pair)
	}
	_, err := dec.ReadToken()
	return err
}

// readMerge reads merge i: "left right" or ["left", "right"].
func readMerge(dec *jsontext.Decoder, i int) ([2]string, error) {
	if dec.PeekKind() == '"' {
		s, err := readString(dec)
		if err != nil {
			return [2]string{}, err
		}
		if l, r, ok := strings.Cut(s, " "); ok {
			return [2]string{l, r}, nil
		}
		return [2]string{}, fmt.Errorf("model.merges[%d] %q is not \"left right\"", i, s)
	}
	bad := func() error { return fmt.Errorf("model.merges[%d]: want \"left right\" or [left, right]", i) }
	if dec.PeekKind() != '[' {
		if err := dec.SkipValue(); err != nil {
			return [2]string{}, err
		}
		return [2]string{}, bad()
	}
	if _, err := dec.ReadToken(); err != nil {
		return [2]string{}, err
	}
	var pair [2]string
	n := 0
	for ; dec.PeekKind() == '"'; n++ {
		p, err := readString(dec)
		if err != nil {
			return [2]string{}, err
		}
		if n < 2 {
			pair[n] = p
		}
	}
	if k := dec.PeekKind(); k != ']' {
		if k == 0 {
			_, err := dec.ReadToken()
			return [2]string{}, err
		}
		return [2]string{}, bad()
	}
	if _, err := dec.ReadToken(); err != nil {
		return [2]string{}, err
	}
	if n != 2 {
		return [2]string{}, fmt.Errorf("model.merges[%d] has %d parts, want 2", i, n)
	}
	return pair, nil
}

// fileOpts: a repeated name is read again (the last one wins), as serde
// does for tokenizers' maps; without it the library would also keep every
// vocab token to check, which costs a third of the load.
var fileOpts = jsontext.AllowDuplicateNames(true)

// readTokenizerFile fills f from tokenizer.json. With componentsOnly,
// vocab and merges are only passed over (CheckFile): f.Model.Vocab stays
// nil, f.Model.vocabRaw holds the vocab object and f.Model.vocabEmpty
// tells whether it was {}.
func readTokenizerFile(data []byte, f *tokenizerFile, componentsOnly bool) ([][2]string, error) {
	m := &f.Model
	m.VocabJSON.skip, m.MergesJSON.skip = componentsOnly, componentsOnly
	if err := jsonv2.Unmarshal(data, f, fileOpts); err != nil {
		return nil, plainError(err)
	}
	v := &m.VocabJSON
	if !v.seen {
		return nil, errors.New("model.vocab is missing")
	}
	m.Vocab, m.vocabRaw, m.vocabNotObject = v.ids, v.raw, v.notObject
	if componentsOnly {
		m.vocabEmpty = !v.notObject && emptyObject(v.raw)
	} else {
		m.vocabEmpty = len(v.ids) == 0
	}
	return m.MergesJSON.pairs, nil
}

// placed is one of our errors, which says where it is.
type placed struct{ error }

// place marks err as ours, prefixed with where; a syntax error stays the
// library's, which says where it is.
func place(err error, where string) error {
	switch {
	case isSyntax(err):
		return err
	case where == "":
		return placed{err}
	}
	return placed{fmt.Errorf("%s: %w", where, err)}
}

func isSyntax(err error) bool {
	var syn *jsontext.SyntacticError
	return errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF)
}

// plainError is the library's error without the Go type it names: our own
// errors as they are, a syntax error with its offset, a value of the wrong
// kind as "added_tokens: [0].content: want a string, got a number".
func plainError(err error) error {
	var p placed
	if errors.As(err, &p) {
		return p.error
	}
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return err
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return syn
	}
	var where string
	for i, seg := range strings.Split(strings.TrimPrefix(string(se.JSONPointer), "/"), "/") {
		switch _, err := strconv.Atoi(seg); {
		case i == 0:
			where = seg
		case i == 1 && err == nil:
			where += ": [" + seg + "]"
		case i == 1:
			where += ": " + seg
		case err == nil:
			where += "[" + seg + "]"
		default:
			where += "." + seg
		}
	}
	if where == "" {
		where = "the file"
	}
	if se.Err == nil && se.GoType != nil {
		return fmt.Errorf("%s: want %s, got %s", where, goKindName(se.GoType.Kind()), jsonKindName(se.JSONKind))
	}
	return fmt.Errorf("%s: %w", where, se.Err)
}

func goKindName(k reflect.Kind) string {
	switch k {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a number"
}

func jsonKindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func emptyObject(raw []byte) bool {
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// probeVocab returns the tokens of a vocab object (raw JSON) that checkVocab
// may ask for — byte tokens <0xXX>, single characters, unk — without
// building the whole vocabulary.
func probeVocab(raw []byte, unk *string) (map[string]bool, error) {
	probe := map[string]bool{}
	dec := jsontext.NewDecoder(bytes.NewReader(raw), fileOpts)
	err := eachMember(dec, func(tok string) error {
		if _, isByte := byteToken(tok); isByte || utf8.RuneCountInString(tok) == 1 || (unk != nil && tok == *unk) {
			probe[tok] = true
		}
		return dec.SkipValue()
	})
	return probe, err
}

// eachMember reads an object, calling fn with each name; fn reads the value.
func eachMember(dec *jsontext.Decoder, fn func(name string) error) error {
	if err := readDelim(dec, '{'); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		name, err := readString(dec)
		if err != nil {
			return err
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

func readDelim(dec *jsontext.Decoder, want jsontext.Kind) error {
	if k := dec.PeekKind(); k != want {
		if k == 0 {
			_, err := dec.ReadToken()
			return err
		}
		return fmt.Errorf("want %s, got %s", jsonKindName(want), jsonKindName(k))
	}
	_, err := dec.ReadToken()
	return err
}

// readString reads a string (or an object's name) with one allocation,
// where a token's String makes two; the tokens of vocab and merges are
// 450,000 strings.
func readString(dec *jsontext.Decoder) (string, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	if v.Kind() != '"' {
		return "", fmt.Errorf("want a string, got %s", jsonKindName(v.Kind()))
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil
	}
	b, err := jsontext.AppendUnquote(nil, v)
	return string(b), err
}

// readInt reads an integer id: a JSON number with no fraction or exponent
// that fits an int32 (an id column). Its digits are read here, without the
// string a token would allocate: 150,000 times per load.
func readInt(dec *jsontext.Decoder) (int, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return 0, err
	}
	digits, neg := v, false
	if len(digits) > 0 && digits[0] == '-' {
		digits, neg = digits[1:], true
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' || n > math.MaxInt32 {
			return 0, errors.New("want an integer id")
		}
		n = n*10 + int(c-'0')
	}
	if len(digits) == 0 || n > math.MaxInt32 {
		return 0, errors.New("want an integer id")
	}
	if neg {
		n = -n
	}
	return n, nil
}
