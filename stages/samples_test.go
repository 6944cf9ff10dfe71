package stages

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/sglang"
)

// samplesEmitter finishes the ids in done and collects the rest.
type samplesEmitter struct {
	thinkTestEmitter
	done  map[string]bool
	taken int
}

func (e *samplesEmitter) SkipFinished(id string) bool { return e.done[id] }
func (e *samplesEmitter) Took(n int)                  { e.taken += n }

// A prompt with samples = 3 is three records, ID#1 … ID#3, each with its
// sample number and prompt id and its own copy of the messages; a sample
// the run directory finished is skipped, and every one is taken.
func TestEmitSamples(t *testing.T) {
	e := &samplesEmitter{thinkTestEmitter: *newThinkTestEmitter(), done: map[string]bool{"a#2": true}}
	rec := &record.Record{ID: "a", Messages: []record.Message{{Role: "user", Content: "hi"}}, Meta: map[string]any{"source": "x"}}
	if err := emitSamples(rec, 3, e); err != nil {
		t.Fatal(err)
	}
	got := e.emitted[""]
	if len(got) != 2 || got[0].ID != "a#1" || got[1].ID != "a#3" || e.taken != 3 {
		t.Fatalf("emitted %v, taken %d: want a#1 and a#3, 3 taken", got, e.taken)
	}
	if got[1].Meta[MetaSample] != 3 || got[1].Meta[MetaPromptID] != "a" || got[1].Meta["source"] != "x" || rec.Meta[MetaSample] != nil {
		t.Fatalf("meta %v (prompt's %v)", got[1].Meta, rec.Meta)
	}
	got[0].Messages[0].Content = "changed"
	if got[1].Messages[0].Content != "hi" || rec.Messages[0].Content != "hi" {
		t.Fatal("samples share their messages")
	}
}

// Each sample is sent seed + sample - 1, and the per_prompt keys a
// record's meta has (as the input gave them: JSON text) override the
// stage's; a value of the wrong type rejects the record.
func TestPerRecordSampling(t *testing.T) {
	seed := 7
	g := &generate{cfg: generateConfig{Seed: &seed, PerPrompt: []string{"temperature", "top_k", "top_p"}, API: "chat"}}
	for _, tc := range []struct {
		meta       map[string]any
		seed       int
		temp       float64
		topK       int
		bad, unset bool
	}{
		{meta: map[string]any{}, unset: true},
		{meta: map[string]any{MetaSample: 1}, unset: true},
		{meta: map[string]any{MetaSample: 3}, seed: 9},
		{meta: map[string]any{MetaSample: float64(2), "temperature": json.RawMessage("0.9")}, seed: 8, temp: 0.9},
		{meta: map[string]any{"top_k": json.RawMessage("20")}, seed: 0, topK: 20},
		{meta: map[string]any{"temperature": json.RawMessage(`"hot"`)}, bad: true},
		{meta: map[string]any{"temperature": json.RawMessage(`null`)}, unset: true},
		{meta: map[string]any{"top_k": 2.5}, bad: true},
		// Out of the stage keys' ranges (their min and max tags).
		{meta: map[string]any{"temperature": json.RawMessage(`-1`)}, bad: true},
		{meta: map[string]any{"top_p": json.RawMessage(`1.5`)}, bad: true},
		{meta: map[string]any{"top_k": json.RawMessage(`-2`)}, bad: true},
	} {
		p, rej := g.perRecord(&record.Record{ID: "x", Meta: tc.meta})
		switch {
		case tc.bad:
			if rej == nil || rej.Reason != "bad_sampling" {
				t.Errorf("%v: %v %v, want bad_sampling", tc.meta, p, rej)
			} else if strings.Contains(fmt.Sprint(tc.meta), "top_p") && !strings.Contains(rej.Detail, "meta.top_p must be 0..1 (as the stage's top_p), got 1.5") {
				t.Errorf("detail %q", rej.Detail)
			}
		case tc.unset:
			if p != nil || rej != nil {
				t.Errorf("%v: %+v %v, want nothing set", tc.meta, p, rej)
			}
		default:
			if rej != nil || p == nil ||
				tc.seed != 0 && (p.Seed == nil || *p.Seed != tc.seed) ||
				tc.temp != 0 && (p.Temperature == nil || *p.Temperature != tc.temp) ||
				tc.topK != 0 && (p.TopK == nil || *p.TopK != tc.topK) {
				t.Errorf("%v: %+v %v", tc.meta, p, rej)
			}
		}
	}
	if _, rej := g.perRecord(&record.Record{Meta: map[string]any{"temperature": json.RawMessage(`"hot\u001b[2J"`)}}); rej == nil ||
		rej.Detail != `meta.temperature must be a number, got "hot\u001b[2J"` {
		t.Errorf("detail %v: want the value's JSON text", rej)
	}
	r := g.withPer(map[string]any{"seed": 7, "temperature": 0.6}, &sglang.PerRequest{Seed: &seed})
	if r["seed"] != 7 || r["temperature"] != 0.6 {
		t.Fatalf("recorded %v", r)
	}
}
