package sglang

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A server's /metrics (SGLang's --enable-metrics, names from
// python/sglang/srt/metrics/collector.py) is read every metricsInterval
// while it is admitted. sglang:time_to_first_token_seconds gives its time
// to first token (pipe does not stream, so it cannot see it otherwise).
// For an adaptive server: sglang:token_usage (the KV cache's use, 0…1) holds
// its limit near 1, a rising sglang:num_retracted_requests_total (or a
// non-zero sglang:num_retracted_reqs gauge) backs it off as a retraction in
// an answer does. None of it is needed: a server without /metrics (404,
// 401, not Prometheus text) is not asked again after metricsGiveUp
// failures in a row, and the answers' own load fields drive the limit.

const (
	metricsInterval = 2 * time.Second
	metricsGiveUp   = 3
)

// serverMetrics is what the client reads of one /metrics scrape.
type serverMetrics struct {
	tokenUsage        float64
	retractedTotal    float64 // num_retracted_requests_total: a counter
	retractedNow      float64 // num_retracted_reqs: a gauge
	hasRetractedTotal bool
	// ttftSum and ttftCount are the time_to_first_token_seconds
	// histogram's sum and count (over the server's life, every client's
	// requests); hasTTFT says it was there.
	ttftSum, ttftCount float64
	hasTTFT            bool
}

// parseMetrics reads the figures the controller uses from Prometheus text;
// ok is false when body is not Prometheus text with any sglang: figure.
// With several label sets (one per dp rank or model) the largest counts.
func parseMetrics(body []byte) (m serverMetrics, ok bool) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return m, false
	}
	val := func(name string) (float64, bool) {
		f, found := fams[name]
		if !found {
			return 0, false
		}
		v, any := 0.0, false
		for _, mm := range f.GetMetric() {
			var x float64
			switch {
			case mm.GetGauge() != nil:
				x = mm.GetGauge().GetValue()
			case mm.GetCounter() != nil:
				x = mm.GetCounter().GetValue()
			case mm.GetUntyped() != nil:
				x = mm.GetUntyped().GetValue()
			default:
				continue
			}
			v, any = max(v, x), true
		}
		return v, any
	}
	var has [3]bool
	m.tokenUsage, has[0] = val("sglang:token_usage")
	m.retractedTotal, has[1] = val("sglang:num_retracted_requests_total")
	m.retractedNow, has[2] = val("sglang:num_retracted_reqs")
	m.hasRetractedTotal = has[1]
	if f, found := fams["sglang:time_to_first_token_seconds"]; found {
		for _, mm := range f.GetMetric() {
			if h := mm.GetHistogram(); h != nil {
				m.ttftSum += h.GetSampleSum()
				m.ttftCount += float64(h.GetSampleCount())
				m.hasTTFT = true
			}
		}
	}
	return m, has[0] || has[1] || has[2] || m.hasTTFT
}

// ttftWindow is the time to first token a server's /metrics reported
// since its first scrape by this client: the histogram's growth from
// then, so the requests of the run (and others sharing the server) count,
// not the server's whole life.
type ttftWindow struct {
	sum0, count0 float64 // at the first scrape
	sum, count   float64 // at the last
	seen         bool
}

func (w *ttftWindow) scraped(sum, count float64) {
	if !w.seen || count < w.count {
		w.sum0, w.count0, w.seen = sum, count, true // first, or the server restarted
	}
	w.sum, w.count = sum, count
}

// mean is the mean seconds to first token in the window, 0 when no
// request got its first token in it.
func (w *ttftWindow) mean() float64 {
	if n := w.count - w.count0; n > 0 {
		return (w.sum - w.sum0) / n
	}
	return 0
}

// startMetrics reads s's /metrics every metricsInterval while the client
// is open (see above): for an adaptive server's limit, and for every
// server's time to first token.
func (c *Client) startMetrics(s *server) {
	if s.bad != nil {
		return
	}
	adaptive := s.maxLimit > 0
	c.probers.Add(1)
	go func() {
		defer c.probers.Done()
		t := time.NewTicker(metricsInterval)
		defer t.Stop()
		failures := 0
		var last serverMetrics
		seen := false
		for failures < metricsGiveUp {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
			}
			c.mu.Lock()
			admitted := s.admitted
			c.mu.Unlock()
			if !admitted {
				continue
			}
			m, ok := c.scrape(c.ctx, s)
			if !ok {
				failures++
				continue
			}
			failures = 0
			c.mu.Lock()
			s.tokenUsage = m.tokenUsage
			retracted := m.retractedNow > 0
			if m.hasRetractedTotal && seen {
				retracted = m.retractedTotal > last.retractedTotal
			}
			if retracted && adaptive {
				c.retractedLocked(s)
			}
			if m.hasTTFT {
				s.ttft.scraped(m.ttftSum, m.ttftCount)
			}
			c.mu.Unlock()
			last, seen = m, true
		}
		if adaptive {
			c.opts.Logf("server %s: no usable /metrics (%d tries); its concurrency adapts from its answers alone", s.url, metricsGiveUp)
		}
	}()
}

// scrape reads s's /metrics once.
func (c *Client) scrape(ctx context.Context, s *server) (serverMetrics, bool) {
	status, body, err := get(ctx, c.hc, endpoint{s.url, s.header}, "/metrics", c.opts.CheckTimeout)
	if err != nil || status != http.StatusOK {
		return serverMetrics{}, false
	}
	return parseMetrics(body)
}
