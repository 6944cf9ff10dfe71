package filecommit

import (
	"crypto/sha256"
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

	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

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

// CheckResult is what Check found.
type CheckResult struct {
	Shards   int   // shards the manifest names
	Bytes    int64 // bytes they should have
	Hashed   int64 // bytes read and hashed (0 without hash)
	Problems []ShardProblem
}

// Check checks each shard m names in dir against it: the file's size
// always and, with hash, its SHA-256, hashing up to GOMAXPROCS files at once
// (crypto/sha256 uses the CPU's SHA extensions where it has them). Shards
// come back in manifest order; an error is one reading a file that is there
// (an I/O error), not a mismatch.
func Check(dir string, m *Manifest, hash bool) (*CheckResult, error) {
	res := &CheckResult{Shards: len(m.Shards)}
	probs := make([]*ShardProblem, len(m.Shards))
	toHash, err := checkSizes(dir, m, hash, res, probs)
	if err != nil {
		return nil, err
	}
	if err := checkHashes(dir, m, toHash, res, probs); err != nil {
		return nil, err
	}
	for _, p := range probs {
		if p != nil {
			res.Problems = append(res.Problems, *p)
		}
	}
	return res, nil
}

// checkSizes stats each shard of m, setting probs[i] for one missing or
// of another size. It returns the indexes of the shards left to hash
// (none without hash).
func checkSizes(dir string, m *Manifest, hash bool, res *CheckResult, probs []*ShardProblem) (toHash []int, err error) {
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
	return toHash, nil
}

// checkHashes hashes the shards of m at toHash, up to GOMAXPROCS at once,
// setting probs[i] for one whose SHA-256 is not the manifest's. The error
// is the first one reading a file.
func checkHashes(dir string, m *Manifest, toHash []int, res *CheckResult, probs []*ShardProblem) error {
	if len(toHash) == 0 {
		return nil
	}
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
				sum, n, err := fileSHA256(filepath.Join(dir, sh.Name), buf)
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
	return firstEr
}

// fileSHA256 is the hex SHA-256 of the file at path and its size, read
// through buf (nil: a buffer of its own).
func fileSHA256(path string, buf []byte) (string, int64, error) {
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
// in between is finished by Open (finishDrop): ids.next agreeing
// with the manifest replaces .ids, else it is removed and the drop never
// happened (the next check finds the damage again).
func (s *Set) Drop(names []string) ([]uint64, error) {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	idsPath := filepath.Join(s.dir, IDLogName)
	if err := s.ids.Close(); err != nil {
		return nil, err
	}
	_, hashes, err := commitlog.OpenIDLog(idsPath)
	if err != nil {
		return nil, err
	}
	m, kept, dropped := s.without(drop, hashes)
	for name := range drop {
		err := os.Rename(filepath.Join(s.dir, name), filepath.Join(s.dir, MetaDir, name+DamagedSuffix))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	m.Updated = time.Now().UTC()
	if err := s.addRedo(dropped); err != nil {
		return nil, err
	}
	if err := commitlog.WriteIDLog(idsPath+".next", kept); err != nil {
		return nil, err
	}
	if err := writeManifest(s.dir, m); err != nil {
		return nil, err
	}
	if err := os.Rename(idsPath+".next", idsPath); err != nil {
		return nil, err
	}
	if err := commitlog.SyncDir(s.dir); err != nil {
		return nil, err
	}
	ids, _, err := commitlog.OpenIDLog(idsPath)
	if err != nil {
		return nil, err
	}
	s.m, s.ids, s.held = m, ids, commitlog.NewSet(slices.Clone(kept))
	return dropped, nil
}

// without is the manifest without the shards named in drop, with the id
// hashes (hashes, the id log in manifest order) of the rows it keeps and
// of those it drops.
func (s *Set) without(drop map[string]bool, hashes []uint64) (m Manifest, kept, dropped []uint64) {
	m = s.Manifest()
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
	return m, kept, dropped
}

// addRedo writes the redo list with the dropped hashes added, then adds
// them to s.redo.
func (s *Set) addRedo(dropped []uint64) error {
	redo := slices.Clone(dropped)
	for h := range s.redo {
		redo = append(redo, h)
	}
	if err := commitlog.WriteIDLog(filepath.Join(s.dir, RedoName), redo); err != nil {
		return err
	}
	for _, h := range dropped {
		s.redo[h] = true
	}
	return nil
}

// finishDrop completes or undoes a Drop a crash cut short (see Drop).
func finishDrop(dir string, rows int64) error {
	next := filepath.Join(dir, idLogNext)
	l, hashes, err := commitlog.OpenIDLog(next)
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
	hashes, err := commitlog.ReadIDLog(filepath.Join(dir, RedoName))
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
func (s *Set) ToRedo() int { return len(s.redo) }

// Redo returns the id hashes of rows of dropped shards still to be written
// again.
func (s *Set) Redo() []uint64 {
	out := make([]uint64, 0, len(s.redo))
	for h := range s.redo {
		out = append(out, h)
	}
	return out
}

// redone takes the ids of a committed shard off the redo list.
func (s *Set) redone(ids []uint64) error {
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
		return commitlog.SyncDir(s.dir)
	}
	left := make([]uint64, 0, len(s.redo))
	for h := range s.redo {
		left = append(left, h)
	}
	return commitlog.WriteIDLog(filepath.Join(s.dir, RedoName), left)
}

// MovedSuffix ends the name of the note (.pipe/NAME.moved) that a shard file
// was removed on purpose once a verified copy was elsewhere; it holds
// where.
const MovedSuffix = ".moved"

// MarkMoved notes, before the shard file name of dir is removed, that its
// verified copy is at url: a missing file with this note is not damage.
func MarkMoved(dir, name, url string) error {
	return commitlog.WriteFileAtomic(filepath.Join(dir, MetaDir, name+MovedSuffix), []byte(url+"\n"))
}

// MovedTo returns where MarkMoved said the shard file name of dir went.
func MovedTo(dir, name string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, MetaDir, name+MovedSuffix))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}
