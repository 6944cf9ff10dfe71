package commitlog

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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
//
// Memory: the ids of the lines the log held when it was opened are kept for
// Has (8 bytes a line; 24 with Lookup, see OpenRepaired); lines appended since
// are held only until they are committed, so a long run's memory does not
// grow with its output.
type Log struct {
	path string
	idOf IDFunc

	// commitMu makes commits one at a time; mu guards the fields below and
	// is not held while a commit waits on fsync, so appends go on.
	commitMu  sync.Mutex
	mu        sync.Mutex
	data, idx *os.File
	size      int64 // bytes appended, pending included
	rows      int   // lines committed
	bytes     int64 // bytes committed
	// Lines held at open: their id hashes, and with lookup their ends in
	// order and (hash, line) sorted by hash.
	lookup   bool
	ids      *Set
	openEnds []int64
	byHash   []hashLine
	// Lines appended and not yet committed.
	pendHashes []uint64
	pendEnds   []int64
	broken     error // a failed write or commit: the log takes no more
	// line is Append's line and newline, reused: a copy per line was a
	// tenth of a rehearsal's allocations.
	line      []byte
	truncated int64 // bytes cut from the data file at Open
	recovered int   // whole lines past the last commit adopted at Open
}

type hashLine struct {
	hash uint64
	line int
}

// IDFunc returns the record id of one line (without its newline); an error
// means the line is not a whole record.
type IDFunc func(line []byte) (string, error)

// Open opens (creating if needed) the log whose data file is path. Whole
// lines written after the last commit (a process killed between a write and
// its commit leaves them) are adopted when idOf accepts them and committed;
// a torn or unreadable tail is cut. The directory must exist.
func Open(path string, idOf IDFunc) (*Log, error) { return open(path, idOf, false) }

// openLookup is Open for a log whose lines are read back by id (Lookup),
// such as the generation journal.
func openLookup(path string, idOf IDFunc) (*Log, error) { return open(path, idOf, true) }

func open(path string, idOf IDFunc, lookup bool) (*Log, error) {
	data, err := OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, idOf: idOf, data: data, lookup: lookup}
	if err := l.load(); err != nil {
		data.Close()
		if l.idx != nil {
			l.idx.Close()
		}
		return nil, err
	}
	return l, nil
}

// load reads the index, checks it against the data file, adopts or cuts
// what is past the last commit, and holds the ids of the lines opened.
func (l *Log) load() error {
	st, err := l.data.Stat()
	if err != nil {
		return err
	}
	ipath := IndexPath(l.path)
	if _, err := os.Stat(ipath); errors.Is(err, os.ErrNotExist) && st.Size() > 0 {
		return fmt.Errorf("%s %w", l.path, ErrNotALog)
	}
	if l.idx, err = OpenFile(ipath, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return err
	}
	entries, err := l.readIndex(ipath)
	if err != nil {
		return err
	}
	prev, err := l.takeEntries(ipath, entries)
	if err != nil {
		return err
	}
	l.rows, l.bytes = len(l.openEnds), prev
	if prev > st.Size() {
		return &DamagedError{Path: l.path, Err: fmt.Errorf("its index %s says %d bytes were committed but it has %d: it was cut by something else", ipath, prev, st.Size())}
	}
	if _, err := l.idx.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	l.size = prev
	if st.Size() > prev {
		if err := l.recover(prev, st.Size()); err != nil {
			return err
		}
	}
	l.holdOpened()
	_, err = l.data.Seek(l.size, io.SeekStart)
	return err
}

// readIndex reads the index file (at ipath), writing the header of a new
// one and cutting a torn last entry, and returns its whole entries.
func (l *Log) readIndex(ipath string) ([]byte, error) {
	raw, err := io.ReadAll(l.idx)
	if err != nil {
		return nil, err
	}
	if len(raw) < len(indexMagic) {
		// New (or torn before its header was written): start it.
		if err := l.idx.Truncate(0); err != nil {
			return nil, err
		}
		if _, err := l.idx.WriteAt([]byte(indexMagic), 0); err != nil {
			return nil, err
		}
		if err := l.idx.Sync(); err != nil {
			return nil, err
		}
		raw = []byte(indexMagic)
	}
	if string(raw[:len(indexMagic)]) != indexMagic {
		return nil, &DamagedError{Path: ipath, Err: errors.New("not a commit index (bad header)")}
	}
	body := raw[len(indexMagic):]
	whole := len(body) / entrySize * entrySize
	if whole != len(body) { // a torn entry: it was never committed
		if err := l.idx.Truncate(int64(len(indexMagic) + whole)); err != nil {
			return nil, err
		}
	}
	return body[:whole], nil
}

// takeEntries holds the index entries as the lines opened (their ends,
// and their hashes with their order) and returns the end of the last; an
// entry that does not end after the one before is damage.
func (l *Log) takeEntries(ipath string, entries []byte) (end int64, err error) {
	var prev int64
	l.openEnds = make([]int64, 0, len(entries)/entrySize)
	l.byHash = make([]hashLine, 0, len(entries)/entrySize)
	for i := 0; i < len(entries); i += entrySize {
		h := binary.LittleEndian.Uint64(entries[i:])
		end := int64(binary.LittleEndian.Uint64(entries[i+8:]))
		if end <= prev {
			return 0, &DamagedError{Path: ipath, Err: fmt.Errorf("entry %d ends at %d, before the previous one (%d)", i/entrySize, end, prev)}
		}
		prev = end
		l.byHash = append(l.byHash, hashLine{h, len(l.openEnds)})
		l.openEnds = append(l.openEnds, end)
	}
	return prev, nil
}

// holdOpened keeps what Has (and with lookup, Lookup) needs of the lines
// opened: with lookup, (hash, line) sorted by hash; without, only the
// hashes, as a Set.
func (l *Log) holdOpened() {
	if l.lookup {
		// Of several lines with one id, find takes the last one.
		slices.SortFunc(l.byHash, func(a, b hashLine) int {
			return cmp.Or(cmp.Compare(a.hash, b.hash), cmp.Compare(a.line, b.line))
		})
		return
	}
	hashes := make([]uint64, len(l.byHash))
	for i, e := range l.byHash {
		hashes[i] = e.hash
	}
	l.ids = NewSet(hashes)
	l.byHash, l.openEnds = nil, nil
}

// recover adopts the whole, readable lines in [from, size) and cuts the rest.
func (l *Log) recover(from, size int64) error {
	tail := make([]byte, size-from)
	if _, err := l.data.ReadAt(tail, from); err != nil {
		return err
	}
	end := from
	for len(tail) > 0 && l.idOf != nil {
		nl := bytes.IndexByte(tail, '\n')
		if nl < 0 {
			break
		}
		id, err := l.idOf(tail[:nl])
		if err != nil || id == "" {
			break
		}
		end += int64(nl) + 1
		l.pendHashes = append(l.pendHashes, Hash(id))
		l.pendEnds = append(l.pendEnds, end)
		l.recovered++
		tail = tail[nl+1:]
	}
	l.size = end
	if end < size {
		l.truncated = size - end
		if err := l.data.Truncate(end); err != nil {
			return err
		}
	}
	if l.recovered > 0 {
		for i, h := range l.pendHashes {
			l.byHash = append(l.byHash, hashLine{h, len(l.openEnds) + i})
		}
		l.openEnds = append(l.openEnds, l.pendEnds...)
		return l.commitLocked()
	}
	return l.data.Sync()
}

// OpenRepaired is Open (with lookup, for a log read back by id: Lookup)
// for a log a restart builds on. When its index or committed lines are
// damaged, it is first rewritten from its readable lines (the damaged file
// kept aside) and what was done is returned with it; with check, its lines are
// read whole first even when its index looks right (after a crash, or when
// asked). A data file without an index is ErrNotALog, as Open says.
func OpenRepaired(path string, idOf IDFunc, lookup, check bool) (*Log, *Repaired, error) {
	var rep *Repaired
	if _, err := os.Stat(IndexPath(path)); err == nil && check {
		if rep, err = repairLog(path, idOf, nil); err != nil {
			return nil, nil, err
		}
	}
	l, err := open(path, idOf, lookup)
	var de *DamagedError
	if rep == nil && errors.As(err, &de) {
		if rep, err = repairLog(path, idOf, nil); err == nil {
			l, err = open(path, idOf, lookup)
		}
	}
	return l, rep, err
}

// Path is the data file.
func (l *Log) Path() string { return l.path }

// Truncated is how many bytes of a torn or unreadable tail Open cut.
func (l *Log) Truncated() int64 { return l.truncated }

// Recovered is how many whole lines written after the last commit Open
// adopted.
func (l *Log) Recovered() int { return l.recovered }

// appendKeep is the largest buffer Append keeps for the next line.
const appendKeep = 1 << 20

// Append writes one line (without its newline) for the record id, in one
// write, so a process killed right after leaves it whole in the file. It is
// pending until the next Commit.
func (l *Log) Append(id string, line []byte) error { return l.appendHashed(Hash(id), line) }

// appendHashed is Append for a line whose id's hash is known.
func (l *Log) appendHashed(h uint64, line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	buf := append(append(l.line[:0], line...), '\n')
	if cap(buf) <= appendKeep {
		l.line = buf
	}
	if _, err := l.data.Write(buf); err != nil {
		// Cut a partial line at once (a full disk has room for that), so
		// the file stays whole for anyone reading it; Open would cut it too.
		if terr := l.data.Truncate(l.size); terr == nil {
			l.data.Seek(l.size, io.SeekStart)
		}
		return l.fail(err)
	}
	l.size += int64(len(buf))
	l.pendHashes = append(l.pendHashes, h)
	l.pendEnds = append(l.pendEnds, l.size)
	return nil
}

func (l *Log) fail(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) { // it names the file already
		l.broken = fmt.Errorf("%w (what was committed before is kept)", err)
	} else {
		l.broken = fmt.Errorf("%s: %w (what was committed before is kept)", l.path, err)
	}
	return l.broken
}

// Has reports whether the log held a line for id when it was opened.
func (l *Log) Has(id string) bool { return l.HasHash(Hash(id)) }

// HasHash is Has for an id's hash.
func (l *Log) HasHash(h uint64) bool {
	if l.lookup {
		_, ok := l.find(h)
		return ok
	}
	return l.ids.Has(h)
}

// holdsLines reports whether a lookup log held lines when it was opened
// (recovered ones included); what find reads is fixed from then on.
func (l *Log) holdsLines() bool { return len(l.byHash) > 0 }

// find returns the line number of h among the lines held at open (the last
// such line); the slices it reads never change after Open.
func (l *Log) find(h uint64) (int, bool) {
	i, ok := slices.BinarySearchFunc(l.byHash, h, func(e hashLine, h uint64) int { return cmp.Compare(e.hash, h) })
	if !ok {
		return 0, false
	}
	for i+1 < len(l.byHash) && l.byHash[i+1].hash == h {
		i++
	}
	return l.byHash[i].line, true
}

// Lookup returns the line of id among those the log held when it was opened
// (the last one, if several); only for a log opened with lookup.
func (l *Log) Lookup(id string) ([]byte, bool, error) {
	if !l.lookup {
		return nil, false, errors.New("commitlog: Lookup on a log not opened with OpenLookup")
	}
	n, ok := l.find(Hash(id))
	if !ok {
		return nil, false, nil
	}
	start := int64(0)
	if n > 0 {
		start = l.openEnds[n-1]
	}
	end := l.openEnds[n]
	buf := make([]byte, end-start)
	if _, err := l.data.ReadAt(buf, start); err != nil {
		return nil, false, fmt.Errorf("%s: reading line %d: %w", l.path, n+1, err)
	}
	return buf[:len(buf)-1], true, nil
}

// Commit makes every pending line durable. After an error nothing more is
// accepted; the committed part stays as it was.
//
// Appends may go on while it waits for the disk: it commits what was
// appended when it started.
func (l *Log) Commit() error {
	l.commitMu.Lock()
	defer l.commitMu.Unlock()
	l.mu.Lock()
	if l.broken != nil {
		l.mu.Unlock()
		return l.broken
	}
	n := len(l.pendEnds)
	if n == 0 {
		l.mu.Unlock()
		return nil
	}
	buf := l.indexEntries(n)
	end := l.pendEnds[n-1]
	l.mu.Unlock()

	err := l.data.Sync()
	if err == nil {
		if _, err = l.idx.Write(buf); err != nil {
			// A partial entry is cut at the next Open; cut it now too so
			// the index stays whole for anyone reading it.
			l.idx.Truncate(int64(len(indexMagic) + l.rows*entrySize))
		}
	}
	if err == nil {
		err = l.idx.Sync()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.fail(err)
	}
	l.rows += n
	l.bytes = end
	l.pendHashes = append(l.pendHashes[:0], l.pendHashes[n:]...)
	l.pendEnds = append(l.pendEnds[:0], l.pendEnds[n:]...)
	return nil
}

// seal lets go of the buffers appends reuse, for a log that takes no more
// lines (a sealed journal segment): a run that keeps its journal holds
// hundreds of sealed segments, and each held its pending lists' largest
// capacity (10 MB of them in a 913K-prompt rehearsal).
func (l *Log) seal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pendEnds) == 0 {
		l.pendHashes, l.pendEnds = nil, nil
	}
	l.line = nil
}

// indexEntries encodes the first n pending lines' index entries.
func (l *Log) indexEntries(n int) []byte {
	buf := make([]byte, n*entrySize)
	for i := range n {
		binary.LittleEndian.PutUint64(buf[i*entrySize:], l.pendHashes[i])
		binary.LittleEndian.PutUint64(buf[i*entrySize+8:], uint64(l.pendEnds[i]))
	}
	return buf
}

func (l *Log) commitLocked() error {
	pending := len(l.pendEnds)
	if pending == 0 {
		return nil
	}
	if err := l.data.Sync(); err != nil {
		return l.fail(err)
	}
	buf := l.indexEntries(pending)
	if _, err := l.idx.Write(buf); err != nil {
		// A partial entry is cut at the next Open; cut it now too so the
		// index stays whole for anyone reading it.
		l.idx.Truncate(int64(len(indexMagic) + l.rows*entrySize))
		return l.fail(err)
	}
	if err := l.idx.Sync(); err != nil {
		return l.fail(err)
	}
	l.rows += pending
	l.bytes = l.pendEnds[pending-1]
	l.pendHashes, l.pendEnds = l.pendHashes[:0], l.pendEnds[:0]
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
	return Stats{Rows: int64(l.rows), Bytes: l.bytes,
		PendingRows: int64(len(l.pendEnds)), PendingBytes: l.size - l.bytes}
}

// Close closes the files without committing: pending lines are cut at the
// next Open.
func (l *Log) Close() error {
	l.commitMu.Lock() // not under a Commit's fsync or index write
	defer l.commitMu.Unlock()
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

// Held calls fn with the id hash of every line the log held when it was
// opened (a log opened with lookup; in hash order, a hash once for each
// of its lines).
func (l *Log) Held(fn func(h uint64)) {
	for _, e := range l.byHash {
		fn(e.hash)
	}
}

// Size is the bytes appended, committed or not.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}
