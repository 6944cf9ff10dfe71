package sglang

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// fastSim is a fleet fast enough for tests: short outputs, simulated time
// compressed 200×, so a request takes a few milliseconds of wall time.
func fastSim(n int) sim.Config {
	return sim.Config{Count: n, Speed: 200, ThinkTokensMean: 60, AnswerTokensMean: 20}
}

func startSim(t testing.TB, cfg sim.Config) *sim.Fleet {
	t.Helper()
	f, err := sim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func specsOf(urls []string, conc int) []ServerSpec {
	var out []ServerSpec
	for _, u := range urls {
		out = append(out, ServerSpec{URL: u, Concurrency: conc})
	}
	return out
}

// testOptions are quick to give up and quick to come back.
func testOptions(api API) Options {
	think := true
	return Options{
		API:           api,
		Sampling:      Sampling{MaxOutputTokens: 2048, EnableThinking: &think},
		Thinking:      true,
		BackoffMin:    5 * time.Millisecond,
		BackoffMax:    50 * time.Millisecond,
		ProbeInterval: 20 * time.Millisecond,
		ProbeTimeout:  2 * time.Second,
		ReadyTimeout:  5 * time.Second,
	}
}

func startClient(t testing.TB, specs []ServerSpec, opts Options) *Client {
	t.Helper()
	c := New(specs, opts)
	if err := c.Start(context.Background()); err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// runAll generates n prompts with one goroutine per slot, the way the
// stage's workers do, and returns the results by prompt index.
func runAll(t testing.TB, c *Client, n int, api API) ([]*Result, []error) {
	t.Helper()
	results := make([]*Result, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c.Capacity() {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				req := &Request{Messages: []Message{{Role: "user", Content: fmt.Sprintf("prompt %d", i)}}}
				if api == APIGenerate {
					req = &Request{Text: fmt.Sprintf("<|im_start|>user\nprompt %d<|im_end|>\n<|im_start|>assistant\n", i)}
				}
				s := c.Session()
				results[i], errs[i] = s.Generate(context.Background(), req)
				s.Close()
			}
		})
	}
	wg.Wait()
	return results, errs
}

func TestGenerateBothAPIs(t *testing.T) {
	f := startSim(t, fastSim(2))
	for _, api := range []API{APIChat, APIGenerate} {
		t.Run(string(api), func(t *testing.T) {
			c := startClient(t, specsOf(f.URLs(), 4), testOptions(api))
			results, errs := runAll(t, c, 40, api)
			servers := map[string]int{}
			for i, r := range results {
				if errs[i] != nil {
					t.Fatalf("prompt %d: %v", i, errs[i])
				}
				if r.Reasoning == "" || r.Answer == "" || r.FinishReason != "stop" || r.CompletionTokens == 0 || r.PromptTokens == 0 || r.Attempts != 1 {
					t.Fatalf("prompt %d: incomplete result %+v", i, r)
				}
				if strings.Contains(r.Answer, "</think>") || strings.Contains(r.Reasoning, "<think>") {
					t.Fatalf("prompt %d: markers left in %+v", i, r)
				}
				if api == APIGenerate && (len(r.OutputIDs) == 0 || r.MatchedStop != 151645) {
					t.Fatalf("prompt %d: native result without output ids or matched EOS: %+v", i, r)
				}
				servers[r.Server]++
			}
			if len(servers) != 2 {
				t.Errorf("completions by server %v, want both servers used", servers)
			}
			st := c.Stats()
			if st.Total.Completions != 40 || st.Total.InFlight != 0 || st.Total.Concurrency != 8 {
				t.Errorf("stats total %+v", st.Total)
			}
		})
	}
}

func TestBadRequestIsNotRetried(t *testing.T) {
	cfg := fastSim(1)
	cfg.ContextLength = 3000
	f := startSim(t, cfg)
	c := startClient(t, specsOf(f.URLs(), 2), testOptions(APIChat))
	s := c.Session()
	defer s.Close()
	_, err := s.Generate(context.Background(), &Request{Messages: []Message{{Role: "user", Content: strings.Repeat("long prompt ", 2000)}}})
	var e *Error
	if !errors.As(err, &e) || !e.BadRequest() || e.RejectReason() != "prompt_too_long" {
		t.Fatalf("got %v, want a 400 prompt_too_long", err)
	}
	if !strings.Contains(e.Message, "context length") {
		t.Errorf("message %q is not the server's", e.Message)
	}
	if got := c.Stats().Total.Errors["http_400"]; got != 1 {
		t.Errorf("http_400 count %d, want 1 (no retry)", got)
	}
}

func TestSpeculativeFigures(t *testing.T) {
	cfg := fastSim(1)
	cfg.SpecAcceptMean = 3
	f := startSim(t, cfg)
	c := startClient(t, specsOf(f.URLs(), 4), testOptions(APIGenerate))
	d := driveAll(t, c, 40, nil)
	d.mustAllComplete(t)
	for _, r := range d.results {
		if r.SpecVerifyCt == 0 || r.SpecAcceptLength < 2 || r.SpecAcceptLength > 4 {
			t.Fatalf("speculative figures %d, %g; want accept length about 3", r.SpecVerifyCt, r.SpecAcceptLength)
		}
	}
	if m := c.Stats().Total.MeanAcceptLength; m < 2.5 || m > 3.5 {
		t.Errorf("mean acceptance length %g, want about 3", m)
	}
}
