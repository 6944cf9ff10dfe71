package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/cmd/pipe/internal/cmdline"
	"github.com/pipe-dev/pipe/cmd/pipe/runreport"
	"github.com/pipe-dev/pipe/internal/redact"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"github.com/pipe-dev/pipe/pipeline"
	"github.com/pipe-dev/pipe/pipeline/engine"
	"github.com/pipe-dev/pipe/pipeline/output"
)

// publishAtEnd gives each output published with a description of how it
// was made (Spec.Publish: a Hub dataset card) the run's card, after the
// outputs verified. An output that cannot take it fails the run: exit 0
// says everything the run published is there.
func publishAtEnd(ctx context.Context, w io.Writer, plan *pipeline.Plan, verified []*output.Verified, rep *runreport.Report, sum *engine.Summary) error {
	var card *output.Card
	for _, ps := range plan.Stages {
		if ps.Spec.Publish == nil {
			continue
		}
		if card == nil {
			card = runCard(plan, rep, sum)
		}
		env := &output.PublishEnv{StageID: ps.ID(), RunDir: plan.File.RunDir, Log: w, Card: card}
		for _, e := range ps.Inputs {
			for _, v := range verified {
				if v.Stage == e.From.ID() {
					env.Inputs = append(env.Inputs, v)
				}
			}
		}
		if err := ps.Spec.Publish(ctx, ps.Config, env); err != nil {
			return verifyExit(fmt.Errorf("the run finished and its outputs verified, but stage %q (%s) could not publish its card: %w; the same command publishes it", ps.ID(), ps.Spec.Kind, err))
		}
	}
	return nil
}

// runCard is what the run knew of how it made its data: the generating
// stages' data-defining settings, the trainer, and the report's counts.
func runCard(plan *pipeline.Plan, rep *runreport.Report, sum *engine.Summary) *output.Card {
	c := &output.Card{Pipeline: plan.File.Name}
	args, _ := redact.Args(os.Args[1:])
	c.Command = "pipe " + cmdline.Join(args)
	if b, err := os.ReadFile(plan.File.Path); err == nil {
		c.PipelineFile = []byte(redact.Secrets(string(b)))
	}
	for _, ps := range plan.Stages {
		if !ps.Spec.Expensive {
			continue
		}
		settings := ps.Settings(false)
		for _, k := range slices.Sorted(maps.Keys(settings)) {
			v := settings[k]
			if v == nil || fmt.Sprint(v) == "" || fmt.Sprint(v) == "[]" {
				continue // not sent: the server's default
			}
			text := redact.Secrets(fmt.Sprint(v))
			c.Generation = append(c.Generation, output.Setting{Stage: ps.ID(), Key: k, Value: termsafe.Line(termsafe.Cut(text, 200))})
		}
	}
	if t := plan.File.Trainer; t != nil {
		c.Trainer = strings.TrimSpace(fmt.Sprintf("%s %s", t.Name, t.Method))
		if t.MaxLength > 0 {
			c.Trainer += fmt.Sprintf(", max_length %d", t.MaxLength)
		}
	}
	if rep != nil {
		c.Finished = rep.Finished
		for _, r := range rep.Rejected {
			c.Rejected = append(c.Rejected, output.Count{Stage: r.Stage, Reason: r.Reason, N: r.Count})
		}
		if e := rep.Economy; e != nil {
			c.Decoded, c.Trained = e.Decoded, e.Trained
		}
		if s := rep.Spared; s != nil {
			c.Spared = strings.TrimPrefix(s.Text(), "spared: ")
		}
	}
	var accepted, weight float64
	for _, st := range sum.Stages {
		if st.Fleet == nil {
			continue
		}
		for _, sv := range st.Fleet.Servers {
			if sv.Accept > 0 && sv.Completions > 0 {
				accepted += sv.Accept * float64(sv.Completions)
				weight += float64(sv.Completions)
			}
		}
	}
	if weight > 0 {
		c.Acceptance = accepted / weight
	}
	return c
}
