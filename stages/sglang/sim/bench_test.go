package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
)

// BenchmarkGenerate measures one server's sustained /generate rate against a
// Go client with 64 connections, with the load model's delays compressed
// away (speed 1e9), so what is measured is the simulator's own cost plus
// the client's on the same machine. Reports requests/s and output tokens/s.
//
//	go test -run - -bench Generate -benchtime 5s ./stages/sglang/sim
func BenchmarkGenerate(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"default-lengths", Config{Speed: 1e9, MaxRunning: 256}},
		{"short-outputs", Config{Speed: 1e9, MaxRunning: 256, ThinkTokensMean: 60, AnswerTokensMean: 20}},
	} {
		b.Run(bc.name, func(b *testing.B) { benchGenerate(b, bc.cfg) })
	}
}

// BenchmarkGenerateURL is BenchmarkGenerate against the server at
// $SIM_URL (e.g. a `pipe sim` process, as bench/sim.sh runs it); skipped
// without it.
func BenchmarkGenerateURL(b *testing.B) {
	u := os.Getenv("SIM_URL")
	if u == "" {
		b.Skip("SIM_URL not set")
	}
	benchClient(b, u+"/generate")
}

func benchGenerate(b *testing.B, cfg Config) {
	f, err := Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	benchClient(b, f.URLs()[0]+"/generate")
}

// benchClient POSTs /generate from 64 connections, a different prompt each
// time, and counts completion tokens from meta_info.
func benchClient(b *testing.B, url string) {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var seq, tokens atomic.Int64
	b.SetParallelism(32) // × GOMAXPROCS goroutines, capped by 64 connections
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var meta struct {
			MetaInfo struct {
				CompletionTokens int64 `json:"completion_tokens"`
			} `json:"meta_info"`
		}
		buf := new(bytes.Buffer)
		for pb.Next() {
			body := fmt.Sprintf(`{"text":"<|im_start|>user\nprompt %d<|im_end|>\n<|im_start|>assistant\n","sampling_params":{"max_new_tokens":16384}}`, seq.Add(1)%5000)
			resp, err := c.Post(url, "application/json", bytes.NewBufferString(body))
			if err != nil {
				b.Error(err)
				return
			}
			buf.Reset()
			_, _ = io.Copy(buf, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
			if err := json.Unmarshal(buf.Bytes(), &meta); err != nil {
				b.Error(err)
				return
			}
			tokens.Add(meta.MetaInfo.CompletionTokens)
		}
	})
	el := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/el, "req/s")
	b.ReportMetric(float64(tokens.Load())/el, "out-tokens/s")
}

// BenchmarkHandler measures the /generate handler alone (no network): the
// simulator's per-request CPU and allocations.
func BenchmarkHandler(b *testing.B) {
	f, err := Start(context.Background(), Config{Speed: 1e9, MaxRunning: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	l := f.Servers()[0].current()
	body := []byte(`{"text":"<|im_start|>user\nprompt 1<|im_end|>\n<|im_start|>assistant\n","sampling_params":{"max_new_tokens":16384}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := &discardWriter{h: http.Header{}}
		r, _ := http.NewRequest(http.MethodPost, "/generate", bytes.NewReader(body))
		l.ServeHTTP(w, r)
		if w.status != 200 {
			b.Fatalf("status %d", w.status)
		}
	}
}

type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(s int)           { w.status = s }
