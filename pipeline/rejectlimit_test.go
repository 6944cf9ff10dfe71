package pipeline

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

// The window judges the last N outcomes only: a bad start that recovers
// stops nothing once the good records outnumber it.
func TestRejectWindowSlides(t *testing.T) {
	w := newRejectWindow(10)
	for range 9 {
		if full, _ := w.add("empty_answer"); full {
			t.Fatal("full before 10 outcomes")
		}
	}
	if full, share := w.add(""); !full || share != 0.9 {
		t.Fatalf("after 9 rejects and 1 accept: full %v share %v", full, share)
	}
	for range 6 {
		w.add("")
	}
	if _, share := w.add(""); share != 0.2 {
		t.Fatalf("after 7 more accepts: share %v, want 0.2 (the oldest rejects slid out)", share)
	}
	if top := w.top(3); len(top) != 1 || top[0] != "empty_answer 2" {
		t.Fatalf("top = %v", top)
	}
}
