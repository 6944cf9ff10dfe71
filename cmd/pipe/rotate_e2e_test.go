//go:build e2e

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/filecommit"
)

// A run stopped (SIGTERM, as a scheduler's preemption sends it) every two
// seconds and resumed each time, scaled down from "every 20 s" of a real
// fleet: every run's shards have max_rows rows except its last, which its
// stop committed after the requests in flight finished; numbering goes on
// across the runs, and every id is in the outputs exactly once. Commit
// rounds (every 300 ms here) do not cut shards.
func TestStopAndResumeMakesFullShards(t *testing.T) {
	r := newCrashRig(t, "", 10000)
	const maxRows = 400
	src, err := os.ReadFile(r.file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "max_rows = 1500") {
		t.Fatal("the crash rig's completions output changed: adapt this test")
	}
	if err := os.WriteFile(r.file, []byte(strings.Replace(string(src), "max_rows = 1500", fmt.Sprintf("max_rows = %d", maxRows), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(r.dir, "out", "completions")
	var perRun [][]int64
	seen := 0
	for run := 0; ; run++ {
		if run == 30 {
			t.Fatalf("not done after %d stopped runs: %v", run, perRun)
		}
		cmd := r.start()
		// Stopped once this run has committed a shard of its own, rather
		// than after a time: a loaded machine may not have started the
		// run (or installed its signal handling) within any fixed time,
		// and every run makes progress, so the loop ends.
		stopped, quit := stopAfterNewShard(cmd, dir, seen)
		r.wait(cmd, time.Minute)
		quit()
		code := exitCode(cmd)
		m, err := filecommit.ReadManifest(dir)
		if err != nil || m == nil {
			t.Fatalf("run %d: manifest: %v", run, err)
		}
		var rows []int64
		for i, sh := range m.Shards[seen:] {
			rows = append(rows, sh.Rows)
			if want := fmt.Sprintf("part-%05d.parquet", seen+i); sh.Name != want {
				t.Fatalf("run %d: shard %s, want %s: numbering goes on", run, sh.Name, want)
			}
		}
		seen = len(m.Shards)
		perRun = append(perRun, rows)
		if code == 0 {
			break
		}
		if !stopped.Load() || code != exitInterrupted {
			t.Fatalf("run %d: exit %d (stopped by SIGTERM: %v), want %d", run, code, stopped.Load(), exitInterrupted)
		}
	}
	t.Logf("shards per run (rows): %v", perRun)
	if len(perRun) < 2 {
		t.Fatalf("only %d runs: the test did not stop the run often enough", len(perRun))
	}
	for i, rows := range perRun {
		for j, n := range rows {
			if n != maxRows && j != len(rows)-1 {
				t.Errorf("run %d made shards of %v rows: only its last may be short of %d", i, rows, maxRows)
			}
			if n > maxRows {
				t.Errorf("run %d: a shard of %d rows, more than max_rows %d", i, n, maxRows)
			}
		}
	}
	r.check()
}

// stopAfterNewShard sends the run's process group SIGTERM once the
// manifest in dir lists more than seen shards, and says whether it did.
// quit stops the looking; call it once the process has exited.
func stopAfterNewShard(cmd *exec.Cmd, dir string, seen int) (sent *atomic.Bool, quit func()) {
	sent = new(atomic.Bool)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if m, err := filecommit.ReadManifest(dir); err == nil && m != nil && len(m.Shards) > seen {
				sent.Store(true)
				syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				return
			}
		}
	}()
	return sent, func() { close(done) }
}
