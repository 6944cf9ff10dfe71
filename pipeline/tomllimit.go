package pipeline

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
	line, lineStart := 1, 0
	depth, dots, elements := 0, 0, 0
	here := func(i int) (int, int) { return line, i - lineStart + 1 }
	isDigit := func(i int) bool { return i >= 0 && i < len(src) && src[i] >= '0' && src[i] <= '9' }
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '=', '.', '[', '{', ',':
			if elements++; elements > MaxElements {
				l, c := here(i)
				return l, c, fmt.Sprintf("more than %d keys, tables and values, the most a pipeline file may have", MaxElements), false
			}
		}
		switch c := src[i]; c {
		case '\n':
			line, lineStart, dots = line+1, i+1, 0
		case '#':
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			// A string, basic or literal, one line or multi-line ("""…""").
			quote := string([]byte{c, c, c})
			multi := i+2 < len(src) && string(src[i:i+3]) == quote
			if multi {
				i += 2
			}
			for i++; i < len(src); i++ {
				if src[i] == '\n' {
					line, lineStart = line+1, i+1
					if !multi {
						break
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
					break
				}
			}
		case '[', '{':
			depth++
			if depth > MaxNesting {
				l, c := here(i)
				return l, c, fmt.Sprintf("nested more than %d levels deep (tables and arrays), the most a pipeline file may nest", MaxNesting), false
			}
		case ']', '}':
			depth--
		case '.':
			// A dot between digits is in a number (1.5) or a time; any
			// other is between a dotted key's parts.
			if isDigit(i-1) && isDigit(i+1) {
				continue
			}
			if dots++; dots >= MaxKeyParts {
				l, c := here(i)
				return l, c, fmt.Sprintf("a dotted key of more than %d parts, the most a pipeline file may have", MaxKeyParts), false
			}
		}
	}
	return 0, 0, "", true
}
