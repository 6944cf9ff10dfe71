// Package textfmt holds the small text shapes pipe's commands share: a
// key and value line, an elapsed time.
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

// Elapsed is s seconds as a duration, rounded to the second.
func Elapsed(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}
