package engine

import "testing"

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
