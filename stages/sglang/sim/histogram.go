package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// ttftBuckets are the upper bounds of the time-to-first-token histogram,
// in seconds (a subset of SGLang's, metrics/collector.py).
var ttftBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160}

// histogram is a Prometheus histogram of seconds: cumulative counts per
// bucket, the sum and the count, as SGLang's /metrics exposes
// sglang:time_to_first_token_seconds.
type histogram struct {
	mu     sync.Mutex
	counts []int64 // per bucket of ttftBuckets, then +Inf
	sum    float64
}

func (h *histogram) observe(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = make([]int64, len(ttftBuckets)+1)
	}
	i := len(ttftBuckets)
	for j, le := range ttftBuckets {
		if v <= le {
			i = j
			break
		}
	}
	h.counts[i]++
	h.sum += v
}

// write appends the histogram in Prometheus text as sglang:NAME with the
// label set label (`{model_name="m"}`).
func (h *histogram) write(b *strings.Builder, name, help, label string) {
	h.mu.Lock()
	counts := make([]int64, len(ttftBuckets)+1)
	copy(counts, h.counts)
	sum := h.sum
	h.mu.Unlock()
	inner := strings.TrimSuffix(strings.TrimPrefix(label, "{"), "}")
	fmt.Fprintf(b, "# HELP sglang:%s %s\n# TYPE sglang:%s histogram\n", name, help, name)
	var cum int64
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(ttftBuckets) {
			le = strconv.FormatFloat(ttftBuckets[i], 'g', -1, 64)
		}
		fmt.Fprintf(b, "sglang:%s_bucket{%s,le=%q} %d\n", name, inner, le, cum)
	}
	if math.IsNaN(sum) {
		sum = 0
	}
	fmt.Fprintf(b, "sglang:%s_sum%s %s\nsglang:%s_count%s %d\n", name, label, strconv.FormatFloat(sum, 'g', -1, 64), name, label, cum)
}
