package sglang

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A budget too small for one answer fails it; one answer that fits is read.
func TestAnswerBudgetRead(t *testing.T) {
	b := &answerBudget{max: 1 << 20}
	buf, held, err := b.read(strings.NewReader(strings.Repeat("a", 300<<10)), make([]byte, 0, 16<<10), -1)
	if err != nil || len(buf) != 300<<10 || held != int64(cap(buf)) || b.used.Load() != held {
		t.Fatalf("read: %v, %d bytes, held %d, used %d", err, len(buf), held, b.used.Load())
	}
	b.give(held)
	_, held, err = b.read(strings.NewReader(strings.Repeat("a", 2<<20)), nil, -1)
	var eb *errBudget
	if !errors.As(err, &eb) || b.used.Load() != held {
		t.Fatalf("over the budget: %v, used %d, held %d", err, b.used.Load(), held)
	}
	b.give(held)
	if b.used.Load() != 0 {
		t.Fatal(b.used.Load())
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
