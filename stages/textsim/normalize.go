// Package textsim measures how much two texts share, for the prompt
// hygiene kinds: the normalisation of datatrove's simplify_text, word
// n-grams, MinHash signatures with an LSH index over them (near
// duplicates), and an index of a reference set's n-grams (benchmark
// overlap).
//
// Everything here is deterministic across processes and machines (fixed
// hash functions and seeds), so a restarted run decides the same.
package textsim

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Normalize appends text's words to dst, each followed by one space, the
// way datatrove's simplify_text (src/datatrove/utils/text.py, TextNormConfig
// defaults) does it: lowercase, punctuation, symbols and control
// characters as spaces, runs of space as one, diacritics dropped (NFD, then
// combining marks removed). With zeroNumbers a run of digits (with one
// inner "." or ",": 3.14, 1,000) becomes "0", as datatrove's norm_numbers
// does. Han, Hiragana, Katakana and Thai characters are each a word of
// their own, since those scripts do not separate words with spaces.
func Normalize(dst []byte, text string, zeroNumbers bool) []byte {
	if !isASCII(text) {
		text = norm.NFD.String(text)
	}
	space := true // at a word boundary: the next word needs no separator
	end := func() {
		if !space {
			dst = append(dst, ' ')
			space = true
		}
	}
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		i += size
		switch {
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z'):
			dst, space = append(dst, byte(r)), false
		case r < utf8.RuneSelf && (r >= 'A' && r <= 'Z'):
			dst, space = append(dst, byte(r+'a'-'A')), false
		case zeroNumbers && unicode.IsDigit(r):
			i = numberEnd(text, i)
			dst, space = append(dst, '0'), false
		case r < utf8.RuneSelf && r >= '0' && r <= '9':
			dst, space = append(dst, byte(r)), false
		case unicode.Is(unicode.Mn, r):
			// A combining mark: dropped, the letter it sat on stays.
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Thai):
			end()
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
			space = false
			end()
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			dst, space = utf8.AppendRune(dst, unicode.ToLower(r)), false
		default: // space, punctuation, symbols, control characters
			end()
		}
	}
	end()
	return dst
}

// numberEnd is where the number whose first digit ends at i ends: its
// digits, and "." or "," between two of them (3.14, 1,000,000).
func numberEnd(text string, i int) int {
	for i < len(text) {
		c, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsDigit(c) {
			i += n
			continue
		}
		if (c == '.' || c == ',') && i+n < len(text) {
			if d, m := utf8.DecodeRuneInString(text[i+n:]); unicode.IsDigit(d) {
				i += n + m
				continue
			}
		}
		return i
	}
	return i
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Words calls f with each word of normalized text (Normalize's output)
// and its byte offset.
func Words(normalized []byte, f func(start int, word []byte)) {
	start := 0
	for i, c := range normalized {
		if c == ' ' {
			if i > start {
				f(start, normalized[start:i])
			}
			start = i + 1
		}
	}
	if start < len(normalized) {
		f(start, normalized[start:])
	}
}

// wordHash is FNV-1a over a word's bytes: fixed, so a restart hashes alike.
func wordHash(w []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range w {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// mix is a finaliser (SplitMix64's) that spreads a combined hash's bits.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// NGrams calls f with the hash of each run of n consecutive words in
// hashes (word hashes in order) and the index of its first word. A text
// of fewer than n words (but at least one) is one n-gram of all its words.
func NGrams(hashes []uint64, n int, f func(first int, h uint64)) {
	if len(hashes) == 0 {
		return
	}
	if len(hashes) < n {
		n = len(hashes)
	}
	for i := 0; i+n <= len(hashes); i++ {
		h := uint64(n)
		for _, w := range hashes[i : i+n] {
			h = mix(h ^ w)
		}
		f(i, h)
	}
}

// WordHashes appends the hash of each word of normalized text to dst.
func WordHashes(dst []uint64, normalized []byte) []uint64 {
	Words(normalized, func(_ int, w []byte) { dst = append(dst, wordHash(w)) })
	return dst
}
