package main

import (
	"bytes"
	"flag"
	"strconv"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

// TestSimLengthsFlag: --lengths fills the length flags not given; the
// given ones override it.
func TestSimLengthsFlag(t *testing.T) {
	cmd := commands["sim"]
	for _, tc := range []struct {
		args                                 []string
		thinkMean, thinkMax, ansMean, ansMax int
		sigma                                float64
	}{
		{[]string{"--lengths", "reasoning"}, 5300, 30000, 800, 8000, 0.9},
		{[]string{"--lengths", "reasoning", "--think-max", "20000", "--length-sigma", "1.1"}, 5300, 20000, 800, 8000, 1.1},
		{[]string{"--answer-mean", "60", "--lengths", "default"}, sim.DefaultThinkTokensMean, sim.DefaultThinkTokensMax, 60, sim.DefaultAnswerTokensMax, sim.DefaultLengthSigma},
	} {
		fs := flag.NewFlagSet("sim", flag.ContinueOnError)
		cmd.New().setFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var preset string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "lengths" {
				preset = f.Value.String()
			}
		})
		cfg := flagConfig(t, fs)
		if err := simUseLengths(&cfg, fs, preset); err != nil {
			t.Fatal(err)
		}
		if cfg.ThinkTokensMean != tc.thinkMean || cfg.ThinkTokensMax != tc.thinkMax || cfg.AnswerTokensMean != tc.ansMean ||
			cfg.AnswerTokensMax != tc.ansMax || cfg.LengthSigma != tc.sigma {
			t.Errorf("%v: think %d/%d answer %d/%d sigma %g", tc.args, cfg.ThinkTokensMean, cfg.ThinkTokensMax,
				cfg.AnswerTokensMean, cfg.AnswerTokensMax, cfg.LengthSigma)
		}
	}
	var out, errBuf bytes.Buffer
	code := run([]string{"sim", "--lengths", "long"}, &stdio{Out: &out, Err: &errBuf})
	if code == 0 || !strings.Contains(errBuf.String(), `--lengths: unknown length preset "long" (want default or reasoning)`) {
		t.Errorf("bad preset: exit %d, stderr %q", code, errBuf.String())
	}
}

// flagConfig reads the length flags of fs back into a sim.Config (the
// command keeps its own in its runner).
func flagConfig(t *testing.T, fs *flag.FlagSet) sim.Config {
	t.Helper()
	atoi := func(name string) int {
		n, err := strconv.Atoi(fs.Lookup(name).Value.String())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	sigma, err := strconv.ParseFloat(fs.Lookup("length-sigma").Value.String(), 64)
	if err != nil {
		t.Fatal(err)
	}
	return sim.Config{ThinkTokensMean: atoi("think-mean"), ThinkTokensMax: atoi("think-max"),
		AnswerTokensMean: atoi("answer-mean"), AnswerTokensMax: atoi("answer-max"), LengthSigma: sigma}
}
