package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"time"
)

// Hidden profiling hooks for bench/ and for finding where a run's cost goes
// (not documented to users; nothing reads them but this file):
//
//	PIPE_CPUPROFILE=FILE  a CPU profile of the whole process
//	PIPE_MEMPROFILE=FILE  a heap profile taken at the peak of live heap
//	                      (sampled every 250 ms; rewritten at each new peak,
//	                      so FILE holds what was retained when memory was
//	                      highest, not what is left at exit; FILE.memory
//	                      has the runtime's memory classes at that time:
//	                      stacks, free heap, metadata, which the profile
//	                      leaves out)
//
// Read them with `go tool pprof -sample_index=inuse_space pipe FILE`.
func startProfiles() (stop func()) {
	if os.Getenv("PIPE_MEMPROFILE") == "" {
		// Nothing reads the heap profile then; each sampled allocation
		// would unwind its stack, reading the function tables of the
		// binary, which then stay resident (their pages count in RSS).
		runtime.MemProfileRate = 0
	}
	var stops []func()
	if path := os.Getenv("PIPE_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
	}
	if path := os.Getenv("PIPE_MEMPROFILE"); path != "" {
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			var peak uint64
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				metrics.Read(sample)
				if live := sample[0].Value.Uint64(); live > peak+peak/20 {
					peak = live
					writeHeapProfile(path)
				}
			}
		}()
		stops = append(stops, func() { close(done); <-finished })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

func writeHeapProfile(path string) {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return
	}
	// The profile's in-use figures are as of the last GC; the classes are
	// read before the profile's own writing allocates.
	runtime.GC()
	classes := memoryClasses()
	if pprof.Lookup("heap").WriteTo(f, 0) == nil && f.Close() == nil {
		os.Rename(path+".tmp", path)
		os.WriteFile(path+".memory", classes, 0o644)
		return
	}
	f.Close()
}

// memoryClasses is every /memory/classes/ figure and the goroutine count,
// one per line.
func memoryClasses() []byte {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || d.Name == "/sched/goroutines:goroutines" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	var b []byte
	for _, s := range samples {
		b = fmt.Appendf(b, "%s %d\n", s.Name, s.Value.Uint64())
	}
	return b
}
