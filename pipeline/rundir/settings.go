package rundir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/pipe-dev/pipe/pipeline"
)

// Settings returns what defines the data a plan makes, per stage id:
// {"kind": KIND, "input": [inputs], and every config key → value} except the
// keys tagged `op:"true"` (servers, timeouts, input limits), which a resume
// may change. Inputs are written "stage" for a stage's first port and
// "stage.port" for another, in the order written. Values are JSON-friendly
// (see pipeline.PlanStage.Settings); compare them with Compare.
func Settings(p *pipeline.Plan) map[string]any {
	out := map[string]any{}
	for _, s := range p.Stages {
		m := s.Settings(false)
		m["kind"] = s.Decl.Kind
		m["input"] = inputs(s)
		out[s.ID()] = m
	}
	return out
}

// inputs are the stage's inputs in one spelling: "gen" and "gen.out" (the
// first port) are the same input.
func inputs(s *pipeline.PlanStage) []any {
	if len(s.Inputs) == 0 || len(s.Inputs) != len(s.Decl.Inputs) {
		// Not wired (a plan with problems): as written.
		out := make([]any, len(s.Decl.Inputs))
		for i, in := range s.Decl.Inputs {
			out[i] = in
		}
		return out
	}
	out := make([]any, len(s.Inputs))
	for i, e := range s.Inputs {
		ref := e.From.ID()
		if e.From.Spec != nil && len(e.From.Spec.Outputs) > 0 && e.Port != e.From.Spec.Outputs[0] {
			ref += "." + e.Port
		}
		out[i] = ref
	}
	return out
}

// Compare lists how the settings new differ from old (both as Settings
// returns them, or as read back from run.json), one human line per
// difference, sorted:
//
//	gen.temperature: 0.6 → 0.7
//	stage "tok" added
//	stage "check" removed
//	check.kind: validate-thinking → tokenize-and-mask
//
// Values are compared after a JSON round trip, so 1 and 1.0 are equal. A
// stage whose kind changed is reported by its kind alone. No lines means
// the same settings.
func Compare(old, new map[string]any) []string {
	o, n := normalizeMap(old), normalizeMap(new)
	var lines []string
	for _, id := range unionKeys(o, n) {
		ov, inOld := o[id]
		nv, inNew := n[id]
		switch {
		case !inOld:
			lines = append(lines, fmt.Sprintf("stage %q added", id))
			continue
		case !inNew:
			lines = append(lines, fmt.Sprintf("stage %q removed", id))
			continue
		}
		om, _ := ov.(map[string]any)
		nm, _ := nv.(map[string]any)
		if ok, nk := om["kind"], nm["kind"]; !equal(ok, nk) {
			lines = append(lines, fmt.Sprintf("%s.kind: %s → %s", id, kindText(ok), kindText(nk)))
			continue
		}
		for _, key := range unionKeys(om, nm) {
			a, inA := om[key]
			b, inB := nm[key]
			switch {
			case !inA:
				lines = append(lines, fmt.Sprintf("%s.%s: (not recorded) → %s", id, key, valueText(b)))
			case !inB:
				lines = append(lines, fmt.Sprintf("%s.%s: %s → (no longer a setting)", id, key, valueText(a)))
			case !equal(a, b):
				as, bs := shorten(valueText(a), valueText(b))
				lines = append(lines, fmt.Sprintf("%s.%s: %s → %s", id, key, as, bs))
			}
		}
	}
	sort.Strings(lines)
	return lines
}

// normalize returns v after a JSON round trip: maps are map[string]any,
// lists []any, numbers json.Number.
func normalize(v any) any {
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return fmt.Sprint(v)
	}
	return out
}

func normalizeMap(m map[string]any) map[string]any {
	out, _ := normalize(m).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

// marshal is json.Marshal without escaping <, > and & ("<think>" stays).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// equal compares normalized values; numbers by value.
func equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && equalNumbers(x, y)
	default:
		return a == b
	}
}

// equalNumbers compares JSON numbers by value (1.0 is 1, 1e3 is 1000).
func equalNumbers(x, y json.Number) bool {
	if x == y {
		return true
	}
	rx, okx := new(big.Rat).SetString(string(x))
	ry, oky := new(big.Rat).SetString(string(y))
	return okx && oky && rx.Cmp(ry) == 0
}

func kindText(v any) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return valueText(v)
}

// valueText shows a normalized value as in a pipeline file, compactly.
func valueText(v any) string {
	if v == nil {
		return "unset"
	}
	b, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// maxValueText is the most runes of a value shown in a difference.
const maxValueText = 72

// shorten cuts two long value texts to a window around where they first
// differ, so a changed word in a long system prompt shows.
func shorten(a, b string) (string, string) {
	ra, rb := []rune(a), []rune(b)
	if len(ra) <= maxValueText && len(rb) <= maxValueText {
		return a, b
	}
	at := 0
	for at < len(ra) && at < len(rb) && ra[at] == rb[at] {
		at++
	}
	start := max(0, at-maxValueText/3)
	return window(ra, start), window(rb, start)
}

func window(r []rune, start int) string {
	var sb strings.Builder
	if start > 0 {
		sb.WriteString("…")
	}
	end := min(len(r), start+maxValueText)
	sb.WriteString(string(r[min(start, len(r)):end]))
	if end < len(r) {
		sb.WriteString("…")
	}
	return sb.String()
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// RecordedStage is one stage's entry in run.json's settings (as Settings
// writes them, read back), for readers of a run: its kind, its inputs and
// its keys.
type RecordedStage struct {
	ID, Kind string
	// Inputs are as Settings writes them: "stage" or "stage.port".
	Inputs []string
	// Keys are the entry's config keys → values (kind and input too).
	Keys map[string]any
}

// Str is the string value of key, "" when unset or not a string.
func (s RecordedStage) Str(key string) string {
	v, _ := s.Keys[key].(string)
	return v
}

// RecordedStages lists the stages of run.json's settings, sorted by id.
func RecordedStages(settings map[string]any) []RecordedStage {
	out := make([]RecordedStage, 0, len(settings))
	for id, v := range settings {
		keys, _ := v.(map[string]any)
		s := RecordedStage{ID: id, Keys: keys}
		s.Kind = s.Str("kind")
		ins, _ := keys["input"].([]any)
		for _, in := range ins {
			if in, ok := in.(string); ok {
				s.Inputs = append(s.Inputs, in)
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
