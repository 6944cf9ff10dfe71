package sglang

import (
	"context"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// Today's SGLang protocol (shared/sglang-api-2026.md), spoken with
// `pipe sim`: /server_info and /model_info before the deprecated /get_*,
// the limits of /server_info (context_length null, the model's length from
// /v1/models), meta_info's load and speculative figures on both APIs
// (per choice with return_meta_info on chat), and the fleet's acceptance
// as Σ tokens / Σ verify steps.
func TestProtocolOfToday(t *testing.T) {
	cfg := fastSim(2)
	cfg.SpecAcceptMean = 3
	f := startSim(t, cfg)
	rec := newRecorder(t, f.URLs()[0])
	urls := []string{rec.URL, f.URLs()[1]}

	got := Probe(context.Background(), specsOf(urls, 1), 5*time.Second)
	for _, in := range got {
		if in.State != StateReady || in.MaxRunningRequests != 48 || in.MaxReqInputLen != sim.DefaultContextLength-1 ||
			in.ContextLength != sim.DefaultContextLength || in.MaxTotalNumTokens == 0 {
			t.Errorf("probe: %+v", in)
		}
	}
	var paths []string
	for _, q := range rec.requests() {
		paths = append(paths, q.path)
	}
	for _, old := range []string{"/get_server_info", "/get_model_info"} {
		if slices.Contains(paths, old) {
			t.Errorf("the deprecated %s was asked (the server logs a warning each time): %v", old, paths)
		}
	}
	if !slices.Contains(paths, "/server_info") {
		t.Errorf("no /server_info: %v", paths)
	}

	for _, api := range []API{APIChat, APIGenerate} {
		t.Run(string(api), func(t *testing.T) {
			c := startClient(t, specsOf(urls, 4), testOptions(api))
			results, errs := runAll(t, c, 60, api)
			var tokens, verify, correct, proposed int
			for i, r := range results {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if !r.LoadReported || r.RunningReqs < 1 || r.WaitingReqs < 0 {
					t.Fatalf("no load in meta_info: %+v", r)
				}
				if r.SpecVerifyCt == 0 || r.SpecAcceptRate <= 0 || r.SpecProposedDrafts != r.SpecVerifyCt*(sim.SpecDraftTokens-1) ||
					r.SpecCorrectDrafts != r.CompletionTokens-r.SpecVerifyCt {
					t.Fatalf("speculative figures: %+v", r)
				}
				tokens += r.CompletionTokens
				verify += r.SpecVerifyCt
				correct += r.SpecCorrectDrafts
				proposed += r.SpecProposedDrafts
			}
			tot := c.Stats().Total
			if want := float64(tokens) / float64(verify); math.Abs(tot.MeanAcceptLength-want) > 1e-9 {
				t.Errorf("fleet acceptance %v, want Σ tokens / Σ verify steps = %v", tot.MeanAcceptLength, want)
			}
			if want := float64(correct) / float64(proposed); math.Abs(tot.SpecAcceptRate-want) > 1e-9 {
				t.Errorf("fleet accept rate %v, want %v", tot.SpecAcceptRate, want)
			}
			if !tot.LoadReported {
				t.Error("no server load in the figures")
			}
		})
	}
}

// The simulated server accepts the key as x-api-key too (utils/auth.py).
func TestXAPIKeyAccepted(t *testing.T) {
	cfg := fastSim(1)
	cfg.APIKey = "k-123"
	f := startSim(t, cfg)
	c := startClient(t, []ServerSpec{{URL: f.URLs()[0], Concurrency: 2, Header: http.Header{"X-Api-Key": {"k-123"}}}}, testOptions(APIChat))
	_, errs := runAll(t, c, 5, APIChat)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
