package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// A checked id log (done.ids) keeps beside it, in sumsPath, a CRC-32C of
// every block of sumBlock ids: a header, then one 8-byte record a block
// (how many of the block's ids it covers, then their checksum). A block
// whose ids do not match is damaged: its ids are no longer known as
// finished (they are done again where an output lacks them) and the log is
// rewritten without them. Ids past what the records cover (a crash between
// the ids' fsync and their checksums') are taken as they are.
//
// Blocks are small so that damage costs few ids: a whole commit's batch
// could be a shard of 100,000 rows.
const (
	sumsMagic  = "PIPESUM1"
	sumBlock   = 64
	sumRecSize = 8
)

// sumsPath is where the checksums of the id log at path live: beside it,
// hidden (RUN/done.ids → RUN/.done.ids.sums).
func sumsPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".sums")
}

// OpenCheckedIDLog is OpenIDLog for an id log kept with checksums: it
// checks the ids against them, rewrites the log without a damaged block's
// ids, and says what it found in warning ("" when nothing). A log of an
// earlier pipe, without checksums, gets them for what it holds.
func OpenCheckedIDLog(path string) (l *IDLog, hashes []uint64, warning string, err error) {
	l, hashes, err = OpenIDLog(path)
	var de *DamagedError
	if errors.As(err, &de) {
		// A torn first page: the header is written again, and the ids
		// after it are judged by their checksums like any others.
		if herr := rewriteHeader(path, idsMagic); herr != nil {
			return nil, nil, "", err
		}
		warning = fmt.Sprintf("%s had a damaged header (%v): written again", path, de.Err)
		l, hashes, err = OpenIDLog(path)
	}
	if err != nil {
		return nil, nil, "", err
	}
	sums, err := readSums(sumsPath(path))
	if err != nil {
		warning = joinWarnings(warning, fmt.Sprintf("%s cannot be read (%v): the finished ids are taken as they are", sumsPath(path), err))
		sums = nil
	}
	kept, lost, covered := checkSums(hashes, sums)
	if lost > 0 {
		l.Close()
		if err := WriteIDLog(path, kept); err != nil {
			return nil, nil, "", err
		}
		if l, hashes, err = OpenIDLog(path); err != nil {
			return nil, nil, "", err
		}
		if err := writeSums(sumsPath(path), hashes); err != nil {
			l.Close()
			return nil, nil, "", err
		}
		warning = joinWarnings(warning, fmt.Sprintf("%s is damaged: %d of its %d finished ids do not match their checksums and are no longer known as finished; they are done again where an output lacks them (an output that holds one skips it)", path, lost, len(kept)+lost))
	} else if covered < len(hashes) || sums == nil {
		// New, or past a crash, or of an earlier pipe: checksum what is
		// there from here on.
		if err := writeSums(sumsPath(path), hashes); err != nil {
			l.Close()
			return nil, nil, "", err
		}
	}
	if l.sums, err = OpenFile(sumsPath(path), os.O_RDWR, 0o644); err != nil {
		l.Close()
		return nil, nil, "", err
	}
	l.tail = append([]uint64(nil), hashes[len(hashes)/sumBlock*sumBlock:]...)
	return l, hashes, warning, nil
}

// sumRec is one block's record: how many of its ids it covers, and their
// checksum.
type sumRec struct {
	n   uint32
	crc uint32
}

// readSums reads the records of a sums file; a missing one has none (nil),
// a torn last record is left out.
func readSums(path string) ([]sumRec, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(raw) < len(sumsMagic) || string(raw[:len(sumsMagic)]) != sumsMagic {
		return nil, errors.New("not a checksum file (bad header)")
	}
	body := raw[len(sumsMagic):]
	recs := make([]sumRec, 0, len(body)/sumRecSize)
	for i := 0; i+sumRecSize <= len(body); i += sumRecSize {
		recs = append(recs, sumRec{binary.LittleEndian.Uint32(body[i:]), binary.LittleEndian.Uint32(body[i+4:])})
	}
	return recs, nil
}

// blockSum is the checksum of a block's ids.
func blockSum(ids []uint64) uint32 {
	var buf [8 * sumBlock]byte
	for i, h := range ids {
		binary.LittleEndian.PutUint64(buf[8*i:], h)
	}
	return crc32.Checksum(buf[:8*len(ids)], castagnoli)
}

// checkSums returns the ids of hashes whose blocks match their records (and
// those no record covers), how many were dropped as damaged, and how many
// the records covered.
func checkSums(hashes []uint64, sums []sumRec) (kept []uint64, lost, covered int) {
	kept = make([]uint64, 0, len(hashes))
	for b := 0; b*sumBlock < len(hashes); b++ {
		block := hashes[b*sumBlock : min((b+1)*sumBlock, len(hashes))]
		if b >= len(sums) {
			kept = append(kept, block...)
			continue
		}
		n := int(sums[b].n)
		if n == 0 || n > sumBlock || n > len(block) || blockSum(block[:n]) != sums[b].crc {
			lost += len(block)
			continue
		}
		covered += n
		kept = append(kept, block...)
	}
	return kept, lost, covered
}

// writeSums replaces the sums file at path with records for hashes.
func writeSums(path string, hashes []uint64) error {
	buf := make([]byte, 0, len(sumsMagic)+sumRecSize*(len(hashes)/sumBlock+1))
	buf = append(buf, sumsMagic...)
	for b := 0; b*sumBlock < len(hashes); b++ {
		block := hashes[b*sumBlock : min((b+1)*sumBlock, len(hashes))]
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(block)))
		buf = binary.LittleEndian.AppendUint32(buf, blockSum(block))
	}
	return WriteFileAtomic(path, buf)
}

// updateSums writes the records of the blocks from block first on, whose
// ids are ids (the last partial block's before this commit, then the new
// ones), and syncs.
func updateSums(f *os.File, first int, ids []uint64) error {
	var buf []byte
	for i := 0; i < len(ids); i += sumBlock {
		block := ids[i:min(i+sumBlock, len(ids))]
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(block)))
		buf = binary.LittleEndian.AppendUint32(buf, blockSum(block))
	}
	if _, err := f.WriteAt(buf, int64(len(sumsMagic)+first*sumRecSize)); err != nil {
		return err
	}
	return f.Sync()
}

// removeSums removes the checksums of the id log at path, before the log
// is replaced or cut: a log without them is taken as it is, never judged
// by another log's.
func removeSums(path string) error {
	err := os.Remove(sumsPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func joinWarnings(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// rewriteHeader writes magic over the first bytes of the file at path.
func rewriteHeader(path, magic string) error {
	f, err := OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(magic), 0)
	return errors.Join(err, f.Sync(), f.Close())
}
