package commitlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// JournalFiles lists the data files of the journal a stage kept in a run
// directory, oldest first, for a reader that replays what the stage sent
// on: the single file RUN_DIR/journal/STAGE.jsonl, then any segments
// RUN_DIR/journal/STAGE/NNNNN.jsonl (a segmented journal reads its older
// single file as its oldest segment). None is (nil, nil).
//
// It is the one place that knows where journals lie: readers go through it
// (and EachCommitted) rather than globbing the run directory themselves.
func JournalFiles(runDir, stage string) ([]string, error) {
	var files []string
	single := filepath.Join(runDir, "journal", stage+".jsonl")
	if st, err := os.Stat(single); err == nil && !st.IsDir() {
		files = append(files, single)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(runDir, "journal", stage))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var segs []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".jsonl") && !strings.HasPrefix(n, ".") {
			segs = append(segs, n)
		}
	}
	// Zero-padded names of one width sort as text; wider ones come after.
	sort.Slice(segs, func(i, j int) bool {
		if len(segs[i]) != len(segs[j]) {
			return len(segs[i]) < len(segs[j])
		}
		return segs[i] < segs[j]
	})
	for _, n := range segs {
		files = append(files, filepath.Join(runDir, "journal", stage, n))
	}
	return files, nil
}

// EachCommitted calls fn with each committed line of the log at path (without
// its newline), in order, reading the file only: lines past the last commit
// (pending, or a torn tail a killed process left) are not the log's yet and
// are not read, and nothing is cut or repaired. n is the line's number, from
// 1. An error from fn stops the reading and is returned as is.
func EachCommitted(path string, fn func(n int, line []byte) error) error {
	rows, size, err := Committed(path)
	if err != nil || rows == 0 {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(io.LimitReader(f, size), 1<<20)
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			if len(line) > 0 {
				return fmt.Errorf("%s: committed data ends inside line %d (the index says %d bytes)", path, n, size)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(n, line[:len(line)-1]); err != nil {
			return err
		}
	}
}
