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
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
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

// ShardProblem is a committed shard whose file is not what its manifest
// says: gone, or of another size or SHA-256.
type ShardProblem struct {
	Shard   ShardInfo
	Missing bool // no file at all
	// MovedTo is where the file went when its removal was recorded
	// (MarkMoved: an upload that deleted the local copy); "" otherwise.
	MovedTo string
	What    string // e.g. "has 1200 bytes, the manifest says 4096"
}

func (p ShardProblem) Error() string { return p.Shard.Name + " " + p.What }

// CheckResult is what CheckShards found.
type CheckResult struct {
	Shards   int   // shards the manifest names
	Bytes    int64 // bytes they should have
	Hashed   int64 // bytes read and hashed (0 without hash)
	Problems []ShardProblem
}

// CheckShards checks each shard m names in dir against it: the file's size
// always and, with hash, its SHA-256, hashing up to GOMAXPROCS files at once
// (crypto/sha256 uses the CPU's SHA extensions where it has them). Shards
// come back in manifest order; an error is one reading a file that is there
// (an I/O error), not a mismatch.
func CheckShards(dir string, m *Manifest, hash bool) (*CheckResult, error) {
	res := &CheckResult{Shards: len(m.Shards)}
	probs := make([]*ShardProblem, len(m.Shards))
	var toHash []int
	for i, sh := range m.Shards {
		res.Bytes += sh.Bytes
		st, err := os.Stat(filepath.Join(dir, sh.Name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			probs[i] = &ShardProblem{Shard: sh, Missing: true, What: "is missing"}
			if to, ok := MovedTo(dir, sh.Name); ok {
				probs[i].MovedTo, probs[i].What = to, "was moved to "+to
			}
		case err != nil:
			return nil, err
		case st.Size() != sh.Bytes:
			probs[i] = &ShardProblem{Shard: sh, What: fmt.Sprintf("has %d bytes, the manifest says %d", st.Size(), sh.Bytes)}
		case hash:
			toHash = append(toHash, i)
		}
	}
	if len(toHash) > 0 {
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			firstEr error
			next    = make(chan int)
		)
		for range min(runtime.GOMAXPROCS(0), len(toHash)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1<<20)
				for i := range next {
					sh := m.Shards[i]
					sum, n, err := FileSHA256(filepath.Join(dir, sh.Name), buf)
					mu.Lock()
					res.Hashed += n
					switch {
					case err != nil && firstEr == nil:
						firstEr = err
					case err == nil && sum != sh.SHA256:
						probs[i] = &ShardProblem{Shard: sh, What: fmt.Sprintf("has SHA-256 %s, the manifest says %s", sum, sh.SHA256)}
					}
					mu.Unlock()
				}
			}()
		}
		for _, i := range toHash {
			next <- i
		}
		close(next)
		wg.Wait()
		if firstEr != nil {
			return nil, firstEr
		}
	}
	for _, p := range probs {
		if p != nil {
			res.Problems = append(res.Problems, *p)
		}
	}
	return res, nil
}

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
	return dropped, writeIDLog(path, kept)
}

func writeIDLog(path string, hashes []uint64) error {
	buf := make([]byte, len(idsMagic)+8*len(hashes))
	copy(buf, idsMagic)
	for i, h := range hashes {
		binary.LittleEndian.PutUint64(buf[len(idsMagic)+8*i:], h)
	}
	return WriteFileAtomic(path, buf)
}

// nextNumber is the number after the highest part-NNNNN of shards: a
// shard dropped as damaged leaves its number unused, never taken again (an
// upload of it may still be in a bucket).
func nextNumber(shards []ShardInfo) int {
	n := 0
	for _, sh := range shards {
		var k int
		if _, err := fmt.Sscanf(sh.Name, "part-%d.", &k); err == nil && k+1 > n {
			n = k + 1
		}
	}
	return max(n, len(shards))
}

// DamagedSuffix ends the name a damaged shard is moved to (.pipe/NAME.damaged,
// out of what readers of the directory take).
const DamagedSuffix = ".damaged"

// Drop takes damaged shards out of the directory: each file is moved aside
// (to .pipe/NAME.damaged; a missing one stays missing), the manifest and the id
// log are rewritten without them. It returns the id hashes of their rows,
// which the directory no longer holds: they are to be written again.
//
// The id log loses a stretch from its middle, so it is written whole as
// .pipe/ids.next first, then the manifest, then it becomes .pipe/ids. A crash
// in between is finished by OpenShards (finishDrop): ids.next agreeing
// with the manifest replaces .ids, else it is removed and the drop never
// happened (the next check finds the damage again).
func (s *Shards) Drop(names []string) ([]uint64, error) {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	idsPath := filepath.Join(s.dir, IDLogName)
	if err := s.ids.Close(); err != nil {
		return nil, err
	}
	_, hashes, err := OpenIDLog(idsPath)
	if err != nil {
		return nil, err
	}
	var kept, dropped []uint64
	m := s.Manifest()
	m.Shards = m.Shards[:0]
	m.Rows, m.Tokens, m.Bytes = 0, 0, 0
	off := int64(0)
	for _, sh := range s.m.Shards {
		part := hashes[off : off+sh.Rows]
		off += sh.Rows
		if drop[sh.Name] {
			dropped = append(dropped, part...)
			continue
		}
		kept = append(kept, part...)
		m.Shards = append(m.Shards, sh)
		m.Rows += sh.Rows
		m.Tokens += sh.Tokens
		m.Bytes += sh.Bytes
	}
	for name := range drop {
		err := os.Rename(filepath.Join(s.dir, name), filepath.Join(s.dir, MetaDir, name+DamagedSuffix))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	m.Updated = time.Now().UTC()
	redo := slices.Clone(dropped)
	for h := range s.redo {
		redo = append(redo, h)
	}
	if err := writeIDLog(filepath.Join(s.dir, RedoName), redo); err != nil {
		return nil, err
	}
	for _, h := range dropped {
		s.redo[h] = true
	}
	if err := writeIDLog(idsPath+".next", kept); err != nil {
		return nil, err
	}
	if err := writeManifest(s.dir, m); err != nil {
		return nil, err
	}
	if err := os.Rename(idsPath+".next", idsPath); err != nil {
		return nil, err
	}
	if err := SyncDir(s.dir); err != nil {
		return nil, err
	}
	ids, _, err := OpenIDLog(idsPath)
	if err != nil {
		return nil, err
	}
	s.m, s.ids, s.held = m, ids, NewSet(slices.Clone(kept))
	return dropped, nil
}

// finishDrop completes or undoes a Drop a crash cut short (see Drop).
func finishDrop(dir string, rows int64) error {
	next := filepath.Join(dir, idLogNext)
	l, hashes, err := OpenIDLog(next)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		os.Remove(next)
		return nil
	}
	l.Close()
	if int64(len(hashes)) == rows {
		return os.Rename(next, filepath.Join(dir, IDLogName))
	}
	return os.Remove(next)
}

// RedoName is the file of a shard directory listing the id hashes of rows
// of dropped (damaged) shards not yet written again. A row that is
// committed again leaves it; what is left at the end of a run is data
// lost everywhere, which the run reports.
const RedoName = MetaDir + "/redo"

func readRedo(dir string) (map[uint64]bool, error) {
	redo := map[uint64]bool{}
	hashes, err := ReadIDLog(filepath.Join(dir, RedoName))
	if err != nil {
		return nil, err
	}
	for _, h := range hashes {
		redo[h] = true
	}
	return redo, nil
}

// ReadRedo returns the id hashes of rows of dropped shards in dir not
// written again yet (see RedoName), sorted.
func ReadRedo(dir string) ([]uint64, error) {
	redo, err := readRedo(dir)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, len(redo))
	for h := range redo {
		out = append(out, h)
	}
	slices.Sort(out)
	return out, nil
}

// ToRedo is how many rows of dropped shards are still to be written again.
func (s *Shards) ToRedo() int { return len(s.redo) }

// Redo returns the id hashes of rows of dropped shards still to be written
// again.
func (s *Shards) Redo() []uint64 {
	out := make([]uint64, 0, len(s.redo))
	for h := range s.redo {
		out = append(out, h)
	}
	return out
}

// redone takes the ids of a committed shard off the redo list.
func (s *Shards) redone(ids []uint64) error {
	if len(s.redo) == 0 {
		return nil
	}
	n := len(s.redo)
	for _, h := range ids {
		delete(s.redo, h)
	}
	if len(s.redo) == n {
		return nil
	}
	if len(s.redo) == 0 {
		if err := os.Remove(filepath.Join(s.dir, RedoName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return SyncDir(s.dir)
	}
	left := make([]uint64, 0, len(s.redo))
	for h := range s.redo {
		left = append(left, h)
	}
	return writeIDLog(filepath.Join(s.dir, RedoName), left)
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

// MovedSuffix ends the name of the note (.pipe/NAME.moved) that a shard file
// was removed on purpose once a verified copy was elsewhere; it holds
// where.
const MovedSuffix = ".moved"

// MarkMoved notes, before the shard file name of dir is removed, that its
// verified copy is at url: a missing file with this note is not damage.
func MarkMoved(dir, name, url string) error {
	return WriteFileAtomic(filepath.Join(dir, MetaDir, name+MovedSuffix), []byte(url+"\n"))
}

// MovedTo returns where MarkMoved said the shard file name of dir went.
func MovedTo(dir, name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, MetaDir, name+MovedSuffix))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
