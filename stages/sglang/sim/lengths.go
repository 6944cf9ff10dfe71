package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Length presets are named output-length shapes: "sim:N?lengths=NAME" in
// a pipeline file, `pipe sim --lengths NAME`. A preset fills only the
// length fields still zero, so options given with it override it.
//
// reasoning is a reasoning model's heavy tail: thinking 5,300 and answer
// 800 tokens on average, log-normal with sigma 0.9, thinking capped at
// 30,000 and answers at 8,000. The outputs then average about 6,000
// tokens (the caps trim the draws a little), with a median near 4,400 and
// a p99 near 29,000.
var lengthPresets = map[string]Config{
	"default": {
		ThinkTokensMean: DefaultThinkTokensMean, ThinkTokensMax: DefaultThinkTokensMax,
		AnswerTokensMean: DefaultAnswerTokensMean, AnswerTokensMax: DefaultAnswerTokensMax,
		LengthSigma: DefaultLengthSigma,
	},
	"reasoning": {
		ThinkTokensMean: 5300, ThinkTokensMax: 30000,
		AnswerTokensMean: 800, AnswerTokensMax: 8000,
		LengthSigma: 0.9,
	},
}

// LengthPresets are the preset names, sorted.
func LengthPresets() []string { return slices.Sorted(maps.Keys(lengthPresets)) }

// UseLengths fills c's length fields that are still zero
// (ThinkTokensMean, ThinkTokensMax, AnswerTokensMean, AnswerTokensMax,
// LengthSigma) from the preset name. An unknown name is an error naming
// the presets.
func (c *Config) UseLengths(name string) error {
	p, ok := lengthPresets[name]
	if !ok {
		return fmt.Errorf("unknown length preset %q (want %s)", name, strings.Join(LengthPresets(), " or "))
	}
	fill := func(f *int, v int) {
		if *f == 0 {
			*f = v
		}
	}
	fill(&c.ThinkTokensMean, p.ThinkTokensMean)
	fill(&c.ThinkTokensMax, p.ThinkTokensMax)
	fill(&c.AnswerTokensMean, p.AnswerTokensMean)
	fill(&c.AnswerTokensMax, p.AnswerTokensMax)
	if c.LengthSigma == 0 {
		c.LengthSigma = p.LengthSigma
	}
	return nil
}

// drawLengths draws the thinking and answer lengths, in tokens, of the
// output whose seeded content hash is h: log-normal around the means,
// at least 8 and 4, at most the caps.
func drawLengths(cfg *Config, h uint64) (think, answer int) {
	think = int(lognormal(float64(cfg.ThinkTokensMean), cfg.LengthSigma, unitFloat(mix(h, 1)), unitFloat(mix(h, 2))))
	think = min(max(think, 8), cfg.ThinkTokensMax)
	answer = int(lognormal(float64(cfg.AnswerTokensMean), cfg.LengthSigma, unitFloat(mix(h, 3)), unitFloat(mix(h, 4))))
	answer = min(max(answer, 4), cfg.AnswerTokensMax)
	return think, answer
}
