package commitlog

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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

// FileSHA256 is the hex SHA-256 of the file at path and its size, read
// through buf (nil: a buffer of its own).
func FileSHA256(path string, buf []byte) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	if buf == nil {
		buf = make([]byte, 1<<20)
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return "", n, fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// RewriteIDLog replaces the id log at path with the hashes it holds that
// drop does not take, in their order, atomically. It returns how many were
// dropped. The log must not be open for writing.
func RewriteIDLog(path string, drop func(uint64) bool) (int, error) {
	l, hashes, err := OpenIDLog(path)
	if err != nil {
		return 0, err
	}
	l.Close()
	kept := slices.DeleteFunc(hashes, drop)
	dropped := len(hashes) - len(kept)
	if dropped == 0 {
		return 0, nil
	}
	return dropped, WriteIDLog(path, kept)
}

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
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && rows > 0:
		res.Problems = append(res.Problems, fmt.Sprintf("%s is missing (%d committed lines)", path, rows))
		return res, nil
	case errors.Is(err, os.ErrNotExist):
		return res, nil
	case err != nil:
		return nil, err
	case st.Size() < bytes:
		res.Problems = append(res.Problems, fmt.Sprintf("%s has %d bytes, %d committed: cut short", path, st.Size(), bytes))
		return res, nil
	}
	if !hash || rows == 0 {
		return res, nil
	}
	idx, err := os.ReadFile(IndexPath(path))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
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
			res.Problems = append(res.Problems, fmt.Sprintf("%s: committed line %d does not end at byte %d as its index says", path, i+1, end))
			return res, nil
		}
		if n := int(end - start); cap(line) < n {
			line = make([]byte, n)
		} else {
			line = line[:n]
		}
		if _, err := io.ReadFull(r, line); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		if line[len(line)-1] != '\n' {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: committed line %d does not end at byte %d as its index says", path, i+1, end))
			return res, nil
		}
		id, err := idOf(line[:len(line)-1])
		if err != nil || Hash(id) != h {
			res.Problems = append(res.Problems, fmt.Sprintf("%s: committed line %d (bytes %d-%d) is not the record its index names", path, i+1, start, end))
			return res, nil
		}
		start = end
	}
	return res, nil
}
