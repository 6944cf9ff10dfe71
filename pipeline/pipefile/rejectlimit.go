package pipefile

import (
	"fmt"
	"strconv"
	"strings"
)

// RejectLimit is [pipeline] max_rejected: the share of a stage's recent
// outcomes that may be rejections. Once a stage has decided Window records
// (sent on or rejected), a share of rejections above Share among its last
// Window stops the run: a model answering garbage keeps answering garbage,
// so two days of it are worth stopping in the first minutes. Share 0 (or
// "off") never stops. Duplicates (ReasonDuplicate) do not count.
type RejectLimit struct {
	Share  float64
	Window int
	Text   string // as written, for messages
}

// DefaultRejectLimit stops a stage that rejected more than half of its last
// 2,000 records.
var DefaultRejectLimit = RejectLimit{Share: 0.5, Window: 2000, Text: "50% of 2000"}

// ParseRejectLimit reads max_rejected: "50%" (over the last 2000), "50% of
// 5000", or "off".
func ParseRejectLimit(v any) (RejectLimit, error) {
	s, ok := v.(string)
	if !ok {
		return RejectLimit{}, fmt.Errorf(`max_rejected must be a share like "50%%", "50%% of 2000" or "off", got %s`, DescribeValue(v))
	}
	s = strings.TrimSpace(s)
	if s == "off" {
		return RejectLimit{Text: s}, nil
	}
	bad := fmt.Errorf(`max_rejected %q: want a share like "50%%" (of the last 2000 records a stage decided), "50%% of 5000", or "off"`, v)
	share, window, hasWindow := strings.Cut(s, " of ")
	p, ok := strings.CutSuffix(strings.TrimSpace(share), "%")
	if !ok {
		return RejectLimit{}, bad
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
	if err != nil || f <= 0 || f > 100 {
		return RejectLimit{}, bad
	}
	l := RejectLimit{Share: f / 100, Window: DefaultRejectLimit.Window, Text: s}
	if hasWindow {
		n, err := strconv.Atoi(strings.TrimSpace(window))
		if err != nil || n < 10 || n > 10_000_000 {
			return RejectLimit{}, fmt.Errorf("max_rejected %q: the window must be 10..10000000 records, got %q", v, strings.TrimSpace(window))
		}
		l.Window = n
	}
	if f == 100 { // more than all of them never happens
		l.Share = 0
	}
	return l, nil
}
