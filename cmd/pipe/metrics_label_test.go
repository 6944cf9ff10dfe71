package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pipe-dev/pipe/pipeline/figure"
)

// A system prompt's text, a label of tokenize-and-mask's figures, is
// exported as a digest: the metrics tell prompts apart without showing them.
func TestMetricsDoNotPublishPromptText(t *testing.T) {
	const prompt = "You are the assistant of ACME's secret project Falcon."
	var st liveStage
	st.ID, st.Kind = "tok", "tokenize-and-mask"
	st.Figures = []figure.Figure{
		figure.NewCounter("rows_by_system_prompt", 7, "prompt", prompt),
		figure.NewCounter("rows_by_system_prompt", 2, "prompt", "2 others"),
	}
	ch := make(chan prometheus.Metric, 10)
	stageFigures(ch, st)
	close(ch)
	var labels []string
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "prompt" {
				labels = append(labels, l.GetValue())
			}
		}
	}
	if len(labels) != 2 || !strings.HasPrefix(labels[0], "sha256:") || labels[1] != "2 others" || strings.Contains(strings.Join(labels, " "), "Falcon") {
		t.Errorf("prompt labels %q", labels)
	}
}
