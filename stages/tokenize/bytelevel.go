package tokenize

// byteToRune is GPT-2's bytes_to_unicode: printable bytes map to themselves,
// the others to U+0100 onwards, so every byte has a visible character in
// tokenizer.json (space is "Ġ", newline "Ċ").
var byteToRune [256]rune

// runeToByte inverts byteToRune: runeToByte[r] is b+1, 0 for runes outside
// the alphabet (all of which are below 0x144).
var runeToByte [0x144]uint16

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = uint16(b + 1)
	}
}

// byteLevelDecode maps a token written in the byte-level alphabet back to
// its bytes; ok is false if tok has a character outside the alphabet.
func byteLevelDecode(tok string) (string, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r >= rune(len(runeToByte)) || runeToByte[r] == 0 {
			return "", false
		}
		out = append(out, byte(runeToByte[r]-1))
	}
	return string(out), true
}
