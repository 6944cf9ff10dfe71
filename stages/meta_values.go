package stages

import (
	"encoding/json"
	"maps"

	"github.com/pipe-dev/pipe/internal/termsafe"
)

// The record's meta as stages read it: set by a stage (Go values) or
// kept by a reader as the input line's JSON text (json.RawMessage).

// metaText is a meta value for a message: its JSON text, cut and
// terminal-safe (it comes from an input file).
func metaText(v any) string {
	b, ok := v.(json.RawMessage)
	if !ok {
		b, _ = json.Marshal(v)
	}
	return termsafe.Line(termsafe.Cut(string(b), 80))
}

// metaNumber is a meta value as a number: set by a stage (an int or a
// float64) or read from the input (its JSON text).
func metaNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.RawMessage:
		var f float64
		err := json.Unmarshal(n, &f)
		return f, err == nil
	}
	return 0, false
}

// metaValues is meta as expressions see it: a reader keeps an input
// line's other fields as their JSON text (json.RawMessage, so that a
// writer spells them as the input did); here they are values, so that
// meta.source == "web" and meta.n > 4 mean what they say. meta itself is
// returned when it holds no JSON text, a copy otherwise; never nil.
func metaValues(meta map[string]any) map[string]any {
	if meta == nil {
		return map[string]any{}
	}
	var out map[string]any
	for k, v := range meta {
		raw, ok := v.(json.RawMessage)
		if !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(meta)
		}
		var x any
		if err := json.Unmarshal(raw, &x); err == nil {
			out[k] = x
		}
	}
	if out == nil {
		return meta
	}
	return out
}
