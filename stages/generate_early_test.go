package stages

import (
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// The checks count per server and stop once: a server whose ids spell
// its text ends its check; a mismatch on one server does not add to
// another's; the thinking check ends at the first reasoning; the length
// check judges the first earlyLength completions only.
func TestEarlyWatchCounts(t *testing.T) {
	var w earlyWatch
	bad := earlyVerdict{server: "a", idsChecked: true, misspelled: "answer", decoded: "zzz"}
	c := &record.Completion{Answer: "yes", Reasoning: "r"}
	for range earlyIDs - 1 {
		if err := w.add(bad, c, 100); err != nil {
			t.Fatal(err)
		}
	}
	other := bad
	other.server = "b"
	if err := w.add(other, c, 100); err != nil {
		t.Fatalf("another server's mismatch counted with a's: %v", err)
	}
	if err := w.add(bad, c, 100); err == nil || !strings.Contains(err.Error(), "server a: the output ids of its first 20 completions do not spell their text") {
		t.Fatalf("the 20th mismatch of a: %v", err)
	}
	if err := w.add(bad, c, 100); err != nil {
		t.Fatalf("a second stop: %v", err)
	}

	w = earlyWatch{}
	good := earlyVerdict{server: "a", idsChecked: true}
	w.add(good, c, 100)
	for range 2 * earlyIDs {
		if err := w.add(bad, c, 100); err != nil {
			t.Fatalf("a server that spelled its first text: %v", err)
		}
	}

	w = earlyWatch{}
	empty := &record.Completion{Answer: "yes"}
	think := earlyVerdict{server: "a", thinkingOn: true}
	for i := range earlyThinking {
		err := w.add(think, empty, 100)
		if (err != nil) != (i == earlyThinking-1) {
			t.Fatalf("completion %d without reasoning: %v", i+1, err)
		}
	}
	w = earlyWatch{}
	w.add(think, c, 100)
	for range 2 * earlyThinking {
		if err := w.add(think, empty, 100); err != nil {
			t.Fatalf("after one with reasoning: %v", err)
		}
	}

	for _, cut := range []int{80, 81} {
		w = earlyWatch{}
		var err error
		for i := range 2 * earlyLength {
			v := earlyVerdict{server: "a", cutRejected: i < cut}
			if e := w.add(v, c, 1024); e != nil {
				err = e
			}
		}
		if (err != nil) != (cut > 80) || (err != nil && !strings.Contains(err.Error(), "81 of the first 100 completions were cut at the length limit (max_output_tokens = 1024)")) {
			t.Fatalf("%d of 100 cut: %v", cut, err)
		}
	}
}
