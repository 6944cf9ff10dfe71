package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The components of tokenizer.json this package reproduces. Anything else
// is refused at Load (and so by `pipe check`), naming the component: a
// tokenizer that silently encodes differently would poison training data.
const (
	supportedNormalizers   = "NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, Prepend, Sequence"
	supportedPreTokenizers = "ByteLevel, Split, Metaspace, Digits, Punctuation, WhitespaceSplit, Sequence"
	supportedDecoders      = "ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence"
)

// pipeline is the general encoding path, for files the hand-made fast path
// (NFC or nothing, then a Qwen or Llama-3 Split and ByteLevel) does not cover.
type pipeline struct {
	normalizer normalizer   // nil: none
	pre        preTokenizer // nil: the whole piece goes to the model
	// The added tokens, as AddedVocabulary splits them: those with
	// normalized=false are found in the input as written, the others in
	// each normalized piece between them, as their normalized content.
	raw, norm addedMatcher
	// needOrigins: a step reads where a piece starts in the input
	// (Metaspace's prepend_scheme "first"), so pieces track their origins
	// even when no offsets are asked for.
	needOrigins bool
}

func readsOrigins(pt preTokenizer) bool {
	switch p := pt.(type) {
	case preSequence:
		for _, x := range p {
			if readsOrigins(x) {
				return true
			}
		}
	case metaspace:
		return p.scheme == "first"
	}
	return false
}

// component is any normalizer, pre-tokenizer or decoder object.
type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Pattern       map[string]string `json:"pattern"`
	Content       *string           `json:"content"`
	Prepend       *string           `json:"prepend"`
	StripLeft     bool              `json:"strip_left"`
	StripRight    bool              `json:"strip_right"`
	Behavior      string            `json:"behavior"`
	Invert        bool              `json:"invert"`
	AddPrefix     *bool             `json:"add_prefix_space"`
	UseRegex      *bool             `json:"use_regex"`
	Replacement   *string           `json:"replacement"`
	PrependScheme *string           `json:"prepend_scheme"`
	Split         *bool             `json:"split"`
	Individual    bool              `json:"individual_digits"`
	Start         int               `json:"start"`
	Stop          int               `json:"stop"`
}

func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}

func decodeComponent(raw json.RawMessage, where string) (component, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("%s: %w", where, err)
	}
	if c.Type == "" {
		return c, fmt.Errorf("%s: no \"type\"", where)
	}
	return c, nil
}

// parsePattern reads {"String": s} or {"Regex": r}.
func parsePattern(c component, where string) (splitPattern, error) {
	if s, ok := c.Pattern["String"]; ok && len(c.Pattern) == 1 {
		return literal(s), nil
	}
	if r, ok := c.Pattern["Regex"]; ok && len(c.Pattern) == 1 {
		if d, ok := knownPatterns[r]; ok {
			return knownPattern{d}, nil
		}
		if h, ok := handPatterns[r]; ok {
			initUni()
			return h, nil
		}
		re, err := compileRegex(r)
		if err != nil {
			return nil, fmt.Errorf("%s: pattern %q: %v", where, r, err)
		}
		return re, nil
	}
	return nil, fmt.Errorf("%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", where)
}

// parseNormalizer returns nil for null or an empty Sequence.
func parseNormalizer(raw json.RawMessage, where string) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	c, err := decodeComponent(raw, where)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var seq normSequence
		for i, r := range c.Normalizers {
			n, err := parseNormalizer(r, fmt.Sprintf("%s.normalizers[%d]", where, i))
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		switch len(seq) {
		case 0:
			return nil, nil
		case 1:
			return seq[0], nil
		}
		return seq, nil
	case "NFC":
		return unicodeForm{norm.NFC}, nil
	case "NFD":
		return unicodeForm{norm.NFD}, nil
	case "NFKC":
		return unicodeForm{norm.NFKC}, nil
	case "NFKD":
		return unicodeForm{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Strip":
		return strip{left: c.StripLeft, right: c.StripRight}, nil
	case "Prepend":
		if c.Prepend == nil {
			return nil, fmt.Errorf("%s: Prepend without \"prepend\"", where)
		}
		return prepend{*c.Prepend}, nil
	case "Replace":
		p, err := parsePattern(c, where)
		if err != nil {
			return nil, err
		}
		if c.Content == nil {
			return nil, fmt.Errorf("%s: Replace without \"content\"", where)
		}
		return replace{p, *c.Content}, nil
	}
	return nil, fmt.Errorf("%s: type %q is not supported (supported: %s)", where, c.Type, supportedNormalizers)
}

// parsePreTokenizer returns the pre-tokenizer and whether its last step is
// ByteLevel (then the model encodes bytes). ByteLevel anywhere else is
// refused: later steps would see its byte-level characters.
func parsePreTokenizer(raw json.RawMessage, where string) (pt preTokenizer, byteLevel bool, err error) {
	if isNull(raw) {
		return nil, false, nil
	}
	c, err := decodeComponent(raw, where)
	if err != nil {
		return nil, false, err
	}
	switch c.Type {
	case "Sequence":
		var seq preSequence
		for i, r := range c.Pretokenizers {
			w := fmt.Sprintf("%s.pretokenizers[%d]", where, i)
			if byteLevel {
				return nil, false, fmt.Errorf("%s: ByteLevel must be the last pre-tokenizer; this one follows it", w)
			}
			p, bl, err := parsePreTokenizer(r, w)
			if err != nil {
				return nil, false, err
			}
			byteLevel = bl
			if p != nil {
				seq = append(seq, p)
			}
		}
		if len(seq) == 1 {
			return seq[0], byteLevel, nil
		}
		if len(seq) == 0 {
			return nil, byteLevel, nil
		}
		return seq, byteLevel, nil
	case "ByteLevel":
		bl := byteLevelPre{addPrefixSpace: c.AddPrefix != nil && *c.AddPrefix}
		if c.UseRegex == nil || *c.UseRegex { // use_regex defaults to true
			re, err := compileRegex(gpt2Pattern)
			if err != nil {
				return nil, false, err
			}
			bl.regex = &re
		}
		return bl, true, nil
	case "Split":
		p, err := parsePattern(c, where)
		if err != nil {
			return nil, false, err
		}
		b, ok := behaviors[c.Behavior]
		if !ok {
			return nil, false, fmt.Errorf("%s: behavior %q is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", where, c.Behavior)
		}
		return splitPre{pattern: p, behavior: b, invert: c.Invert}, false, nil
	case "Metaspace":
		m, err := parseMetaspace(c, where)
		return m, false, err
	case "Digits":
		return digits{individual: c.Individual}, false, nil
	case "Punctuation":
		b := isolated
		if c.Behavior != "" {
			var ok bool
			if b, ok = behaviors[c.Behavior]; !ok {
				return nil, false, fmt.Errorf("%s: behavior %q is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", where, c.Behavior)
			}
		}
		return punctuation{b}, false, nil
	case "WhitespaceSplit":
		return whitespaceSplit{}, false, nil
	}
	return nil, false, fmt.Errorf("%s: type %q is not supported (supported: %s)", where, c.Type, supportedPreTokenizers)
}

// parseMetaspace reads replacement, prepend_scheme (default "always"; the
// older add_prefix_space=false means "never") and split (default true).
func parseMetaspace(c component, where string) (metaspace, error) {
	m := metaspace{replacement: '▁', scheme: "always", splitOn: true}
	if c.Replacement != nil {
		r, size := utf8.DecodeRuneInString(*c.Replacement)
		if size == 0 || size != len(*c.Replacement) {
			return m, fmt.Errorf("%s: replacement %q must be one character", where, *c.Replacement)
		}
		m.replacement = r
	}
	if c.PrependScheme != nil {
		switch *c.PrependScheme {
		case "always", "first", "never":
			m.scheme = *c.PrependScheme
		default:
			return m, fmt.Errorf("%s: prepend_scheme %q is not one of always, first, never", where, *c.PrependScheme)
		}
	}
	if c.AddPrefix != nil && !*c.AddPrefix {
		if c.PrependScheme != nil && m.scheme != "never" {
			return m, fmt.Errorf("%s: add_prefix_space=false contradicts prepend_scheme %q", where, m.scheme)
		}
		m.scheme = "never"
	}
	if c.Split != nil {
		m.splitOn = *c.Split
	}
	return m, nil
}

// parseDecoder returns nil for a ByteLevel decoder (Decode then takes the
// raw bytes of each token, the fast way).
func parseDecoder(raw json.RawMessage, where string, top bool) (decoder, error) {
	if isNull(raw) {
		return joinSpace{}, nil
	}
	c, err := decodeComponent(raw, where)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		if top {
			return nil, nil
		}
		return byteLevelDec{}, nil
	case "Sequence":
		var seq decSequence
		for i, r := range c.Decoders {
			d, err := parseDecoder(r, fmt.Sprintf("%s.decoders[%d]", where, i), false)
			if err != nil {
				return nil, err
			}
			seq = append(seq, d)
		}
		return seq, nil
	case "Metaspace":
		m, err := parseMetaspace(c, where)
		return metaspaceDec{replacement: m.replacement, scheme: m.scheme}, err
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		d := stripDec{start: c.Start, stop: c.Stop}
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, fmt.Errorf("%s: Strip needs a one-character \"content\"", where)
		}
		d.content, _ = utf8.DecodeRuneInString(*c.Content)
		return d, nil
	case "Replace":
		p, err := parsePattern(c, where)
		if err != nil {
			return nil, err
		}
		if c.Content == nil {
			return nil, fmt.Errorf("%s: Replace without \"content\"", where)
		}
		return replaceDec{p, *c.Content}, nil
	}
	return nil, fmt.Errorf("%s: type %q is not supported (supported: %s)", where, c.Type, supportedDecoders)
}

// fastPath reports whether the file is one the hand-made path encodes
// exactly: NFC or no normalizer, Sequence[Split(Qwen or Llama-3 pattern,
// Isolated), ByteLevel without prefix space or regex], and added tokens
// that are all matched as written (normalized=false, or no normalizer) with
// no lstrip, rstrip or single_word. It returns the pattern's digit count.
// fastPath reports whether the file is one the hand-made path encodes
// exactly: NFC or no normalizer, Sequence[Split(a hand-made pattern,
// Isolated), ByteLevel without prefix space or regex], and added tokens
// that are all matched as written (normalized=false, or no normalizer) with
// no lstrip, rstrip or single_word. It returns the Qwen/Llama-3 pattern's
// digit count, or the other tiling matcher (gpt-oss).
func fastPath(f *tokenizerFile) (digits int, tile tiling, nfc bool, ok bool) {
	if !isNull(f.Normalizer) {
		var n component
		if json.Unmarshal(f.Normalizer, &n) != nil || n.Type != "NFC" {
			return 0, nil, false, false
		}
		nfc = true
	}
	var pre component
	if isNull(f.PreTokenizer) || json.Unmarshal(f.PreTokenizer, &pre) != nil || pre.Type != "Sequence" || len(pre.Pretokenizers) != 2 {
		return 0, nil, false, false
	}
	var split, bl component
	if json.Unmarshal(pre.Pretokenizers[0], &split) != nil || json.Unmarshal(pre.Pretokenizers[1], &bl) != nil {
		return 0, nil, false, false
	}
	if split.Type != "Split" || split.Behavior != "Isolated" || split.Invert || len(split.Pattern) != 1 {
		return 0, nil, false, false
	}
	digits, ok = knownPatterns[split.Pattern["Regex"]]
	if !ok {
		// A hand-made tiling matcher (gpt-oss) serves the fast path as well.
		tile, ok = handPatterns[split.Pattern["Regex"]].(tiling)
	}
	if !ok || bl.Type != "ByteLevel" || (bl.AddPrefix != nil && *bl.AddPrefix) || bl.UseRegex == nil || *bl.UseRegex {
		return 0, nil, false, false
	}
	for _, a := range f.AddedTokens {
		if a.LStrip || a.RStrip || a.SingleWord || (a.Normalized && nfc) {
			return 0, nil, false, false
		}
	}
	return digits, tile, nfc, true
}

// checkModel refuses BPE options this package does not reproduce.
func checkModel(m *tokenizerModel, byteLevel bool) error {
	if m.Type != "BPE" {
		return fmt.Errorf("model.type is %q; only \"BPE\" is supported", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("model.dropout is %v; BPE dropout (random merges) is not supported", *m.Dropout)
	}
	if m.vocabNotObject {
		return errors.New("model.vocab is not an object of token: id")
	}
	if m.vocabEmpty {
		return errors.New("model.vocab is empty")
	}
	affix := (m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "") || (m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "")
	if byteLevel && affix {
		return errors.New("model.continuing_subword_prefix/end_of_word_suffix with a ByteLevel pre-tokenizer are not supported")
	}
	return nil
}

func describe(r json.RawMessage) string {
	s := strings.TrimSpace(string(r))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
