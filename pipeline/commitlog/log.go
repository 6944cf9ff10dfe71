package commitlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Index file layout: an 8-byte magic, then one 16-byte entry per committed
// line: the id hash and the offset just past the line's newline, both
// little-endian.
const (
	indexMagic = "PIPEIDX1"
	entrySize  = 16
)

// ErrNotALog is returned by Open when the data file exists and is not empty
// but has no index: it was not written by a commit log (an older output, or a
// file of the user's). The caller decides what to do with it; Open changes
// nothing.
var ErrNotALog = errors.New("exists without a commit index (not written by this protocol)")

// IndexPath is where the index of the data file at path lives: beside it,
// hidden (out/train.jsonl → out/.train.jsonl.idx).
func IndexPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".idx")
}

// Log is an append-only line log with a commit index. Its methods are safe
// for concurrent use.
type Log struct {
	path string

	mu        sync.Mutex
	data, idx *os.File
	w         *bufio.Writer
	size      int64          // bytes appended, pending included
	committed int64          // bytes committed
	ends      []int64        // end offset of each committed line, in order
	byHash    map[uint64]int // hash → line number, committed and pending
	pending   []entry
	broken    error // a failed write or commit: the log takes no more
	truncated int64 // bytes cut from the data file at Open
}

type entry struct {
	hash uint64
	end  int64
}

// Open opens (creating if needed) the log whose data file is path, cutting
// anything past the last commit. The directory must exist.
func Open(path string) (*Log, error) {
	data, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, data: data, byHash: map[uint64]int{}}
	if err := l.load(); err != nil {
		data.Close()
		if l.idx != nil {
			l.idx.Close()
		}
		return nil, err
	}
	l.w = bufio.NewWriterSize(data, 1<<20)
	return l, nil
}

func (l *Log) load() error {
	st, err := l.data.Stat()
	if err != nil {
		return err
	}
	ipath := IndexPath(l.path)
	if _, err := os.Stat(ipath); errors.Is(err, os.ErrNotExist) && st.Size() > 0 {
		return fmt.Errorf("%s %w", l.path, ErrNotALog)
	}
	if l.idx, err = os.OpenFile(ipath, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return err
	}
	raw, err := io.ReadAll(l.idx)
	if err != nil {
		return err
	}
	if len(raw) < len(indexMagic) {
		// New (or torn before its header was written): start it.
		if err := l.idx.Truncate(0); err != nil {
			return err
		}
		if _, err := l.idx.WriteAt([]byte(indexMagic), 0); err != nil {
			return err
		}
		if err := l.idx.Sync(); err != nil {
			return err
		}
		raw = []byte(indexMagic)
	}
	if string(raw[:len(indexMagic)]) != indexMagic {
		return fmt.Errorf("%s: not a commit index (bad header)", ipath)
	}
	body := raw[len(indexMagic):]
	whole := len(body) / entrySize * entrySize
	if whole != len(body) { // a torn entry: it was never committed
		if err := l.idx.Truncate(int64(len(indexMagic) + whole)); err != nil {
			return err
		}
	}
	var prev int64
	l.ends = make([]int64, 0, whole/entrySize)
	for i := 0; i < whole; i += entrySize {
		h := binary.LittleEndian.Uint64(body[i:])
		end := int64(binary.LittleEndian.Uint64(body[i+8:]))
		if end <= prev {
			return fmt.Errorf("%s: entry %d ends at %d, before the previous one (%d): the index is damaged", ipath, i/entrySize, end, prev)
		}
		prev = end
		l.byHash[h] = len(l.ends)
		l.ends = append(l.ends, end)
	}
	if prev > st.Size() {
		return fmt.Errorf("%s: the index says %d bytes were committed but %s has %d: the data file was cut by something else", ipath, prev, l.path, st.Size())
	}
	if st.Size() > prev {
		l.truncated = st.Size() - prev
		if err := l.data.Truncate(prev); err != nil {
			return err
		}
		if err := l.data.Sync(); err != nil {
			return err
		}
	}
	if _, err := l.data.Seek(prev, io.SeekStart); err != nil {
		return err
	}
	if _, err := l.idx.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	l.size, l.committed = prev, prev
	return nil
}

// Path is the data file.
func (l *Log) Path() string { return l.path }

// Truncated is how many bytes past the last commit Open cut (a torn or
// uncommitted tail left by a crash).
func (l *Log) Truncated() int64 { return l.truncated }

// Append buffers one line (without its newline) for the record id. It is
// pending until the next Commit.
func (l *Log) Append(id string, line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	if _, err := l.w.Write(line); err != nil {
		return l.fail(err)
	}
	if err := l.w.WriteByte('\n'); err != nil {
		return l.fail(err)
	}
	l.size += int64(len(line)) + 1
	h := Hash(id)
	l.byHash[h] = len(l.ends) + len(l.pending)
	l.pending = append(l.pending, entry{h, l.size})
	return nil
}

func (l *Log) fail(err error) error {
	l.broken = fmt.Errorf("%s: %w (what was committed before is kept)", l.path, err)
	return l.broken
}

// Has reports whether a line for id was committed or is pending.
func (l *Log) Has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.byHash[Hash(id)]
	return ok
}

// Lookup returns the committed line of id (the last one, if several).
func (l *Log) Lookup(id string) ([]byte, bool, error) {
	l.mu.Lock()
	n, ok := l.byHash[Hash(id)]
	if !ok || n >= len(l.ends) {
		l.mu.Unlock()
		return nil, false, nil
	}
	start := int64(0)
	if n > 0 {
		start = l.ends[n-1]
	}
	end := l.ends[n]
	l.mu.Unlock()
	buf := make([]byte, end-start)
	if _, err := l.data.ReadAt(buf, start); err != nil {
		return nil, false, fmt.Errorf("%s: reading committed line %d: %w", l.path, n+1, err)
	}
	return buf[:len(buf)-1], true, nil
}

// Commit makes every pending line durable. After an error nothing more is
// accepted; the committed part stays as it was.
func (l *Log) Commit() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	if len(l.pending) == 0 {
		return nil
	}
	if err := l.w.Flush(); err != nil {
		return l.fail(err)
	}
	if err := l.data.Sync(); err != nil {
		return l.fail(err)
	}
	buf := make([]byte, len(l.pending)*entrySize)
	for i, e := range l.pending {
		binary.LittleEndian.PutUint64(buf[i*entrySize:], e.hash)
		binary.LittleEndian.PutUint64(buf[i*entrySize+8:], uint64(e.end))
	}
	if _, err := l.idx.Write(buf); err != nil {
		// A partial entry is cut at the next Open; cut it now too so the
		// index stays whole for anyone reading it.
		l.idx.Truncate(int64(len(indexMagic) + len(l.ends)*entrySize))
		return l.fail(err)
	}
	if err := l.idx.Sync(); err != nil {
		return l.fail(err)
	}
	for _, e := range l.pending {
		l.ends = append(l.ends, e.end)
	}
	l.pending = l.pending[:0]
	l.committed = l.size
	return nil
}

// Stats is what a log holds.
type Stats struct {
	Rows, Bytes               int64 // committed
	PendingRows, PendingBytes int64
}

// Stats returns the committed and pending counts.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Rows: int64(len(l.ends)), Bytes: l.committed,
		PendingRows: int64(len(l.pending)), PendingBytes: l.size - l.committed}
}

// Close closes the files without committing: pending lines are cut at the
// next Open.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.data.Close(), l.idx.Close())
}

// ReadIDs returns the hashes of every committed line of the log at path, in
// order, without opening it for writing (e.g. to skip what another run
// already has). A missing log has none.
func ReadIDs(path string) ([]uint64, error) {
	raw, err := os.ReadFile(IndexPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(raw) < len(indexMagic) || string(raw[:len(indexMagic)]) != indexMagic {
		return nil, fmt.Errorf("%s: not a commit index", IndexPath(path))
	}
	body := raw[len(indexMagic):]
	out := make([]uint64, 0, len(body)/entrySize)
	for i := 0; i+entrySize <= len(body); i += entrySize {
		out = append(out, binary.LittleEndian.Uint64(body[i:]))
	}
	return out, nil
}

// FlushForTest writes buffered lines to the data file without committing
// them, as a process killed right after a write leaves the file. Tests only.
func (l *Log) FlushForTest() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}
