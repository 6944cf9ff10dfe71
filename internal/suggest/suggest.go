// Package suggest finds the name a user probably meant.
package suggest

import (
	"fmt"
	"math"
	"strings"
)

// DidYouMean returns ` (did you mean "x"?)` when a candidate is close to s.
func DidYouMean(s string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := 2
	if len(s) > 8 {
		limit = 3
	}
	if best == "" || bestD > limit || bestD >= len(s) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
