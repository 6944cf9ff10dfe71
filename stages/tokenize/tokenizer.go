// Package tokenize produces exactly the ids of Hugging Face `tokenizers`
// for a model's tokenizer.json, plus the model's chat template (package
// chat) and the loss mask built from token offsets in the rendered text.
//
// Load reads the file component by component: normalizers (NFC, NFD, NFKC,
// NFKD, Lowercase, Strip, Replace, Prepend, Sequence), pre-tokenizers
// (ByteLevel, Split, Metaspace, Digits, Punctuation, WhitespaceSplit,
// Sequence), the BPE model (byte-level, or character-level with
// byte_fallback and unk; ignore_merges, continuing_subword_prefix,
// end_of_word_suffix), added tokens (lstrip, rstrip, normalized,
// single_word) and decoders (ByteLevel, Metaspace, ByteFallback, Fuse,
// Strip, Replace, Sequence). Anything else — another model type, BPE
// dropout, another component — is refused with an error naming the file and
// the component, instead of tokenizing differently.
//
// Files with NFC or no normalizer and the Qwen2/3 or Llama-3 split take a
// hand-made fast path (pretokenize.go); gpt-oss's and DeepSeek-V3's split
// patterns have hand-made matchers (handmatch.go); any other pattern runs
// on regexp2 (pattern.go).
//
// A *Tokenizer is immutable after Load and safe for concurrent use; its only
// shared mutable state is bounded, lock-free word caches.
//
// The tests compare ids and decoded text with Hugging Face tokenizers (npm
// tokenizers@0.23.2) for seven real families (families_test.go), every
// component on edited files (components_test.go) and character tables on
// every code point, and rendered templates with Python jinja2;
// scripts/setup-tokenizer-ref.sh and scripts/fetch-tokenizers.sh install
// what they need.
package tokenize

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes text to ids and back. The zero value is not usable; use Load.
type Tokenizer struct {
	dir string

	// byteID[b] is the id of the single-byte token for byte b.
	byteID [256]int32
	// merges maps a pair of ids to the rank of their merge and the merged id.
	merges mergeTable
	// tokenBytes.at(id) is the raw bytes a token stands for (added tokens:
	// their content). While Load builds it, building holds it as a slice.
	tokenBytes stringTable
	building   []string
	// tokenWords[id] is tokenBytes.at(id) in its low bytes, first byte lowest,
	// and its length in the top byte, when it is shorter than 8 bytes
	// (longToken otherwise): Decode writes a token with one 8-byte store.
	tokenWords []uint64
	// vocab maps the token string as written in tokenizer.json (byte-level
	// alphabet for model tokens) to its id; tokens is its inverse.
	vocab  *vocabIndex
	tokens stringTable

	added        addedMatcher
	special      map[int]bool // ids of added tokens marked special
	ignoreMerges bool         // a word that is itself in the vocab is one token (Llama-3)

	// The fast path (pipe == nil): NFC or nothing, one hand-made split.
	digitsMax int    // \p{N}{1,digitsMax} in the split pattern (1 for Qwen, 3 for Llama-3)
	tile      tiling // instead, another hand-made pattern (gpt-oss); nil for Qwen/Llama-3
	nfc       bool   // the normalizer is NFC (else none)
	// The general path: normalizers, pre-tokenizers, added-token passes.
	pipe *pipeline
	// byteLevel: the model encodes bytes (a ByteLevel pre-tokenizer); else
	// characters, with char's options.
	byteLevel bool
	char      *charModel
	decoder   decoder // nil: ByteLevel, each token's raw bytes

	cache wordCache

	// From tokenizer_config.json / chat_template.jinja.
	chatTemplate string
	specialVars  map[string]any // bos_token, eos_token, ... as the template sees them
}

// Load reads tokenizer.json, tokenizer_config.json and, if present,
// chat_template.jinja from a model directory. tokenizer_config.json is
// optional (no chat template, no named special tokens then); a
// chat_template.jinja file takes precedence over the config's chat_template,
// as in transformers. Errors name the file and what is wrong with it.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := parseTokenizerJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.dir = dir
	if err := t.loadConfig(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// LoadChat reads only the chat template and the special tokens' names of
// the model in dir (tokenizer_config.json, chat_template.jinja), not its
// vocabulary: enough for Chat, cheap enough for pipe check.
func LoadChat(dir string) (*Tokenizer, error) {
	t := &Tokenizer{dir: dir}
	if err := t.loadConfig(dir); err != nil {
		return nil, err
	}
	return t, nil
}

// ByteLevel reports whether the model encodes bytes (a ByteLevel
// pre-tokenizer: GPT-2 style BPE) rather than characters (SentencePiece-style
// BPE with byte fallback).
func (t *Tokenizer) ByteLevel() bool { return t.byteLevel }

// Dir is the model directory the tokenizer was loaded from.
func (t *Tokenizer) Dir() string { return t.dir }

// VocabSize is the number of ids, added tokens included (max id + 1).
func (t *Tokenizer) VocabSize() int { return t.tokenBytes.len() }

// TokenID returns the id of a token given as its text: an added token's
// content ("<|im_end|>") or a model token in the byte-level alphabet ("Ġthe").
func (t *Tokenizer) TokenID(token string) (int, bool) {
	if id, ok := t.added.ids[token]; ok {
		return id, true
	}
	return t.vocab.get(token)
}

// Token returns the token text for id, as TokenID accepts it.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= t.tokenBytes.len() {
		return "", false
	}
	if s, ok := t.added.content[id]; ok {
		return s, true
	}
	s := t.tokens.at(id)
	return s, s != ""
}

// IsSpecial reports whether id is an added token marked "special" (e.g.
// <|im_end|>; not <think> in Qwen3).
func (t *Tokenizer) IsSpecial(id int) bool { return t.special[id] }

// Decode returns the bytes the ids stand for, special tokens included. Unlike
// Hugging Face, which replaces invalid UTF-8 (a multi-byte character cut
// between ids) with U+FFFD, the bytes are returned as they are, so
// Decode(Encode(s)) is s after NFC normalization (of the text between added
// tokens) for every s. Unknown ids are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	if t.decoder != nil {
		return t.decodeWith(ids)
	}
	// Each short token is one 8-byte store into a reused buffer, not a
	// copy call per token: the tokens of a reply average 4 bytes, and
	// their copies were most of Decode's time. The buffer keeps 8 bytes
	// for each id still to come (and 8 more), so a store never overruns it.
	bp := decodeBufs.Get().(*[]byte)
	defer decodeBufs.Put(bp)
	buf := (*bp)[:cap(*bp)]
	if len(buf) < 8*len(ids)+8 {
		buf = make([]byte, 8*len(ids)+8)
	}
	pos := 0
	for i, id := range ids {
		if id < 0 || id >= len(t.tokenWords) {
			continue
		}
		w := t.tokenWords[id]
		if l := int(w >> 56); l != longToken {
			binary.LittleEndian.PutUint64(buf[pos:], w)
			pos += l
			continue
		}
		long := t.tokenBytes.at(id)
		if need := pos + len(long) + 8*(len(ids)-i) + 8; need > len(buf) {
			buf = append(buf[:pos:pos], make([]byte, need-pos)...)
		}
		pos += copy(buf[pos:], long)
	}
	if cap(buf) <= 1<<20 {
		*bp = buf // kept for the next call (a huge one is not)
	}
	return string(buf[:pos])
}

var decodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// ChatTemplate is the model's chat template source ("" if it has none).
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// SpecialTokenVars returns the special-token variables a chat template sees
// (bos_token, eos_token, pad_token, unk_token, additional_special_tokens),
// as transformers passes them; unset ones are absent. The map is a copy.
func (t *Tokenizer) SpecialTokenVars() map[string]any {
	m := make(map[string]any, len(t.specialVars))
	for k, v := range t.specialVars {
		m[k] = v
	}
	return m
}

// The split patterns whose semantics pretokenize.go implements, keyed by the
// exact regex in tokenizer.json, valued by the maximum digits per piece.
var knownPatterns = map[string]int{
	// Qwen2, Qwen2.5, Qwen3.
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: 1,
	// Llama-3 and GPT-4 (cl100k).
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: 3,
}

// CheckFile refuses, as Load would and with the same error, a tokenizer.json
// in dir whose normalizer, pre-tokenizer, model type and options, decoder or
// added tokens this package does not reproduce, or whose vocabulary lacks
// the byte tokens or unk_token the model needs — without building the
// vocabulary and merges, so `pipe check` can afford it. Load runs the same
// checks (setComponents, checkVocab) first. Other consistency errors (a
// merge whose parts are not in the vocabulary, a negative id) are Load's.
func CheckFile(dir string) error {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f tokenizerFile
	if _, err := readTokenizerFile(data, &f, true); err != nil {
		return fmt.Errorf("%s: not a tokenizer.json: %w", path, err)
	}
	var t Tokenizer
	if err := t.setComponents(&f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	probe, err := probeVocab(f.Model.vocabRaw, f.Model.UnkToken)
	if err != nil {
		return fmt.Errorf("%s: not a tokenizer.json: model.vocab: %w", path, err)
	}
	if err := checkVocab(&f.Model, t.byteLevel, func(tok string) bool { return probe[tok] }); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// checkVocab refuses a vocabulary with which the model cannot encode every
// text the way Hugging Face does: ByteLevel without all 256 byte tokens, an
// unk_token that is not in it, or neither unk nor complete byte fallback.
// has reports whether a token is in model.vocab.
func checkVocab(m *tokenizerModel, byteLevel bool, has func(string) bool) error {
	if byteLevel {
		for b := 0; b < 256; b++ {
			if !has(string(byteToRune[b])) {
				return fmt.Errorf("model.vocab has no token for byte 0x%02x (%q); a ByteLevel pre-tokenizer needs all 256", b, string(byteToRune[b]))
			}
		}
		return nil
	}
	if m.UnkToken != nil {
		if !has(*m.UnkToken) {
			return fmt.Errorf("model.unk_token %q is not in model.vocab", *m.UnkToken)
		}
		return nil
	}
	allBytes := true
	for b := 0; b < 256 && allBytes; b++ {
		allBytes = has(fmt.Sprintf("<0x%02X>", b))
	}
	if !(m.ByteFallback && allBytes) {
		return errors.New("model has no unk_token and no complete byte fallback (<0x00>..<0xFF>): Hugging Face fails on text outside the vocabulary, so it is not supported")
	}
	return nil
}

// setComponents parses the normalizer, pre-tokenizer and decoder into t and
// checks the model's type and options: everything Load refuses that does
// not depend on the vocabulary's contents.
func (t *Tokenizer) setComponents(f *tokenizerFile) (err error) {
	// The fast path, or the general pipeline component by component.
	digits, tile, nfc, fast := fastPath(f)
	if fast {
		t.digitsMax, t.tile, t.nfc, t.byteLevel = digits, tile, nfc, true
		if tile != nil {
			initUni()
		}
	} else {
		t.pipe = &pipeline{}
		if t.pipe.normalizer, err = parseNormalizer(f.Normalizer, "normalizer"); err != nil {
			return err
		}
		if t.pipe.pre, t.byteLevel, err = parsePreTokenizer(f.PreTokenizer, "pre_tokenizer"); err != nil {
			return err
		}
		t.pipe.needOrigins = readsOrigins(t.pipe.pre)
	}
	if t.decoder, err = parseDecoder(f.Decoder, "decoder", true); err != nil {
		return err
	}
	return checkModel(&f.Model, t.byteLevel)
}

func parseTokenizerJSON(data []byte) (*Tokenizer, error) {
	var f tokenizerFile
	merges, err := readTokenizerFile(data, &f, false)
	if err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	initClasses()
	t := &Tokenizer{special: map[int]bool{}}
	m := &f.Model
	if err := t.setComponents(&f); err != nil {
		return nil, err
	}
	if err := checkVocab(m, t.byteLevel, func(tok string) bool { _, ok := m.Vocab[tok]; return ok }); err != nil {
		return nil, err
	}
	t.ignoreMerges = m.IgnoreMerges
	addedIDs := assignAddedIDs(&f)
	if err := t.setVocab(m, addedIDs); err != nil {
		return nil, err
	}
	if err := t.setModel(m, merges); err != nil {
		return nil, err
	}
	t.setAddedTokens(&f, addedIDs)
	t.setTokenWords()
	if t.tokenBytes, err = packStrings(t.building); err != nil {
		return nil, fmt.Errorf("model.vocab and added_tokens: %w", err)
	}
	t.building = nil
	t.cache.init()
	return t, nil
}

// setTokenWords fills tokenWords from tokenBytes, once they are final.
func (t *Tokenizer) setTokenWords() {
	t.tokenWords = make([]uint64, len(t.building))
	for id, b := range t.building {
		if len(b) >= 8 {
			t.tokenWords[id] = longToken << 56
			continue
		}
		var w uint64
		for i := len(b) - 1; i >= 0; i-- {
			w = w<<8 | uint64(b[i])
		}
		t.tokenWords[id] = w | uint64(len(b))<<56
	}
}

// longToken in a tokenWords entry's top byte: the token has 8 bytes or
// more (tokenBytes holds them).
const longToken = 0xFF

// setVocab fills the id tables from the model's vocabulary; they are as
// long as the largest id, added tokens' included.
func (t *Tokenizer) setVocab(m *tokenizerModel, addedIDs []int) error {
	maxID := -1
	for _, id := range m.Vocab {
		maxID = max(maxID, id)
	}
	for _, id := range addedIDs {
		maxID = max(maxID, id)
	}
	t.building = make([]string, maxID+1)
	tokens := make([]string, maxID+1)
	for tok, id := range m.Vocab {
		if id < 0 {
			return fmt.Errorf("model.vocab: token %q has negative id %d", tok, id)
		}
		t.building[id] = t.coveredBytes(m, tok)
		tokens[id] = tok
	}
	var err error
	if t.tokens, err = packStrings(tokens); err != nil {
		return fmt.Errorf("model.vocab: %w", err)
	}
	t.vocab = newVocabIndex(m.Vocab, t.tokens)
	return nil
}

// coveredBytes is what a token covers of the text the model saw: raw bytes
// with ByteLevel, else the token as written (a <0xXX> byte token: its
// byte). Model tokens outside the byte-level alphabet can never be
// produced by encoding; they stay decodable as written.
func (t *Tokenizer) coveredBytes(m *tokenizerModel, tok string) string {
	if t.byteLevel {
		if b, ok := byteLevelDecode(tok); ok {
			return b
		}
		return tok
	}
	if c, isByte := byteToken(tok); isByte && m.ByteFallback {
		return string([]byte{c})
	}
	return tok
}

// setModel sets the byte ids (ByteLevel) or the character model, and the
// merges.
func (t *Tokenizer) setModel(m *tokenizerModel, merges [][2]string) error {
	if t.byteLevel {
		for b := 0; b < 256; b++ {
			id, ok := m.Vocab[string(byteToRune[b])]
			if !ok {
				return fmt.Errorf("model.vocab has no token for byte 0x%02x (%q); a ByteLevel pre-tokenizer needs all 256", b, string(byteToRune[b]))
			}
			t.byteID[b] = int32(id)
		}
	} else if err := t.initCharModel(m); err != nil {
		return err
	}
	prefix := ""
	if m.ContinuingSubwordPrefix != nil {
		prefix = *m.ContinuingSubwordPrefix
	}
	if err := t.setMerges(merges, m.Vocab, prefix); err != nil {
		return err
	}
	if t.char != nil {
		t.char.noteMerges(m, merges, t.ignoreMerges)
	}
	return nil
}

// noteMerges records what the character model must know of the merges.
func (c *charModel) noteMerges(m *tokenizerModel, merges [][2]string, ignoreMerges bool) {
	_, hasMeta := c.charID[meta]
	c.splitAtMeta = hasMeta && !ignoreMerges && c.prefix == "" && c.suffix == ""
	c.unsafePrev = map[rune]bool{}
	for _, p := range merges {
		c.noteMerge(p[0] + p[1])
	}
	c.fallbackSafe = !c.unsafePrev['>']
	if m.UnkToken != nil {
		r, _ := utf8.DecodeLastRuneInString(*m.UnkToken)
		c.fallbackSafe = c.fallbackSafe && !c.unsafePrev[r]
	}
}

// setAddedTokens builds the added-token tables and matchers.
func (t *Tokenizer) setAddedTokens(f *tokenizerFile, addedIDs []int) {
	tokens, normalized := t.addedTokens(f, addedIDs)
	var raw, normd []addedToken
	for _, tok := range tokens {
		if t.pipe == nil {
			break
		}
		if !normalized[tok.id] {
			raw = append(raw, tok)
			continue
		}
		// Matched in normalized text as its own normalized form, as
		// AddedVocabulary::refresh_added_tokens builds its normalized trie.
		if t.pipe.normalizer != nil {
			tok.content = t.pipe.normalizer.normalize(textPiece(tok.content)).s
		}
		if tok.content != "" {
			normd = append(normd, tok)
		}
		// Decoding sees the normalized form (simple_id_to_token).
		t.added.decodeForm[tok.id] = tok.content
	}
	if t.byteLevel {
		// The ByteLevel decoder maps an added token's characters back to
		// bytes too, where they are all in its alphabet.
		for id, s := range t.added.content {
			if form, ok := t.added.decodeForm[id]; ok {
				s = form
			}
			if b, ok := byteLevelDecode(s); ok {
				t.building[id] = b
			}
		}
	}
	t.added.build(tokens)
	if t.pipe != nil {
		t.pipe.raw.build(raw)
		t.pipe.norm.build(normd)
	}
}

// addedTokens fills the added-token id tables and returns the tokens, one
// per id, with whether each is matched in normalized text. A later entry
// with the same content replaces an earlier one's options
// (AddedVocabulary::add_tokens).
func (t *Tokenizer) addedTokens(f *tokenizerFile, addedIDs []int) ([]addedToken, map[int]bool) {
	t.added.ids = map[string]int{}
	t.added.content = map[int]string{}
	t.added.decodeForm = map[int]string{}
	var tokens []addedToken
	at := map[int]int{} // id -> index in tokens
	normalized := map[int]bool{}
	for i, a := range f.AddedTokens {
		id := addedIDs[i]
		if id < 0 {
			continue // empty content: Hugging Face skips it
		}
		t.added.ids[a.Content] = id
		t.added.content[id] = a.Content
		t.building[id] = a.Content
		if a.Special {
			t.special[id] = true
		}
		tok := addedToken{content: a.Content, id: id, lstrip: a.LStrip, rstrip: a.RStrip, singleWord: a.SingleWord}
		normalized[id] = a.Normalized
		if k, ok := at[id]; ok {
			tokens[k] = tok
			continue
		}
		at[id] = len(tokens)
		tokens = append(tokens, tok)
	}
	return tokens, normalized
}

// assignAddedIDs gives each added token the id Hugging Face gives it when
// it loads the file (AddedVocabulary::add_tokens, called by the
// deserializer): the id of the same content seen before (an earlier entry,
// or the model's vocabulary), else the next id after the vocabulary. The
// "id" written in the file is not used (Hugging Face only warns when it
// differs). -1 for an entry with empty content, which is skipped.
func assignAddedIDs(f *tokenizerFile) []int {
	ids := make([]int, len(f.AddedTokens))
	next := len(f.Model.Vocab) // BPE::get_vocab_size
	seen := map[string]int{}
	for i, a := range f.AddedTokens {
		if a.Content == "" {
			ids[i] = -1
			continue
		}
		id, ok := seen[a.Content]
		if !ok {
			if id, ok = f.Model.Vocab[a.Content]; !ok {
				id = next
				next++
			}
			seen[a.Content] = id
		}
		ids[i] = id
	}
	return ids
}

// initCharModel sets up the BPE model for tokenizers without ByteLevel.
func (t *Tokenizer) initCharModel(m *tokenizerModel) error {
	c := &charModel{charID: map[rune]int32{}, byteFallback: m.ByteFallback, fuseUnk: m.FuseUnk, unk: -1}
	if m.ContinuingSubwordPrefix != nil {
		c.prefix = *m.ContinuingSubwordPrefix
	}
	if m.EndOfWordSuffix != nil {
		c.suffix = *m.EndOfWordSuffix
	}
	for tok, id := range m.Vocab {
		if r, size := utf8.DecodeRuneInString(tok); size == len(tok) && (r != utf8.RuneError || size > 1) {
			c.charID[r] = int32(id)
		}
	}
	allBytes := true
	for b := 0; b < 256; b++ {
		c.byteID[b] = -1
		if id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			c.byteID[b] = int32(id)
		} else {
			allBytes = false
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return fmt.Errorf("model.unk_token %q is not in model.vocab", *m.UnkToken)
		}
		c.unk = int32(id)
	}
	if c.unk < 0 && !(m.ByteFallback && allBytes) {
		return errors.New("model has no unk_token and no complete byte fallback (<0x00>..<0xFF>): Hugging Face fails on text outside the vocabulary, so it is not supported")
	}
	c.cache.init()
	t.char = c
	return nil
}

// setMerges indexes the merges by pair of ids; merges[rank] = (left, right).
func (t *Tokenizer) setMerges(pairs [][2]string, vocab map[string]int, prefix string) error {
	t.merges.init(len(pairs))
	var buf []byte
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		// With a continuing_subword_prefix the right part carries it and
		// the merged token does not (BPE::from builder).
		right := p[1]
		if len(right) >= len(prefix) {
			right = right[len(prefix):]
		}
		buf = append(append(buf[:0], p[0]...), right...)
		m, okM := vocab[string(buf)]
		if !okA || !okB || !okM {
			return fmt.Errorf("model.merges[%d] %q + %q: a part or the merged token is not in model.vocab", rank, p[0], p[1])
		}
		// A pair listed twice keeps its later rank: tokenizers collects the
		// list into a map (BPE builder, MergeMap), the later entry replacing.
		t.merges.put(int32(a), int32(b), int32(rank), int32(m))
	}
	return nil
}

// loadConfig reads tokenizer_config.json (optional) and chat_template.jinja
// (optional, preferred).
func (t *Tokenizer) loadConfig(dir string) error {
	t.specialVars = map[string]any{}
	path := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := t.readConfig(path, data); err != nil {
			return err
		}
	}
	jpath := filepath.Join(dir, "chat_template.jinja")
	if data, err := os.ReadFile(jpath); err == nil {
		t.chatTemplate = string(data)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// readConfig takes the chat template and the special tokens' names from
// tokenizer_config.json (at path).
func (t *Tokenizer) readConfig(path string, data []byte) error {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: not a JSON object: %w", path, err)
	}
	if raw, ok := cfg["chat_template"]; ok && string(raw) != "null" {
		tmpl, err := parseChatTemplateField(raw)
		if err != nil {
			return fmt.Errorf("%s: chat_template: %w", path, err)
		}
		t.chatTemplate = tmpl
	}
	for _, key := range []string{"bos_token", "eos_token", "unk_token", "pad_token"} {
		raw, ok := cfg[key]
		if !ok || string(raw) == "null" {
			continue
		}
		s, err := specialTokenContent(raw)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, key, err)
		}
		t.specialVars[key] = s
	}
	if raw, ok := cfg["additional_special_tokens"]; ok && string(raw) != "null" {
		names, err := specialTokenList(raw)
		if err != nil {
			return fmt.Errorf("%s: additional_special_tokens%w", path, err)
		}
		t.specialVars["additional_special_tokens"] = names
	}
	return nil
}

// specialTokenList reads additional_special_tokens; its errors start with
// the element's index, or ": want a list".
func specialTokenList(raw json.RawMessage) ([]any, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf(": want a list: %w", err)
	}
	var names []any
	for i, r := range list {
		s, err := specialTokenContent(r)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		names = append(names, s)
	}
	return names, nil
}

// parseChatTemplateField accepts a template string or the list form
// [{"name": "default", "template": ...}, ...], taking "default".
func parseChatTemplateField(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New("want a string or a list of {name, template}")
	}
	sort.SliceStable(named, func(i, j int) bool { return named[i].Name == "default" && named[j].Name != "default" })
	if len(named) == 0 || named[0].Name != "default" {
		return "", errors.New("list form has no template named \"default\"")
	}
	return named[0].Template, nil
}

// specialTokenContent accepts "tok" or {"content": "tok", ...}.
func specialTokenContent(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", errors.New("want a string or an object with \"content\"")
	}
	return *obj.Content, nil
}
