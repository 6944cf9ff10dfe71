package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A journal segment that a restart may replay from is read whole before it
// is trusted: every line must be a journal entry (its checksum matching,
// see JournalEntry) and the committed lines must be the index's entries,
// in order. A segment that is not is damaged (a bad sector, a torn page, a
// cut or a copied block): its readable entries are written into a new
// segment of the same name, the damaged file is kept aside, and the
// prompts whose entries were lost are generated again. Damage never stops
// a start.

// indexEntries reads the entries of the index at path as they are, a torn
// last entry left out: the hashes and line ends in order.
func indexEntries(path string) (hashes []uint64, ends []int64, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if len(raw) < len(indexMagic) || string(raw[:len(indexMagic)]) != indexMagic {
		return nil, nil, errors.New("not a commit index (bad header)")
	}
	body := raw[len(indexMagic):]
	for i := 0; i+entrySize <= len(body); i += entrySize {
		hashes = append(hashes, binary.LittleEndian.Uint64(body[i:]))
		ends = append(ends, int64(binary.LittleEndian.Uint64(body[i+8:])))
	}
	return hashes, ends, nil
}

// goodLine is a line of a segment that reads as a journal entry.
type goodLine struct {
	start, end int64 // end: past its newline
	hash       uint64
}

// damagedSpan is a run of bytes of a segment that do not read as journal
// entries, and the ids of the entries around it ("" at an end).
type damagedSpan struct {
	from, to      int64
	before, after string
}

// segmentScan is what reading a segment whole found.
type segmentScan struct {
	good    []goodLine
	damaged []damagedSpan
	// torn is the bytes of a last line without its newline: a write a
	// killed process left unfinished, cut as usual, not damage.
	torn int64
	// indexed: the index's entries are the first good lines, in order.
	indexed bool
	// loose are the id hashes still legible in damaged lines (those past
	// the index are known by nothing else).
	loose []uint64
	size  int64
}

// intact reports whether the segment can be opened as it is.
func (s *segmentScan) intact() bool { return len(s.damaged) == 0 && s.indexed }

// scanSegment reads the data file at path whole and compares its lines
// with the index's entries.
func scanSegment(path string, idOf IDFunc, hashes []uint64, ends []int64, looseID func([]byte) string) (*segmentScan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := &segmentScanner{segmentScan: segmentScan{indexed: true}, idOf: idOf, hashes: hashes, ends: ends, looseID: looseID}
	if err := eachLine(f, s.line); err != nil {
		return nil, err
	}
	if len(s.good) < len(ends) {
		s.indexed = false // the index names lines the file no longer has
	}
	return &s.segmentScan, nil
}

// segmentScanner is scanSegment's reading, a line at a time.
type segmentScanner struct {
	segmentScan
	idOf    IDFunc
	hashes  []uint64 // the index's entries
	ends    []int64
	looseID func([]byte) string
	prevID  string       // the id of the last good line
	open    *damagedSpan // the span being read, if any
}

// line takes one line of the segment: a good one, a damaged one, or a
// torn last one.
func (s *segmentScanner) line(off int64, line []byte, whole bool) error {
	end := off + int64(len(line))
	if whole {
		end++
	}
	s.size = end
	var id string
	ok := whole
	if ok {
		var err error
		id, err = s.idOf(line)
		ok = err == nil && id != ""
	}
	switch {
	case !ok && !whole && s.open == nil:
		s.torn = end - off
	case !ok:
		s.takeDamaged(off, end, line)
	default:
		s.takeGood(off, end, id)
	}
	return nil
}

// takeDamaged adds the line [off, end) to the damaged span being read (a
// new one after a good line), noting its id when still legible.
func (s *segmentScanner) takeDamaged(off, end int64, line []byte) {
	if s.looseID != nil {
		if id := s.looseID(line); id != "" {
			s.loose = append(s.loose, Hash(id))
		}
	}
	if s.open == nil {
		s.damaged = append(s.damaged, damagedSpan{from: off, before: s.prevID})
		s.open = &s.damaged[len(s.damaged)-1]
	}
	s.open.to = end
}

// takeGood adds the good line [off, end) of id, closing the damaged span
// before it, and notes whether it is the index's entry of its place.
func (s *segmentScanner) takeGood(off, end int64, id string) {
	if s.open != nil {
		s.open.after = id
		s.open = nil
	}
	s.prevID = id
	g := goodLine{start: off, end: end, hash: Hash(id)}
	if n := len(s.good); n < len(s.ends) && (s.ends[n] != g.end || s.hashes[n] != g.hash) {
		s.indexed = false
	}
	s.good = append(s.good, g)
}

// Repaired is what OpenRepaired found wrong with a log and did about it.
type Repaired struct {
	// Aside is where the damaged file was kept (PATH.damaged-TIME).
	Aside string
	// Kept is how many lines the rewritten log holds.
	Kept int
	// Lost are the hashes of the ids that the index (or a damaged line,
	// still legible) named and no kept line has.
	Lost []uint64
	// Why says what was wrong, one phrase a fault.
	Why []string
}

// String says what was wrong with the log at path and what was done.
func (r *Repaired) String(path string) string {
	return fmt.Sprintf("%s was damaged: %s; set aside as %s; its %d readable lines are kept, %d lost", path, strings.Join(r.Why, "; "), r.Aside, r.Kept, len(r.Lost))
}

// repairLog reads the log at path whole and, when its lines are not all
// readable (idOf) or are not what its index says, rewrites it from its
// readable lines with a new index, keeping the damaged file aside. It
// returns nil when the log is intact. looseID, if set, reads the id of a
// damaged line whose id is still legible. The log must not be open.
func repairLog(path string, idOf IDFunc, looseID func([]byte) string) (*Repaired, error) {
	hashes, ends, ierr := indexEntries(IndexPath(path))
	return repairWithIndex(path, idOf, looseID, hashes, ends, ierr)
}

// repairWithIndex is repairLog with the index already read (indexEntries).
func repairWithIndex(path string, idOf IDFunc, looseID func([]byte) string, hashes []uint64, ends []int64, ierr error) (*Repaired, error) {
	var pe *os.PathError
	if ierr != nil && !errors.Is(ierr, os.ErrNotExist) && errors.As(ierr, &pe) {
		return nil, ierr // the disk, not the file
	}
	sc, err := scanSegment(path, idOf, hashes, ends, looseID)
	if err != nil {
		return nil, err
	}
	if ierr == nil && sc.intact() {
		return nil, nil
	}
	aside, written, err := rewrite(path, sc)
	if err != nil {
		return nil, err
	}
	return &Repaired{Aside: aside, Kept: written, Lost: lostIDs(hashes, sc), Why: whyDamaged(ierr, sc)}, nil
}

// lostIDs are the hashes, once each, that the index (hashes) or a
// damaged line still legible named and no good line has.
func lostIDs(hashes []uint64, sc *segmentScan) []uint64 {
	var lost []uint64
	kept := map[uint64]bool{}
	for _, g := range sc.good {
		kept[g.hash] = true
	}
	for _, h := range append(hashes, sc.loose...) {
		if !kept[h] {
			kept[h] = true // once
			lost = append(lost, h)
		}
	}
	return lost
}

// whyDamaged says what was wrong with a log whose index read as ierr and
// whose lines scanned as sc, one phrase a fault (three damaged spans at
// most, then how many more).
func whyDamaged(ierr error, sc *segmentScan) []string {
	var why []string
	switch {
	case errors.Is(ierr, os.ErrNotExist):
		why = append(why, "its index is missing")
	case ierr != nil:
		why = append(why, fmt.Sprintf("its index cannot be read (%v)", ierr))
	case !sc.indexed && len(sc.damaged) == 0:
		why = append(why, "its index does not match its lines")
	}
	for i, d := range sc.damaged {
		if i == 3 {
			why = append(why, fmt.Sprintf("%d more damaged spans", len(sc.damaged)-3))
			break
		}
		why = append(why, fmt.Sprintf("bytes %d-%d are not whole records (%s)", d.from, d.to, around(d)))
	}
	return why
}

// repair reads the segment at path whole when it holds a prompt that is
// not finished (or anything past its index, or an index that cannot be
// read), and rewrites it from its readable entries when it is damaged. It
// returns the warning that names what was set aside and lost ("" when the
// segment was intact), and records the lost ids in j.lost. An error means
// the segment could not be read or rewritten at all.
func (j *Journal) repair(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	hashes, ends, ierr := indexEntries(IndexPath(path))
	if errors.Is(ierr, os.ErrNotExist) && st.Size() == 0 {
		return "", nil // a new segment
	}
	if !j.needsReading(st.Size(), hashes, ends, ierr) {
		return "", nil
	}
	rep, err := repairWithIndex(path, j.opts.IDOf, looseID, hashes, ends, ierr)
	if err != nil || rep == nil {
		return "", err
	}
	return j.lostWarning(path, rep), nil
}

// needsReading says whether a segment of size bytes, whose index read as
// (hashes, ends, ierr), is to be read whole: its index cannot be read,
// it has lines past its index (or is cut short), or it holds an id not
// done.
func (j *Journal) needsReading(size int64, hashes []uint64, ends []int64, ierr error) bool {
	need := ierr != nil
	if n := len(ends); n > 0 && ends[n-1] != size || n == 0 && size > 0 {
		need = true // lines past the index (or a file cut short)
	}
	for _, h := range hashes {
		need = need || !j.opts.Done(h)
	}
	return need
}

// lostWarning records in j.lost the ids a repair of the segment at path
// lost that are not done, and returns the warning saying what was set
// aside and lost.
func (j *Journal) lostWarning(path string, rep *Repaired) string {
	var lostFinished, lostOpen int
	for _, h := range rep.Lost {
		switch {
		case j.opts.Done(h):
			lostFinished++
		case !j.lost[h]:
			j.lost[h] = true
			lostOpen++
		}
	}
	w := fmt.Sprintf("segment %s is damaged: %s; set aside as %s; its %d readable entries are kept", path, strings.Join(rep.Why, "; "), rep.Aside, rep.Kept)
	if lostOpen > 0 {
		w += fmt.Sprintf("; %d prompts whose completions were lost are generated again (at full cost)", lostOpen)
	}
	if lostFinished > 0 {
		w += fmt.Sprintf("; %d lost entries were of prompts already in every output (nothing to redo)", lostFinished)
	}
	return w
}

// recordIDKey is how a journal entry's record id starts (the record's
// first field, as AppendJournalEntry writes it).
var recordIDKey = []byte(`"record":{"id":"`)

// looseID reads the record id of a damaged journal line when its bytes
// are still there, "" when not.
func looseID(line []byte) string {
	i := bytes.Index(line, recordIDKey)
	if i < 0 {
		return ""
	}
	id, _, _ := jsonString(line[i+len(recordIDKey)-1:]) // from the id's opening quote
	return id
}

func around(d damagedSpan) string {
	switch {
	case d.before != "" && d.after != "":
		return fmt.Sprintf("between the entries of %q and %q", d.before, d.after)
	case d.before != "":
		return fmt.Sprintf("after the entry of %q, to the end", d.before)
	case d.after != "":
		return fmt.Sprintf("from the start to the entry of %q", d.after)
	}
	return "no entry around it reads"
}

// rewrite replaces the segment at path with its good lines and a new
// index, keeping the damaged file (and its index) as PATH.damaged-TIME,
// which it returns with the number of entries kept. Each step leaves a
// segment that a next Open reads: the old file is linked aside before the
// new one is renamed over it, and a crash between the two renames leaves a
// new data file under an old index (or the reverse), which reads as
// damaged and is rewritten again, from lines that are all good.
func rewrite(path string, sc *segmentScan) (aside string, written int, err error) {
	tmp := path + ".salvage"
	if written, err = writeSalvage(path, tmp, sc); err != nil {
		return "", 0, err
	}
	aside = path + ".damaged-" + time.Now().UTC().Format("20060102T150405.000Z")
	if err := linkOrRename(path, aside); err != nil {
		return "", 0, fmt.Errorf("setting the damaged file aside: %w", err)
	}
	if _, err := os.Stat(IndexPath(path)); err == nil {
		if err := linkOrRename(IndexPath(path), IndexPath(aside)); err != nil {
			return "", 0, fmt.Errorf("setting the damaged index aside: %w", err)
		}
	}
	if err := os.Rename(IndexPath(tmp), IndexPath(path)); err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", 0, err
	}
	return aside, written, SyncDir(filepath.Dir(path))
}

// writeSalvage writes the good lines of the segment at path into a new
// log at tmp (replacing what an earlier salvage left there), committed,
// and returns how many it wrote. Of several lines of one id (a copied
// block), the last is the one a look-up reads: only it is kept.
func writeSalvage(path, tmp string, sc *segmentScan) (written int, err error) {
	for _, p := range []string{tmp, IndexPath(tmp)} {
		if err := removeIfThere(p); err != nil {
			return 0, err
		}
	}
	src, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	l, err := Open(tmp, nil)
	if err != nil {
		return 0, err
	}
	last := make(map[uint64]int, len(sc.good))
	for i, g := range sc.good {
		last[g.hash] = i
	}
	var buf []byte
	for i, g := range sc.good {
		if last[g.hash] != i {
			continue
		}
		buf = slices.Grow(buf[:0], int(g.end-g.start))[:g.end-g.start]
		if _, err := src.ReadAt(buf, g.start); err != nil && !errors.Is(err, io.EOF) {
			l.Close()
			return 0, err
		}
		if err := l.appendHashed(g.hash, buf[:len(buf)-1]); err != nil {
			l.Close()
			return 0, err
		}
		written++
	}
	return written, errors.Join(l.Commit(), l.Close())
}

// linkOrRename makes the file at from also reachable as to (a hard link),
// or, where links cannot be made, moves it there.
func linkOrRename(from, to string) error {
	if err := os.Link(from, to); err == nil {
		return nil
	}
	return os.Rename(from, to)
}
