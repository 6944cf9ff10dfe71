//go:build e2e

package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/engine"
)

// One million prompts through read-prompts → pass-through → write-jsonl:
// every record arrives exactly once, and peak heap stays flat (within 1.5×
// of the peak with 100K records) apart from the set of ids read, which the
// reader keeps to reject repeated ids (as dedupe-against-progress does,
// 8 bytes an id plus the map's overhead, measured here).
func TestMillionRecordsFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 1M-record memory test")
	}
	small := runPromptsThrough(t, 100_000)
	large := runPromptsThrough(t, 1_000_000)
	ids := idSetBytes(1_000_000)
	t.Logf("100K: %.0f records/s, peak live heap %.1f MiB; 1M: %.0f records/s, peak live heap %.1f MiB (ratio %.2f); a set of 1M ids takes %.1f MiB",
		small.rate, mib(small.peak), large.rate, mib(large.peak), float64(large.peak)/float64(small.peak), mib(ids))
	if float64(large.peak) > 1.5*float64(small.peak)+float64(ids) {
		t.Fatalf("peak heap grew with input: %.1f MiB for 1M vs %.1f MiB for 100K (of which the ids read may take %.1f MiB)", mib(large.peak), mib(small.peak), mib(ids))
	}
}

// idSetBytes is the live heap a set of n id hashes takes.
func idSetBytes(n int) uint64 {
	live := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := live()
	set := map[uint64]struct{}{}
	for i := range n {
		set[uint64(i)*0x9e3779b97f4a7c15] = struct{}{}
	}
	after := live()
	runtime.KeepAlive(set)
	if after < before {
		return 0
	}
	return after - before
}

type throughput struct {
	rate float64
	peak uint64
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func runPromptsThrough(t *testing.T, n int) throughput {
	dir := t.TempDir()
	in := filepath.Join(dir, "prompts.jsonl")
	writePrompts(t, in, n)
	p := plan(t, dir, passThroughGraph(2))
	// Frequent GCs sample the live heap often, so both runs' peaks come
	// close to the true maximum of what is in flight.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	// Peak live heap: the heap each GC found live, sampled through the run.
	// It measures what the run holds, without the garbage a GC has not yet
	// collected (HeapAlloc's peak swings with GC timing).
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	sum, err := engine.Run(context.Background(), p, engine.Options{})
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.Stages[2].Out; got != int64(n) {
		t.Fatalf("write-jsonl wrote %d records, want %d", got, n)
	}
	// Exactly once: every id appears once in the committed output.
	f, err := os.Open(filepath.Join(dir, "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := make([]bool, n)
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		var rec struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(rec.ID, "p%d", &i); err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("id %q unexpected or seen twice", rec.ID)
		}
		seen[i] = true
		lines++
	}
	if lines != n {
		t.Fatalf("output has %d lines, want %d", lines, n)
	}
	return throughput{rate: float64(n) / elapsed.Seconds(), peak: peak.Load()}
}
