package pipefile

import (
	"fmt"
	"io"
	"os"
)

// Limits checked before the TOML decoder runs. BurntSushi/toml v1.6.0 is
// quadratic in the nesting of inline tables and arrays (8K levels took
// 2.4 GB and 11.6 s, 100K levels 23.7 GB), in the parts of a dotted key
// (a 100K-part header ran out of 6 GB), and worse than linear in the number
// of tables and keys (1 MiB of 30-deep inline tables: 8 s). A pipeline file
// needs a few levels and parts, and some hundred values; strings (a long
// system prompt) cost little.
const (
	// MaxFileBytes bounds a pipeline file (and a --set value).
	MaxFileBytes = 1 << 20
	// MaxNesting bounds how deep "[" and "{" nest.
	MaxNesting = 32
	// MaxKeyParts bounds the parts of one dotted key or table header.
	MaxKeyParts = 32
	// MaxElements bounds the keys, key parts, tables, arrays and array
	// elements of a file (each "=", ".", "[", "{" and "," outside strings).
	MaxElements = 20_000
)

// readPipelineFile reads path, refusing one larger than MaxFileBytes
// without reading more than that.
func readPipelineFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	return src, nil
}

// checkTOMLShape finds the first place where src goes beyond the limits,
// scanning it as TOML's lexer would for strings and comments (so brackets
// and dots inside them do not count). ok is false with the problem's line,
// column and message.
func checkTOMLShape(src []byte) (line, col int, msg string, ok bool) {
	if len(src) > MaxFileBytes {
		return 0, 0, fmt.Sprintf("larger than %d bytes, the most a pipeline file may be", MaxFileBytes), false
	}
	s := &shapeScan{src: src, line: 1}
	for i := 0; i < len(src); i++ {
		if msg := s.at(i); msg != "" {
			return s.line, i - s.lineStart + 1, msg, false
		}
		i = s.skip(i)
	}
	return 0, 0, "", true
}

// shapeScan is checkTOMLShape's state: where the current line starts, and
// the nesting, dotted-key parts and elements seen so far.
type shapeScan struct {
	src                   []byte
	line, lineStart       int
	depth, dots, elements int
}

// at counts the byte at i (not in a string or comment) and returns the
// limit it goes beyond, or "".
func (s *shapeScan) at(i int) string {
	switch s.src[i] {
	case '=', '.', '[', '{', ',':
		if s.elements++; s.elements > MaxElements {
			return fmt.Sprintf("more than %d keys, tables and values, the most a pipeline file may have", MaxElements)
		}
	}
	switch s.src[i] {
	case '\n':
		s.line, s.lineStart, s.dots = s.line+1, i+1, 0
	case '[', '{':
		if s.depth++; s.depth > MaxNesting {
			return fmt.Sprintf("nested more than %d levels deep (tables and arrays), the most a pipeline file may nest", MaxNesting)
		}
	case ']', '}':
		s.depth--
	case '.':
		// A dot between digits is in a number (1.5) or a time; any
		// other is between a dotted key's parts.
		if s.isDigit(i-1) && s.isDigit(i+1) {
			return ""
		}
		if s.dots++; s.dots >= MaxKeyParts {
			return fmt.Sprintf("a dotted key of more than %d parts, the most a pipeline file may have", MaxKeyParts)
		}
	}
	return ""
}

func (s *shapeScan) isDigit(i int) bool {
	return i >= 0 && i < len(s.src) && s.src[i] >= '0' && s.src[i] <= '9'
}

// skip returns the index of the last byte of the comment or string that
// starts at i, or i itself when none does.
func (s *shapeScan) skip(i int) int {
	src := s.src
	switch src[i] {
	case '#':
		for i+1 < len(src) && src[i+1] != '\n' {
			i++
		}
		return i
	case '"', '\'':
		return s.skipString(i)
	}
	return i
}

// skipString returns the index of the closing quote of the string, basic
// or literal, one line or multi-line ("""…"""), that opens at i (or of the
// newline ending an unclosed one-line string, or len(src)), counting the
// lines it crosses.
func (s *shapeScan) skipString(i int) int {
	src, c := s.src, s.src[i]
	quote := string([]byte{c, c, c})
	multi := i+2 < len(src) && string(src[i:i+3]) == quote
	if multi {
		i += 2
	}
	for i++; i < len(src); i++ {
		if src[i] == '\n' {
			s.line, s.lineStart = s.line+1, i+1
			if !multi {
				return i
			}
		}
		if c == '"' && src[i] == '\\' {
			i++
			continue
		}
		if src[i] == c && (!multi || (i+2 < len(src) && string(src[i:i+3]) == quote)) {
			if multi {
				i += 2
				for i+1 < len(src) && src[i+1] == c { // """"" ends with quotes in the string
					i++
				}
			}
			return i
		}
	}
	return i
}
