package tokenize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	if f, ok := unicodeForms[c.Type]; ok {
		return unicodeForm{f}, nil
	}
	switch c.Type {
	case "Sequence":
		return parseNormSequence(c, where)
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

var unicodeForms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

// parseNormSequence returns nil for an empty Sequence, its one normalizer
// for a Sequence of one.
func parseNormSequence(c component, where string) (normalizer, error) {
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
		return parsePreSequence(c, where)
	case "ByteLevel":
		bl, err := parseByteLevelPre(c)
		return bl, true, err
	case "Split":
		p, err := parsePattern(c, where)
		if err != nil {
			return nil, false, err
		}
		b, err := behaviorNamed(c.Behavior, where)
		return splitPre{pattern: p, behavior: b, invert: c.Invert}, false, err
	case "Metaspace":
		m, err := parseMetaspace(c, where)
		return m, false, err
	case "Digits":
		return digits{individual: c.Individual}, false, nil
	case "Punctuation":
		if c.Behavior == "" {
			return punctuation{isolated}, false, nil
		}
		b, err := behaviorNamed(c.Behavior, where)
		return punctuation{b}, false, err
	case "WhitespaceSplit":
		return whitespaceSplit{}, false, nil
	}
	return nil, false, fmt.Errorf("%s: type %q is not supported (supported: %s)", where, c.Type, supportedPreTokenizers)
}

// parsePreSequence parses a Sequence of pre-tokenizers, of which only the
// last may be ByteLevel.
func parsePreSequence(c component, where string) (pt preTokenizer, byteLevel bool, err error) {
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
	switch len(seq) {
	case 0:
		return nil, byteLevel, nil
	case 1:
		return seq[0], byteLevel, nil
	}
	return seq, byteLevel, nil
}

func parseByteLevelPre(c component) (byteLevelPre, error) {
	bl := byteLevelPre{addPrefixSpace: c.AddPrefix != nil && *c.AddPrefix}
	if c.UseRegex == nil || *c.UseRegex { // use_regex defaults to true
		re, err := compileRegex(gpt2Pattern)
		if err != nil {
			return bl, err
		}
		bl.regex = &re
	}
	return bl, nil
}

// behaviorNamed is a Split or Punctuation behavior by name.
func behaviorNamed(name, where string) (behavior, error) {
	b, ok := behaviors[name]
	if !ok {
		return b, fmt.Errorf("%s: behavior %q is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous", where, name)
	}
	return b, nil
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
		return parseDecSequence(c, where)
	case "Metaspace":
		m, err := parseMetaspace(c, where)
		return metaspaceDec{replacement: m.replacement, scheme: m.scheme}, err
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, fmt.Errorf("%s: Strip needs a one-character \"content\"", where)
		}
		r, _ := utf8.DecodeRuneInString(*c.Content)
		return stripDec{start: c.Start, stop: c.Stop, content: r}, nil
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

func parseDecSequence(c component, where string) (decoder, error) {
	var seq decSequence
	for i, r := range c.Decoders {
		d, err := parseDecoder(r, fmt.Sprintf("%s.decoders[%d]", where, i), false)
		if err != nil {
			return nil, err
		}
		seq = append(seq, d)
	}
	return seq, nil
}

// fastPath reports whether the file is one the hand-made path encodes
// exactly: NFC or no normalizer, Sequence[Split(a hand-made pattern,
// Isolated), ByteLevel without prefix space or regex], and added tokens
// that are all matched as written (normalized=false, or no normalizer) with
// no lstrip, rstrip or single_word. It returns the Qwen/Llama-3 pattern's
// digit count, or the other tiling matcher (gpt-oss).
func fastPath(f *tokenizerFile) (digits int, tile tiling, nfc bool, ok bool) {
	if nfc, ok = fastNormalizer(f.Normalizer); !ok {
		return 0, nil, false, false
	}
	if digits, tile, ok = fastPreTokenizer(f.PreTokenizer); !ok {
		return 0, nil, false, false
	}
	for _, a := range f.AddedTokens {
		if a.LStrip || a.RStrip || a.SingleWord || (a.Normalized && nfc) {
			return 0, nil, false, false
		}
	}
	return digits, tile, nfc, true
}

// fastNormalizer: none, or NFC.
func fastNormalizer(raw json.RawMessage) (nfc, ok bool) {
	if isNull(raw) {
		return false, true
	}
	var n component
	if json.Unmarshal(raw, &n) != nil || n.Type != "NFC" {
		return false, false
	}
	return true, true
}

// fastPreTokenizer: Sequence[Split(a hand-made pattern, Isolated),
// ByteLevel without prefix space or regex].
func fastPreTokenizer(raw json.RawMessage) (digits int, tile tiling, ok bool) {
	var pre component
	if isNull(raw) || json.Unmarshal(raw, &pre) != nil || pre.Type != "Sequence" || len(pre.Pretokenizers) != 2 {
		return 0, nil, false
	}
	var split, bl component
	if json.Unmarshal(pre.Pretokenizers[0], &split) != nil || json.Unmarshal(pre.Pretokenizers[1], &bl) != nil {
		return 0, nil, false
	}
	if !split.isolatedSplit() || !bl.plainByteLevel() {
		return 0, nil, false
	}
	digits, ok = knownPatterns[split.Pattern["Regex"]]
	if !ok {
		// A hand-made tiling matcher (gpt-oss) serves the fast path as well.
		tile, ok = handPatterns[split.Pattern["Regex"]].(tiling)
	}
	return digits, tile, ok
}

// isolatedSplit: Split with one pattern, Isolated, not inverted.
func (c *component) isolatedSplit() bool {
	return c.Type == "Split" && c.Behavior == "Isolated" && !c.Invert && len(c.Pattern) == 1
}

// plainByteLevel: ByteLevel without prefix space, use_regex false.
func (c *component) plainByteLevel() bool {
	return c.Type == "ByteLevel" && (c.AddPrefix == nil || !*c.AddPrefix) && c.UseRegex != nil && !*c.UseRegex
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
