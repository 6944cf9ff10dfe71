package commitlog

import (
	"fmt"
	"io"
	"os"

	"github.com/pipe-dev/pipe/pipeline/rundir/layout"
)

// StageJournalFiles lists the data files of the journal a stage kept in
// a run directory, oldest first (see JournalFiles), for a reader that
// replays what the stage sent on. None is (nil, nil).
//
// Readers go through it (and EachCommitted) rather than globbing the run
// directory themselves.
func StageJournalFiles(runDir, stage string) ([]string, error) {
	if _, err := os.Stat(runDir); err != nil {
		return nil, err
	}
	return JournalFiles(layout.JournalDir(runDir), stage), nil
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
	n := 0
	return eachLine(io.LimitReader(f, size), func(_ int64, line []byte, whole bool) error {
		n++
		if !whole {
			return fmt.Errorf("%s: committed data ends inside line %d (the index says %d bytes)", path, n, size)
		}
		return fn(n, line)
	})
}
