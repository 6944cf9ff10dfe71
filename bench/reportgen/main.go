// Command reportgen makes a large run directory for bench/report.sh from a
// small real one: every committed JSONL output of SEED is repeated (copy k
// of record ID gets the id "kK-ID") into DIR as a committed output with its
// index, written with pipe's own commit log, until DIR's first output
// holds -gb gigabytes or DIR -ids ids; run.json is SEED's with its paths moved to DIR. With -vary
// N, every Nth row of the first output carries a rejection it did not
// have (stage "check", reason "bench_varied"): a second run whose
// verdicts differ, for pipe report A B.
//
//	go run ./bench/reportgen -from SEED -to DIR -gb 4
//	go run ./bench/reportgen -from SEED -to DIR -ids 900000 -vary 10
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
	"github.com/pipe-dev/pipe/pipeline/rundir"
)

func main() {
	from := flag.String("from", "", "seed run `DIR`")
	to := flag.String("to", "", "run `DIR` to write (must not exist)")
	gb := flag.Float64("gb", 0, "stop at this many GiB of the first output")
	ids := flag.Int64("ids", 0, "stop at this many ids")
	vary := flag.Int("vary", 0, "reject every `N`th row of the first output")
	flag.Parse()
	if *from == "" || *to == "" || (*gb <= 0) == (*ids <= 0) {
		log.Fatal("usage: reportgen -from SEED -to DIR (-gb G | -ids N) [-vary N]")
	}
	if err := gen(*from, *to, int64(*gb*(1<<30)), *ids, *vary); err != nil {
		log.Fatal(err)
	}
}

// output is one JSONL output of the seed and its copy.
type output struct {
	lines [][]byte
	ids   []string
	log   *commitlog.Log
}

func gen(from, to string, maxBytes, maxIDs int64, vary int) error {
	run, err := rundir.ReadRun(from)
	if err != nil || run == nil {
		return fmt.Errorf("%s: not a run directory (%v)", from, err)
	}
	if err := os.Mkdir(to, 0o755); err != nil {
		return err
	}
	to, _ = filepath.Abs(to)
	var outs []*output
	for i, o := range run.Outputs {
		if !strings.HasSuffix(o.Path, ".jsonl") {
			continue
		}
		out, err := openOutput(from, to, o.Path)
		if err != nil {
			return err
		}
		defer out.log.Close()
		outs = append(outs, out)
		dst := out.log.Path()
		for _, s := range run.Settings {
			if m, ok := s.(map[string]any); ok && m["path"] == o.Path {
				m["path"] = dst
			}
		}
		run.Outputs[i].Path = dst
	}
	if len(outs) == 0 {
		return fmt.Errorf("%s has no JSONL output", from)
	}
	written, nids, err := repeat(outs, maxBytes, maxIDs, vary)
	if err != nil {
		return err
	}
	if err := run.Write(to); err != nil {
		return err
	}
	fmt.Printf("%s: %d ids, the first output %.2f GiB\n", to, nids, float64(written)/(1<<30))
	return nil
}

// openOutput reads the seed's output at path and opens its copy in to.
func openOutput(from, to, path string) (*output, error) {
	src := path
	if _, err := os.Stat(src); err != nil {
		src = filepath.Join(from, filepath.Base(src)) // a seed moved from where it ran
	}
	lines, err := committedLines(src)
	if err != nil {
		return nil, err
	}
	// Each line starts with its id (as pipe writes records), which a
	// copy's prefix goes in front of.
	ids := make([]string, len(lines))
	for j, line := range lines {
		id, err := recordline.ID(line)
		if err != nil || !bytes.HasPrefix(line, []byte(`{"id":"`+id+`"`)) {
			return nil, fmt.Errorf("%s:%d does not start with a plain id", src, j+1)
		}
		ids[j] = id
	}
	l, err := commitlog.Open(filepath.Join(to, filepath.Base(path)), recordline.ID)
	if err != nil {
		return nil, err
	}
	return &output{lines, ids, l}, nil
}

// repeat writes copies of every output until the first holds maxBytes or
// all maxIDs ids, committing each copy.
func repeat(outs []*output, maxBytes, maxIDs int64, vary int) (written, nids int64, err error) {
	var buf bytes.Buffer
	for k := 0; (maxBytes <= 0 || written < maxBytes) && (maxIDs <= 0 || nids < maxIDs); k++ {
		prefix := fmt.Sprintf(`{"id":"k%d-`, k)
		for oi, o := range outs {
			for j, line := range o.lines {
				if maxIDs > 0 && nids >= maxIDs {
					break
				}
				b := copyLine(&buf, prefix, line, oi == 0 && vary > 0 && j%vary == 0)
				if err := o.log.Append(fmt.Sprintf("k%d-%s", k, o.ids[j]), b); err != nil {
					return written, nids, err
				}
				if oi == 0 {
					written += int64(len(b)) + 1
				}
				nids++
			}
			if err := o.log.Commit(); err != nil {
				return written, nids, err
			}
		}
	}
	return written, nids, nil
}

// copyLine is line with prefix in place of `{"id":"`, and with a
// rejection it did not have if reject.
func copyLine(buf *bytes.Buffer, prefix string, line []byte, reject bool) []byte {
	buf.Reset()
	buf.WriteString(prefix)
	buf.Write(line[len(`{"id":"`):])
	b := buf.Bytes()
	if reject && !bytes.Contains(b, []byte(`"reject":`)) {
		b = append(b[:len(b)-1], `,"reject":{"stage":"check","reason":"bench_varied"}}`...)
	}
	return b
}

// committedLines are the committed lines of the commit log at path.
func committedLines(path string) ([][]byte, error) {
	_, size, err := commitlog.Committed(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(io.LimitReader(f, size))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	return lines, sc.Err()
}
