package sim

import (
	"slices"
	"strings"
	"testing"
)

// The reasoning preset's draws: about 6,000 tokens on average, a heavy
// tail (p99 several times the mean), thinking never past 30,000.
func TestLengthPresetReasoning(t *testing.T) {
	var cfg Config
	if err := cfg.UseLengths("reasoning"); err != nil {
		t.Fatal(err)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	const n = 50000
	totals := make([]int, n)
	sum, maxThink := 0, 0
	for i := range totals {
		think, answer := drawLengths(&cfg, mix(uint64(i), cfg.Seed))
		totals[i] = think + answer
		sum += think + answer
		maxThink = max(maxThink, think)
	}
	slices.Sort(totals)
	mean := float64(sum) / n
	p50, p99 := totals[n/2], totals[n*99/100]
	t.Logf("reasoning preset: mean %.0f, p50 %d, p99 %d, max %d tokens", mean, p50, p99, totals[n-1])
	if mean < 5700 || mean > 6300 {
		t.Errorf("mean %.0f tokens, want 6000 ± 5%%", mean)
	}
	if float64(p99) < 4*mean {
		t.Errorf("p99 %d is not far above the mean %.0f: no heavy tail", p99, mean)
	}
	if maxThink > 30000 || maxThink < 25000 {
		t.Errorf("longest thinking %d tokens, want up to (and near) 30000", maxThink)
	}
}

func TestLengthPresetOptions(t *testing.T) {
	for _, tc := range []struct {
		url                                  string
		thinkMean, thinkMax, ansMean, ansMax int
		sigma                                float64
	}{
		{"sim:1", DefaultThinkTokensMean, DefaultThinkTokensMax, DefaultAnswerTokensMean, DefaultAnswerTokensMax, DefaultLengthSigma},
		{"sim:1?lengths=reasoning", 5300, 30000, 800, 8000, 0.9},
		// Options given with the preset override it, in any order.
		{"sim:1?think_max=20000&lengths=reasoning&length_sigma=1.2", 5300, 20000, 800, 8000, 1.2},
		{"sim:1?lengths=reasoning&answer_mean=50&answer_max=100", 5300, 30000, 50, 100, 0.9},
		// A mean above its cap raises the cap, unless the cap is given.
		{"sim:1?think_mean=20000", 20000, 65536, DefaultAnswerTokensMean, DefaultAnswerTokensMax, DefaultLengthSigma},
		{"sim:1?lengths=reasoning&think_mean=40000", 40000, 65536, 800, 8000, 0.9},
	} {
		n, q, ok, err := ParseURL(tc.url)
		if !ok || err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		cfg, err := ConfigFromQuery(n, q, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if cfg.ThinkTokensMean != tc.thinkMean || cfg.ThinkTokensMax != tc.thinkMax || cfg.AnswerTokensMean != tc.ansMean ||
			cfg.AnswerTokensMax != tc.ansMax || cfg.LengthSigma != tc.sigma {
			t.Errorf("%s: think %d/%d answer %d/%d sigma %g", tc.url, cfg.ThinkTokensMean, cfg.ThinkTokensMax,
				cfg.AnswerTokensMean, cfg.AnswerTokensMax, cfg.LengthSigma)
		}
	}
	for in, want := range map[string]string{
		"sim:1?lengths=reasonning":                 `sim option lengths: unknown length preset "reasonning" (want default or reasoning)`,
		"sim:1?think_max=100&think_mean=200":       "think tokens mean must be 1..max (100), got 200",
		"sim:1?length_sigma=wide":                  `sim option length_sigma="wide"`,
		"sim:1?lengths=reasoning&length_sigma=3.5": "length sigma must be in (0, 3], got 3.5",
	} {
		// ParseURL checks the options; the ranges are checked as a
		// fleet starts (withDefaults).
		n, q, ok, err := ParseURL(in)
		if ok && err == nil {
			cfg, _ := ConfigFromQuery(n, q, nil)
			_, err = cfg.withDefaults()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	var cfg Config
	if err := cfg.UseLengths("long"); err == nil || !strings.Contains(err.Error(), "default or reasoning") {
		t.Errorf("UseLengths(long): %v", err)
	}
}

// A request's max_new_tokens (chat: max_tokens) below the drawn length
// cuts the output at exactly that many tokens, finish_reason length.
func TestLengthPresetHonoursMaxNewTokens(t *testing.T) {
	cfg := Config{Speed: 1e6}
	if err := cfg.UseLengths("reasoning"); err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, cfg)
	c := client(t)
	full := post(t, c, f.URLs()[0]+"/generate", gen("a long question", 39000))
	drawn := num(full.obj, "meta_info.completion_tokens")
	limit := drawn / 3
	if drawn < 100 {
		t.Fatalf("drawn %d tokens", drawn)
	}
	r := post(t, c, f.URLs()[0]+"/generate", gen("a long question", limit))
	if got := len(ids(r.obj)); got != limit || num(r.obj, "meta_info.completion_tokens") != limit ||
		str(r.obj, "meta_info.finish_reason.type") != "length" || num(r.obj, "meta_info.finish_reason.length") != limit {
		t.Errorf("max_new_tokens %d of %d: %d ids, meta_info %v", limit, drawn, got, path(r.obj, "meta_info"))
	}
	msgs := []map[string]any{{"role": "user", "content": "a long question"}}
	for _, key := range []string{"max_tokens", "max_completion_tokens"} {
		r = post(t, c, f.URLs()[0]+"/v1/chat/completions", map[string]any{"messages": msgs, key: 50})
		if num(r.obj, "usage.completion_tokens") != 50 || str(r.obj, "choices.0.finish_reason") != "length" {
			t.Errorf("chat %s 50: %.300s", key, r.body)
		}
	}
}
