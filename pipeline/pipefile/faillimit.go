package pipefile

import (
	"fmt"
	"strconv"
	"strings"
)

// FailLimit is [pipeline] max_failed: how many records may fail (retries
// exhausted, a panic) before the run is a failure. Count > 0 allows that
// many; Share > 0 allows that fraction of the records the failing stage took
// in (judged once it took in minShareBase, and at the end). The zero value
// allows none.
type FailLimit struct {
	Count int64
	Share float64
	Text  string // as written, for messages
}

// DefaultFailLimit is 1% of the records a stage took in.
var DefaultFailLimit = FailLimit{Share: 0.01, Text: "1%"}

// minShareBase is how many records a stage must have taken in before a share
// limit is judged during the run: 1 failure in the first 10 is not 10%.
const minShareBase = 100

// ParseFailLimit reads max_failed: a count (int or "25") or a share ("1%").
func ParseFailLimit(v any) (FailLimit, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return FailLimit{}, fmt.Errorf("max_failed must be >= 0, got %d", x)
		}
		return FailLimit{Count: x, Text: strconv.FormatInt(x, 10)}, nil
	case string:
		s := strings.TrimSpace(x)
		if p, ok := strings.CutSuffix(s, "%"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || f < 0 || f > 100 {
				return FailLimit{}, fmt.Errorf("max_failed %q: want a share like \"1%%\" (0..100%%) or a count like 25", x)
			}
			return FailLimit{Share: f / 100, Text: s}, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return FailLimit{}, fmt.Errorf("max_failed %q: want a count like 25 or a share like \"1%%\"", x)
		}
		return FailLimit{Count: n, Text: s}, nil
	}
	return FailLimit{}, fmt.Errorf("max_failed must be a count (25) or a share (\"1%%\"), got %s", DescribeValue(v))
}

// Exceeded says whether failed of in passes the limit; final applies a
// share however few records came in.
func (l FailLimit) Exceeded(failed, in int64, final bool) bool {
	switch {
	case failed == 0:
		return false
	case l.Share > 0:
		if in < minShareBase && !final {
			return false
		}
		return float64(failed) > l.Share*float64(in)
	}
	return failed > l.Count
}
