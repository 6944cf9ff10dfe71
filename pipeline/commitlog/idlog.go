package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

const idsMagic = "PIPEIDS1"

// IDLog is an append-only file of id hashes (8 bytes each after a header):
// the set of ids a run directory has finished. A torn last hash is cut on
// open.
type IDLog struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	pending []uint64
	n       int
	broken  error
	// sums, for a checked log (OpenCheckedIDLog), holds its checksums;
	// tail are the ids of its last block, not yet full.
	sums *os.File
	tail []uint64
}

// OpenIDLog opens (creating if needed) the id log at path and returns it with
// the hashes it holds.
func OpenIDLog(path string) (*IDLog, []uint64, error) {
	f, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if len(raw) < len(idsMagic) {
		if err := writeHeader(f, idsMagic); err != nil {
			f.Close()
			return nil, nil, err
		}
		raw = []byte(idsMagic)
	}
	if string(raw[:len(idsMagic)]) != idsMagic {
		f.Close()
		return nil, nil, &DamagedError{Path: path, Err: errors.New("not an id log (bad header)")}
	}
	body := raw[len(idsMagic):]
	whole := len(body) / 8 * 8
	if whole != len(body) {
		if err := f.Truncate(int64(len(idsMagic) + whole)); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	hashes := make([]uint64, whole/8)
	for i := range hashes {
		hashes[i] = binary.LittleEndian.Uint64(body[i*8:])
	}
	if _, err := f.Seek(int64(len(idsMagic)+whole), io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return &IDLog{f: f, path: path, n: len(hashes)}, hashes, nil
}

func writeHeader(f *os.File, magic string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(magic), 0); err != nil {
		return err
	}
	return f.Sync()
}

// Add buffers h until the next Commit; it returns how many are pending.
func (l *IDLog) Add(h uint64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, h)
	return len(l.pending)
}

// Commit appends and fsyncs the pending hashes.
func (l *IDLog) Commit() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	if len(l.pending) == 0 {
		return nil
	}
	buf := make([]byte, 8*len(l.pending))
	for i, h := range l.pending {
		binary.LittleEndian.PutUint64(buf[i*8:], h)
	}
	if _, err := l.f.Write(buf); err != nil {
		l.f.Truncate(int64(len(idsMagic) + 8*l.n))
		l.broken = fmt.Errorf("%s: %w", l.path, err)
		return l.broken
	}
	if err := l.f.Sync(); err != nil {
		l.broken = fmt.Errorf("%s: %w", l.path, err)
		return l.broken
	}
	if l.sums != nil {
		ids := append(l.tail, l.pending...)
		if err := updateSums(l.sums, l.n/sumBlock, ids); err != nil {
			l.broken = fmt.Errorf("%s: %w", sumsPath(l.path), err)
			return l.broken
		}
		l.tail = append(l.tail[:0], ids[len(ids)/sumBlock*sumBlock:]...)
	}
	l.n += len(l.pending)
	l.pending = l.pending[:0]
	return nil
}

// Len is the number of committed hashes.
func (l *IDLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Path is the log's file.
func (l *IDLog) Path() string { return l.path }

// Close closes the file; pending hashes are dropped.
func (l *IDLog) Close() error {
	if l.sums != nil {
		l.sums.Close()
	}
	return l.f.Close()
}

// CountIDs is the number of whole ids in the id log at path (done.ids),
// read from its size after checking its header; a missing or empty log has
// none.
func CountIDs(path string) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	head := make([]byte, len(idsMagic))
	if _, err := io.ReadFull(f, head); err != nil || string(head) != idsMagic {
		return 0, fmt.Errorf("%s: not an id log (bad header)", path)
	}
	return (st.Size() - int64(len(idsMagic))) / 8, nil
}

// Truncate cuts the log to its first n ids and drops the pending ones;
// appends go on after them. Its checksums, if it has them, are removed (a
// log without them is taken as it is). Like the cut of a torn hash at
// open, it is not fsynced.
func (l *IDLog) Truncate(n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := removeSums(l.path); err != nil {
		return err
	}
	if l.sums != nil {
		l.sums.Close()
		l.sums, l.tail = nil, nil
	}
	end := int64(len(idsMagic) + 8*n)
	if err := l.f.Truncate(end); err != nil {
		return err
	}
	if _, err := l.f.Seek(end, io.SeekStart); err != nil {
		return err
	}
	l.n, l.pending = n, l.pending[:0]
	return nil
}
