package main

import (
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// Hidden profiling hooks for bench/ and for finding where a run's cost goes
// (not documented to users; nothing reads them but this file):
//
//	PIPE_CPUPROFILE=FILE  a CPU profile of the whole process
//	PIPE_MEMPROFILE=FILE  a heap profile taken at the peak of live heap
//	                      (sampled every 250 ms; rewritten at each new peak,
//	                      so FILE holds what was retained when memory was
//	                      highest, not what is left at exit)
//
// Read them with `go tool pprof -sample_index=inuse_space pipe FILE`.
func startProfiles() (stop func()) {
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
	runtime.GC() // the profile's in-use figures are as of the last GC
	if pprof.Lookup("heap").WriteTo(f, 0) == nil && f.Close() == nil {
		os.Rename(path+".tmp", path)
		return
	}
	f.Close()
}
