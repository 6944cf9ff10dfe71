package stages

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// execDiscard is an Emitter that keeps nothing.
type execDiscard struct{}

func (execDiscard) Emit(string, *record.Record) error           { return nil }
func (execDiscard) Reject(*record.Record, string, string) error { return nil }
func (execDiscard) Fail(*record.Record, error, int) error       { return nil }
func (execDiscard) Took(int)                                    {}
func (execDiscard) SkipFinished(string) bool                    { return false }
func (execDiscard) Skip(*record.Record, string) error           { return nil }

// BenchmarkExec judges records with the sample program through exec (the
// stage's in_flight workers, as the engine runs them) and, for the same
// records, the same program reading them from a file itself: records/s
// of each, and exec's share of the direct rate (go test -bench Exec
// ./stages).
func BenchmarkExec(b *testing.B) {
	prog, err := os.ReadFile("../pipelines/answer_rules.py")
	if err != nil {
		b.Fatal(err)
	}
	const batch = 5000
	recs := execRecs(batch)
	s, _, dir := openExec(b, map[string]string{"answer_rules.py": string(prog)}, execConfig{InFlight: 64}, "python3", "answer_rules.py")
	var n int
	var spent time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := processAll(s, recs, execDiscard{}); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(t0)
		n += batch
	}
	viaExec := float64(n) / spent.Seconds()

	// The same program over a file of the same records (ten times over,
	// so that its start is a small part of the time).
	in, err := os.Create(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	var line []byte
	for range 10 {
		for _, r := range recs {
			if line, err = record.AppendJSON(line[:0], r); err != nil {
				b.Fatal(err)
			}
			in.Write(append(line, '\n'))
		}
	}
	in.Seek(0, 0)
	cmd := exec.Command("python3", "answer_rules.py")
	cmd.Dir, cmd.Stdin = dir, in
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	direct := float64(10*batch) / time.Since(t0).Seconds()
	in.Close()

	b.ReportMetric(viaExec, "exec_records/s")
	b.ReportMetric(direct, "direct_records/s")
	b.ReportMetric(viaExec/direct, "exec/direct")
}
