package stages

import (
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pipe-dev/pipe/pipeline/figure"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/view"
	"github.com/pipe-dev/pipe/stages/sglang"
)

// TinyAnswerRunes: an answer shorter than this, spaces trimmed, is "tiny" —
// empty or a stub. A run where many answers are tiny is most likely broken
// (the seed job's dataset was 87% empty answers), so their share is a
// figure of its own, watched from the first minute.
const TinyAnswerRunes = 8

func tinyAnswer(answer string) bool {
	return utf8.RuneCountInString(strings.TrimSpace(answer)) < TinyAnswerRunes
}

func (g *generate) countEnded(why string) {
	for k, r := range endedReasons {
		if r == why {
			g.ended[k].Add(1)
		}
	}
}

func (g *generate) countAnswer(c *record.Completion) {
	g.answers.Add(1)
	g.lengths.add(c)
	if tinyAnswer(c.Answer) {
		g.tinyAnswers.Add(1)
	}
}

var _ view.FleetViewer = (*generate)(nil)

// FleetView returns the fleet's view (nil before the stage started its
// client).
func (g *generate) FleetView() *view.Fleet {
	if g.client == nil {
		return nil
	}
	st := g.client.Stats()
	v := &view.Fleet{
		InFlight: int64(st.Total.InFlight), Capacity: int64(st.Total.Concurrency), Tokens: st.Total.OutputTokens,
		Answers: g.answers.Load(), Tiny: g.tinyAnswers.Load(), MaxOutputTokens: int64(g.cfg.MaxOutputTokens), RequestCap: int64(g.requestCap()),
		P95Seconds: st.Total.P95.Seconds(), Servers: make([]view.Server, 0, len(st.Servers)), Lengths: g.lengths.view(),
	}
	for _, f := range g.fleets {
		for _, st := range f.Stats() {
			v.Launched = append(v.Launched, view.Launched(st))
		}
		for _, e := range f.Events() {
			v.Events = append(v.Events, view.ServerEvent(e))
		}
	}
	if line, ok := g.client.Waiting(); ok {
		v.Waiting = line
	}
	for _, s := range st.Servers {
		state, why := serverState(s)
		sv := view.Server{
			Name: serverName(s), State: state, Reason: why, InFlight: int64(s.InFlight), Concurrency: int64(s.Concurrency),
			Completions: s.Completions, Tokens: s.OutputTokens, PerSecond: s.CompletionsPerSec, P95Seconds: s.P95.Seconds(),
			Ejections: s.Ejections, Accept: s.MeanAcceptLength, QuietSeconds: s.Quiet.Seconds(),
			LatencyRecent: s.LatencyRecent.Seconds(), TTFTSeconds: s.TTFT.Seconds(),
		}
		if s.Completions > 0 {
			sv.LatencyMean = s.LatencySum.Seconds() / float64(s.Completions)
		}
		if len(s.Errors) > 0 {
			sv.Errors = maps.Clone(s.Errors)
			for _, n := range s.Errors {
				sv.ErrorsTotal += n
			}
		}
		v.Servers = append(v.Servers, sv)
	}
	return v
}

// requestCap is the most one request may decode: max_output_tokens, or
// less where [trainer]'s max_length leaves less room.
func (g *generate) requestCap() int {
	if g.cfg.MaxLength > 0 {
		return min(g.cfg.MaxOutputTokens, g.cfg.MaxLength)
	}
	return g.cfg.MaxOutputTokens
}

func serverName(s sglang.ServerStats) string { return strings.TrimPrefix(s.URL, "http://") }

// serverState is a server's state as figures and views show it, and why.
func serverState(s sglang.ServerStats) (state, why string) {
	state = view.ServerReady
	if s.Suspect {
		state, why = view.ServerSuspect, "a request stalled; probing"
	}
	if s.State != sglang.StateReady {
		state, why = view.ServerProbing, s.Reason
		if s.Ejections > 0 {
			state = view.ServerEjected
		} else if s.NeverReady {
			state = view.ServerNeverReady
		}
	}
	return state, why
}

// Report gives the live figures, per server (label "server", without
// credentials) and for the fleet (no label).
func (g *generate) Report() []figure.Figure {
	if g.client == nil {
		return nil
	}
	st := g.client.Stats()
	out := make([]figure.Figure, 0, 12*(len(st.Servers)+1)+3)
	if line, ok := g.client.Waiting(); ok {
		out = append(out, figure.NewState("waiting_for_servers", "waiting", line))
	}
	out = append(out,
		figure.NewCounter("answers", g.answers.Load()),
		figure.NewCounter("tiny_answers", g.tinyAnswers.Load()))
	for k, r := range endedReasons {
		if n := g.ended[k].Load(); n > 0 {
			out = append(out, figure.NewCounter("conversations_ended", n, "reason", r))
		}
	}
	out = appendServerFigures(out, st.Total)
	out = append(out, figure.NewCounter(figure.DecodedTokens, st.Total.OutputTokens).In(figure.UnitTokens))
	for _, s := range st.Servers {
		out = appendServerFigures(out, s, "server", serverName(s))
	}
	return g.fleetFigures(out)
}

// appendServerFigures adds one server's figures (or, without labels, the
// fleet's).
func appendServerFigures(out []figure.Figure, s sglang.ServerStats, labels ...string) []figure.Figure {
	if len(labels) > 0 {
		state, why := serverState(s)
		out = append(out, figure.NewState("state", state, why, labels...))
	}
	out = append(out,
		figure.NewGauge("in_flight", float64(s.InFlight), labels...),
		figure.NewGauge("concurrency", float64(s.Concurrency), labels...),
		figure.NewCounter("completions", s.Completions, labels...),
		figure.NewGauge("completions_per_second", s.CompletionsPerSec, labels...).In(figure.UnitPerSecond),
		figure.NewCounter("output_tokens", s.OutputTokens, labels...).In(figure.UnitTokens),
		figure.NewGauge("output_tokens_per_second", s.OutputTokensPerSec, labels...).In(figure.UnitPerSecond),
		figure.NewQuantiles("latency", s.Completions, s.LatencySum.Seconds(), []figure.Quantile{
			{Q: 0.5, V: s.P50.Seconds()}, {Q: 0.95, V: s.P95.Seconds()}}, labels...).In(figure.UnitSeconds),
	)
	if s.MeanAcceptLength > 0 {
		// Σ tokens / Σ verify steps, as SGLang aggregates it.
		out = append(out, figure.NewGauge("spec_accept_length", s.MeanAcceptLength, labels...))
	}
	if s.SpecAcceptRate > 0 {
		out = append(out, figure.NewGauge("spec_accept_rate", s.SpecAcceptRate, labels...))
	}
	if s.LoadReported {
		// The servers' own load with their last answers (meta_info).
		out = append(out,
			figure.NewGauge("server_running", float64(s.ServerRunning), labels...),
			figure.NewGauge("server_waiting", float64(s.ServerWaiting), labels...))
	}
	out = append(out, figure.NewCounter("ejections", s.Ejections, labels...),
		figure.NewCounter("stalls", s.Stalls, labels...))
	for _, class := range slices.Sorted(maps.Keys(s.Errors)) {
		out = append(out, figure.NewCounter("errors", s.Errors[class], append([]string{"class", class}, labels...)...))
	}
	return out
}
