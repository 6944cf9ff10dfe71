package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pipe-dev/pipe/pipeline/figure"
)

// runMetrics serves a run's figures to Prometheus (pipe run
// --metrics-addr): the engine's accounting per stage and edge, and every
// stage's figures, named pipe_KIND_FIGURE with the labels "stage" and the
// figure's own (e.g. pipe_generate_in_flight{stage="gen",server="…"}).
// It serves the last snapshot (taken every second), so a scrape never
// waits on the run.
type runMetrics struct {
	mu    sync.Mutex
	state string
	ls    *liveStatus

	srv *http.Server
	ln  net.Listener
}

// startMetrics listens on addr and serves /metrics until close.
// metricsListenAddr is --metrics-addr as listened on: a bare port ("9090"
// or ":9090") is on 127.0.0.1, so the figures stay on this machine unless a
// host is given.
func metricsListenAddr(addr string) (string, error) {
	if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("--metrics-addr %q: want HOST:PORT or PORT, e.g. 127.0.0.1:9090", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// metricsExposure warns when addr serves beyond loopback: the metrics name
// stages, server URLs and settings to whoever can connect.
func metricsExposure(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("--metrics-addr %s serves this run's metrics (stage ids, server URLs, settings) to every host that can reach it, without authentication; 127.0.0.1:PORT keeps them on this machine", addr)
}

func startMetrics(addr string) (*runMetrics, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	m := &runMetrics{ln: ln, state: stateRunning}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go m.srv.Serve(ln)
	return m, nil
}

// Addr is where it listens (the port chosen, for addr ":0").
func (m *runMetrics) Addr() string { return m.ln.Addr().String() }

func (m *runMetrics) set(state string, ls *liveStatus) {
	m.mu.Lock()
	m.state, m.ls = state, ls
	m.mu.Unlock()
}

func (m *runMetrics) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		m.srv.Close() // a scrape that hangs past the deadline
	}
}

// Describe sends nothing: the metrics follow the stages' figures, known
// only at run time (an unchecked collector).
func (m *runMetrics) Describe(chan<- *prometheus.Desc) {}

func (m *runMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	state, ls := m.state, m.ls
	m.mu.Unlock()
	gauge := func(name, help string, v float64, labels ...string) {
		names, values := splitPairs(labels)
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, names, nil), prometheus.GaugeValue, v, values...)
	}
	counter := func(name, help string, v float64, labels ...string) {
		names, values := splitPairs(labels)
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, names, nil), prometheus.CounterValue, v, values...)
	}
	for _, s := range []string{stateRunning, stateDraining, stateFinished, stateStopped, stateFailed} {
		v := 0.0
		if s == state {
			v = 1
		}
		gauge("pipe_run_state", "The run's state: 1 for the current one.", v, "state", s)
	}
	if ls == nil {
		return
	}
	gauge("pipe_run_elapsed_seconds", "Time since the run started.", ls.ElapsedS)
	gauge("pipe_run_finished_ids", "Ids the run directory counts as finished (committed everywhere they went).", float64(ls.Finished))
	if ls.ETA != nil && ls.ETA.By != "" && ls.ETA.Waiting == "" {
		gauge("pipe_run_eta_seconds", "Estimated time to finish, from the prompts left and the fleet's concurrency and latency (or the last minute's rate).", ls.ETA.Seconds)
	}
	if e := ls.Economy; e != nil {
		counter("pipe_run_decoded_tokens_total", "Output tokens the servers decoded in this run.", float64(e.Decoded))
		counter("pipe_run_trained_tokens_total", "Loss tokens of the training rows built in this run, within the trainer's max_length.", float64(e.Trained))
		if e.Trained > 0 {
			gauge("pipe_run_decoded_per_trained_token", "Decoded tokens per trained token: 1.0 when every decoded token is trained.", e.Ratio)
		}
	}
	for _, st := range ls.Stages {
		for _, o := range []struct {
			name string
			v    int64
		}{{"in", st.In}, {"out", st.Out}, {"rejected", st.Rejected}, {"failed", st.Failed}, {"skipped", st.Skipped}} {
			counter("pipe_stage_records_total", "Records by stage and outcome: in = out + rejected + failed + skipped.", float64(o.v),
				"stage", st.ID, "kind", st.Kind, "outcome", o.name)
		}
		for reason, n := range st.Reasons {
			counter("pipe_stage_rejected_by_reason_total", "Rejected records by stage and reason code.", float64(n), "stage", st.ID, "reason", reason)
		}
		stageFigures(ch, st)
	}
	for _, e := range ls.Edges {
		gauge("pipe_edge_queue_depth", "Records waiting on an edge: a full one means the stages after it are the bottleneck.", float64(e.Depth), "from", e.From, "port", e.Port)
	}
}

// stageFigures exports a stage's figures. Of the figures of one name, only
// those with the most labels are kept: the others are their totals (the
// fleet's, beside each server's), which Prometheus sums itself.
func stageFigures(ch chan<- prometheus.Metric, st liveStage) {
	most := map[string]int{}
	for _, f := range st.Figures {
		most[f.Name] = max(most[f.Name], len(f.Labels))
	}
	prefix := "pipe_" + metricName(st.Kind) + "_"
	for _, f := range st.Figures {
		if len(f.Labels) != most[f.Name] {
			continue
		}
		name := prefix + metricName(f.Name)
		switch f.Unit {
		case figure.UnitSeconds:
			if !strings.Contains(name, "seconds") {
				name += "_seconds"
			}
		case figure.UnitBytes:
			if !strings.Contains(name, "bytes") {
				name += "_bytes"
			}
		}
		names, values := []string{"stage"}, []string{st.ID}
		for _, k := range sortedLabelKeys(f.Labels) {
			names, values = append(names, metricName(k)), append(values, metricLabel(k, f.Labels[k]))
		}
		help := fmt.Sprintf("Figure %q of %s stages.", f.Name, st.Kind)
		switch f.Kind {
		case figure.Counter:
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name+"_total", help, names, nil), prometheus.CounterValue, f.Value, values...)
		case figure.Gauge:
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name, help, names, nil), prometheus.GaugeValue, f.Value, values...)
		case figure.Quantiles:
			qs := map[float64]float64{}
			for _, q := range f.Quantiles {
				qs[q.Q] = q.V
			}
			ch <- prometheus.MustNewConstSummary(prometheus.NewDesc(name, help, names, nil), uint64(max(f.Count, 0)), f.Value, qs, values...)
		case figure.State:
			names, values = append(names, metricName(f.Name)), append(values, f.Text)
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc(name+"_info", help+" The current one is 1.", names, nil), prometheus.GaugeValue, 1, values...)
		}
	}
}

// metricLabel is a label's value as exported: a "prompt" label (a system
// prompt's text, from tokenize-and-mask's rows_by_system_prompt) becomes a
// digest of it, so the metrics tell prompts apart without publishing them.
func metricLabel(key, value string) string {
	if key != "prompt" || strings.HasSuffix(value, " others") {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// metricName makes s a valid Prometheus name part.
func metricName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

func sortedLabelKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func splitPairs(kv []string) (names, values []string) {
	for i := 0; i+1 < len(kv); i += 2 {
		names, values = append(names, kv[i]), append(values, kv[i+1])
	}
	return names, values
}
