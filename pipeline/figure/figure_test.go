package figure

import (
	"reflect"
	"testing"
)

func TestFigureFormatValue(t *testing.T) {
	for _, c := range []struct {
		f    Figure
		want string
	}{
		{NewCounter("completions", 1234), "1234"},
		{NewCounter("completions", 1234567), "1.23M"},
		{NewCounter("committed_bytes", 3<<20).In(UnitBytes), "3.0 MiB"},
		{NewGauge("output_tokens_per_second", 2131.7).In(UnitPerSecond), "2132/s"},
		{NewGauge("spec_accept_length", 2.8125), "2.81"},
		{NewQuantiles("latency", 10, 12, []Quantile{{0.5, 0.25}, {0.95, 72.5}}).In(UnitSeconds), "p50 250ms p95 1m13s"},
		{NewQuantiles("latency", 0, 0, nil).In(UnitSeconds), "none yet"},
		{NewState("state", "ejected", "HTTP 503: busy"), "ejected (HTTP 503: busy)"},
	} {
		if got := c.f.FormatValue(); got != c.want {
			t.Errorf("%s: %q, want %q", c.f.Name, got, c.want)
		}
	}
}

// The summary's lines: one per subject (the stage, each server), a figure
// split by class on one part.
func TestLines(t *testing.T) {
	figs := []Figure{
		NewCounter("completions", 7),
		NewCounter("errors", 2, "class", "http_503"),
		NewState("state", "ready", "", "server", "a:1"),
		NewCounter("completions", 5, "server", "a:1"),
		NewCounter("errors", 2, "class", "http_503", "server", "a:1"),
		NewCounter("errors", 1, "class", "transport", "server", "a:1"),
		NewGauge("completions_per_second", 0.5, "server", "b:2").In(UnitPerSecond),
		NewCounter("completions", 2, "server", "b:2"),
	}
	want := []Line{
		{"", []string{"completions 7", "errors http_503 2"}},
		{"server a:1", []string{"state ready", "completions 5", "errors http_503 2, transport 1"}},
		{"server b:2", []string{"completions 0.50/s", "completions 2"}},
	}
	if got := Lines(figs); !reflect.DeepEqual(got, want) {
		t.Errorf("Lines:\n%q\nwant\n%q", got, want)
	}
	if f, ok := Find(figs, "completions"); !ok || f.Value != 7 {
		t.Errorf("Find without labels: %+v", f)
	}
	if f, ok := Find(figs, "errors", "server", "a:1", "class", "transport"); !ok || f.Value != 1 {
		t.Errorf("Find with labels: %+v", f)
	}
}
