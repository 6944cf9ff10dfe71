package pipefile

import "testing"

func TestParseRejectLimit(t *testing.T) {
	for _, c := range []struct {
		in     any
		share  float64
		window int
		err    bool
	}{
		{in: "50%", share: 0.5, window: 2000},
		{in: "90% of 5000", share: 0.9, window: 5000},
		{in: " 12.5 % of 100 ", share: 0.125, window: 100},
		{in: "off"},
		{in: "100%", window: 2000}, // more than all: never
		{in: "0%", err: true},
		{in: "50", err: true},
		{in: "50% of 3", err: true},
		{in: "50% of lots", err: true},
		{in: int64(50), err: true},
	} {
		l, err := ParseRejectLimit(c.in)
		if (err != nil) != c.err || (!c.err && (l.Share != c.share || l.Window != c.window)) {
			t.Errorf("ParseRejectLimit(%#v) = %+v, %v; want share %v window %v err %v", c.in, l, err, c.share, c.window, c.err)
		}
	}
}
