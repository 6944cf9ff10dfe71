package commitlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// DamagedError is a file of pipe's own bookkeeping (a manifest, an id log)
// that cannot be read as what it should be. Running again does not mend it:
// it is a permanent refusal (pipe exits 2), unlike a full disk or a server
// that is away.
type DamagedError struct {
	Path string
	Err  error
}

func (e *DamagedError) Error() string { return fmt.Sprintf("%s is damaged: %v", e.Path, e.Err) }
func (e *DamagedError) Unwrap() error { return e.Err }

// WriteIDLog writes an id log at path holding hashes, atomically.
func WriteIDLog(path string, hashes []uint64) error {
	if err := removeSums(path); err != nil {
		return err
	}
	buf := make([]byte, len(idsMagic)+8*len(hashes))
	copy(buf, idsMagic)
	for i, h := range hashes {
		binary.LittleEndian.PutUint64(buf[len(idsMagic)+8*i:], h)
	}
	return WriteFileAtomic(path, buf)
}

// LogCheck is what CheckLog found of a commit log.
type LogCheck struct {
	Rows     int
	Bytes    int64 // committed bytes
	Problems []string
}

// CheckLog checks the committed lines of the log at path against its index
// (read-only): the file must hold at least the committed bytes; with hash,
// each committed line must end where its index entry says, and yield the
// id whose hash the entry holds (idOf). A log without an index has no
// committed lines.
func CheckLog(path string, hash bool, idOf IDFunc) (*LogCheck, error) {
	rows, bytes, err := Committed(path)
	if err != nil {
		return nil, &DamagedError{Path: IndexPath(path), Err: err}
	}
	res := &LogCheck{Rows: rows, Bytes: bytes}
	whole, err := res.checkSize(path)
	if err != nil {
		return nil, err
	}
	if !whole || !hash || rows == 0 {
		return res, nil
	}
	problem, err := checkLines(path, rows, bytes, idOf)
	if err != nil {
		return nil, err
	}
	if problem != "" {
		res.Problems = append(res.Problems, problem)
	}
	return res, nil
}

// checkSize checks that the log's data file at path holds at least the
// committed bytes, adding a problem when it does not (whole false).
func (res *LogCheck) checkSize(path string) (whole bool, err error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && res.Rows > 0:
		res.Problems = append(res.Problems, fmt.Sprintf("%s is missing (%d committed lines)", path, res.Rows))
		return false, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case st.Size() < res.Bytes:
		res.Problems = append(res.Problems, fmt.Sprintf("%s has %d bytes, %d committed: cut short", path, st.Size(), res.Bytes))
		return false, nil
	}
	return true, nil
}

// checkLines reads the rows committed lines (bytes in all) of the log at
// path against its index entries and returns the first problem ("" for
// none): a line not ending where its entry says, or not the record whose
// id hash the entry holds.
func checkLines(path string, rows int, bytes int64, idOf IDFunc) (problem string, err error) {
	idx, err := os.ReadFile(IndexPath(path))
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// One committed line at a time: the file can be far larger than memory.
	r := bufio.NewReaderSize(f, 1<<20)
	var line []byte
	start := int64(0)
	for i := range rows {
		e := idx[len(indexMagic)+i*entrySize:]
		h, end := binary.LittleEndian.Uint64(e), int64(binary.LittleEndian.Uint64(e[8:]))
		if end <= start || end > bytes {
			return misplaced(path, i, end), nil
		}
		if n := int(end - start); cap(line) < n {
			line = make([]byte, n)
		} else {
			line = line[:n]
		}
		if _, err := io.ReadFull(r, line); err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
		if line[len(line)-1] != '\n' {
			return misplaced(path, i, end), nil
		}
		id, err := idOf(line[:len(line)-1])
		if err != nil || Hash(id) != h {
			return fmt.Sprintf("%s: committed line %d (bytes %d-%d) is not the record its index names", path, i+1, start, end), nil
		}
		start = end
	}
	return "", nil
}

// misplaced says that committed line i (from 0) of the log at path does
// not end at end, where its index entry says.
func misplaced(path string, i int, end int64) string {
	return fmt.Sprintf("%s: committed line %d does not end at byte %d as its index says", path, i+1, end)
}
