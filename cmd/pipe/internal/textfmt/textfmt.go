// Package textfmt holds the small text shapes pipe's commands share: a
// key and value line, a cut string, an elapsed time.
package textfmt

import (
	"fmt"
	"io"
	"time"
)

// KV writes a line of key (padded to 10) and the formatted value.
func KV(w io.Writer, key, format string, args ...any) {
	fmt.Fprintf(w, "%-10s %s\n", key, fmt.Sprintf(format, args...))
}

// FirstRunes is s cut to its first n runes, with an ellipsis when cut.
func FirstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i] + "…"
		}
		n--
	}
	return s
}

// Elapsed is s seconds as a duration, rounded to the second.
func Elapsed(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
