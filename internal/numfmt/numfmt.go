// Package numfmt shows numbers to a person: byte sizes and counts, as the
// progress display, the summary, status and inspect print them.
package numfmt

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bytes is n bytes for a person: "12.3 MiB".
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Count shows a count exactly below 100000 and as 1.23M above; fractions
// with at most two decimals.
func Count(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 2, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	case a >= 1e5:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "K"
	case v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// Plural is "1 shard", "2 shards", "2 crashes": n and what, in the plural
// unless n is 1 (English's -es after ch, sh, s, x).
func Plural[N ~int | ~int64](n N, what string) string {
	if n == 1 {
		return "1 " + what
	}
	for _, end := range []string{"ch", "sh", "s", "x"} {
		if strings.HasSuffix(what, end) {
			return fmt.Sprintf("%d %ses", n, what)
		}
	}
	return fmt.Sprintf("%d %ss", n, what)
}
