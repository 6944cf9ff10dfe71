package commitlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Journal is an expensive stage's journal: one line per record it sent on,
// kept until every output committed that record. It is a directory of
// segments (DIR/00000.jsonl, 00001.jsonl, …, each a Log with its index),
// rolled at a size. A sealed segment every id of which is finished (see
// Finished) is deleted, so the journal holds about what the outputs have
// not committed yet, not every completion of the run; with Keep nothing is
// deleted. A single-file journal of an earlier pipe (Legacy) is read as the
// oldest segment and deleted the same way.
//
// A listing beside the directory (Listing, outside it so that removing the
// directory is noticed) names the segments and how many lines each held.
// At Open, a listed segment that is gone, or a segment that cannot be read,
// was removed or damaged by hand: Open says so in its warnings, sets a
// damaged one aside (NAME.damaged-TIME, never deleted) and goes on; the
// records it held that are not finished are done again.
//
// Its methods are safe for concurrent use.
type Journal struct {
	opts JournalOptions
	// mu: Append, Finished, Commit's roll and the sweep take it.
	mu   sync.Mutex
	segs []*segment // oldest first; the last is active
	// held are the segments that held lines when the journal was opened,
	// the only ones Lookup reads (a line appended since is never looked
	// up). heldMu guards the list apart from mu, so that lookups never
	// queue with appends: an RWMutex shared by both made each append wait
	// for the lookups begun before it, and at hundreds of completions a
	// second the expensive stage's workers queued there holding their
	// records (bench/rehearsal.sh: 252 of 336 were waiting). The sweep
	// takes heldMu (inside mu) before it closes one of them.
	heldMu sync.RWMutex
	held   []*segment
	live   map[uint64]*segment
	next   int // number of the next segment
	warns  []string
	cut    int64
	adopt  int
	broken error
	// lost: the ids, not finished, whose entries Open found damaged and
	// could not keep (they are generated again).
	lost map[uint64]bool
}

// JournalOptions say where a journal lives and when its segments go.
type JournalOptions struct {
	// Dir holds the segments; Legacy is an earlier single-file journal
	// ("" for none); Listing is the JSON file naming the segments.
	Dir, Legacy, Listing string
	IDOf                 IDFunc
	// Done reports whether an id was finished for good when the journal was
	// opened (nil: none was): its lines are never replayed.
	Done func(h uint64) bool
	// SegmentBytes rolls the active segment at a commit once it holds this
	// much. Zero means 64 MiB.
	SegmentBytes int64
	// Keep keeps every segment (keep_journal = true, for audit).
	Keep bool
}

type segment struct {
	name       string // as listed: relative to the listing's directory
	path       string
	log        *Log
	sealed     bool
	unfinished int // ids whose last line is here and that are not finished
}

type journalListing struct {
	Segments []listedSegment `json:"segments"`
}

type listedSegment struct {
	Name  string `json:"name"`
	Lines int64  `json:"lines"`
}

var segmentName = regexp.MustCompile(`^(\d{5,})\.jsonl$`)

// OpenJournal opens (creating) the journal. Its warnings name what was
// removed or damaged by hand.
func OpenJournal(o JournalOptions) (*Journal, error) {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.Done == nil {
		o.Done = func(uint64) bool { return false }
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	j := &Journal{opts: o, live: map[uint64]*segment{}, lost: map[uint64]bool{}}
	listed, err := j.readListing()
	if err != nil {
		j.warns = append(j.warns, fmt.Sprintf("%s is unreadable (%v): what was removed by hand cannot be told", o.Listing, err))
	}
	paths, err := j.segmentPaths()
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for _, p := range paths {
		name := j.listedName(p)
		present[name] = true
		if err := j.openSegment(p, name); err != nil {
			j.Close()
			return nil, err
		}
	}
	for _, ls := range listed {
		if !present[ls.Name] {
			j.warns = append(j.warns, fmt.Sprintf("segment %s (%d records) was removed by hand: those of its records not yet in every output are done again (generated again, at full cost)", filepath.Join(filepath.Dir(o.Listing), ls.Name), ls.Lines))
		}
	}
	// Appends go on in the newest segment while it has room.
	if n := len(j.segs); n > 0 && j.segs[n-1].path != o.Legacy && j.segs[n-1].log.Size() < o.SegmentBytes {
		j.segs[n-1].sealed = false
	} else if err := j.create(); err != nil {
		j.Close()
		return nil, err
	}
	if err := errors.Join(j.sweep(false), j.writeListing()); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// segmentPaths lists the journal's data files, oldest first (a legacy
// single file, then the segments by number), and sets the number of the
// next segment.
func (j *Journal) segmentPaths() ([]string, error) {
	var paths []string
	if j.opts.Legacy != "" {
		if _, err := os.Stat(j.opts.Legacy); err == nil {
			paths = append(paths, j.opts.Legacy)
		}
	}
	entries, err := os.ReadDir(j.opts.Dir)
	if err != nil {
		return nil, err
	}
	var segs []string
	for _, e := range entries {
		if m := segmentName.FindStringSubmatch(e.Name()); m != nil {
			segs = append(segs, filepath.Join(j.opts.Dir, e.Name()))
			n, _ := strconv.Atoi(m[1])
			j.next = max(j.next, n+1)
		}
	}
	return append(paths, sortSegments(segs)...), nil
}

// openSegment opens the data file at path (listed as name) as a sealed
// segment, repaired first if damaged, and makes it the holder of the ids
// not done whose last line it has. A segment that cannot be opened is set
// aside with a warning; the error is only a full disk's, which is not
// damage: the same start succeeds once there is room, with nothing set
// aside.
func (j *Journal) openSegment(path, name string) error {
	w, err := j.repair(path)
	if w != "" {
		j.warns = append(j.warns, w)
	}
	var l *Log
	if err == nil {
		l, err = openLookup(path, j.opts.IDOf)
	}
	if noRoom(err) {
		return err
	}
	if err != nil {
		j.setAside(path, name, err)
		return nil
	}
	s := &segment{name: name, path: path, log: l, sealed: true}
	j.cut += l.Truncated()
	j.adopt += l.Recovered()
	l.Held(func(h uint64) {
		if j.opts.Done(h) {
			return
		}
		j.own(h, s)
	})
	j.segs = append(j.segs, s)
	if l.holdsLines() {
		j.held = append(j.held, s)
	}
	return nil
}

// sortSegments orders segment paths by number: zero-padded names of one
// width sort as text, and wider ones come after.
func sortSegments(paths []string) []string {
	slices.Sort(paths)
	slices.SortStableFunc(paths, func(a, b string) int { return len(filepath.Base(a)) - len(filepath.Base(b)) })
	return paths
}

func (j *Journal) listedName(path string) string {
	rel, err := filepath.Rel(filepath.Dir(j.opts.Listing), path)
	if err != nil {
		return path
	}
	return rel
}

func (j *Journal) readListing() ([]listedSegment, error) {
	data, err := os.ReadFile(j.opts.Listing)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l journalListing
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, err
	}
	return l.Segments, nil
}

func (j *Journal) writeListing() error {
	l := journalListing{Segments: []listedSegment{}}
	for _, s := range j.segs {
		l.Segments = append(l.Segments, listedSegment{Name: s.name, Lines: s.log.Stats().Rows})
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(j.opts.Listing, append(data, '\n'))
}

// setAside renames a segment that cannot be opened (and its index) out of
// the way, keeping it for whoever wants to look.
func (j *Journal) setAside(path, name string, cause error) {
	if hashes, _, err := indexEntries(IndexPath(path)); err == nil {
		for _, h := range hashes {
			if !j.opts.Done(h) {
				j.lost[h] = true
			}
		}
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	aside := path + ".damaged-" + stamp
	what := "set aside as " + aside
	if err := os.Rename(path, aside); err != nil {
		what = fmt.Sprintf("could not be set aside (%v)", err)
	} else {
		os.Rename(IndexPath(path), IndexPath(aside))
	}
	j.warns = append(j.warns, fmt.Sprintf("segment %s is damaged (%v): %s; those of its records not yet in every output are done again (generated again, at full cost)", path, cause, what))
}

// own makes s the segment holding h's last line.
func (j *Journal) own(h uint64, s *segment) {
	prev, ok := j.live[h]
	if ok && prev == s {
		return
	}
	if ok {
		prev.unfinished-- // an earlier line of the same id: superseded
	}
	j.live[h] = s
	s.unfinished++
}

// create starts the next segment and makes it the active one.
func (j *Journal) create() error {
	path := filepath.Join(j.opts.Dir, fmt.Sprintf("%05d.jsonl", j.next))
	l, err := openLookup(path, j.opts.IDOf)
	if err != nil {
		return err
	}
	j.next++
	j.segs = append(j.segs, &segment{name: j.listedName(path), path: path, log: l})
	if err := SyncDir(j.opts.Dir); err != nil {
		return err
	}
	return j.writeListing()
}

// sweep deletes the sealed segments (with final, the active one too) whose
// ids are all finished, and writes the listing if it changed. The caller
// holds mu (or is Open).
func (j *Journal) sweep(final bool) error {
	if j.opts.Keep {
		return nil
	}
	var kept, gone []*segment
	for i, s := range j.segs {
		last := i == len(j.segs)-1
		if s.unfinished > 0 || (!s.sealed && !(final && last)) {
			kept = append(kept, s)
		} else {
			gone = append(gone, s)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	// The listing first: a crash before the files go leaves files it does
	// not name (taken up again at the next Open), never a name without its
	// file, which would read as removed by hand.
	all := j.segs
	j.segs = kept
	err := j.writeListing()
	if err != nil {
		j.segs = all // still held; the next sweep tries again
		return err
	}
	j.heldMu.Lock()
	j.held = slices.DeleteFunc(j.held, func(s *segment) bool { return slices.Contains(gone, s) })
	j.heldMu.Unlock()
	for _, s := range gone {
		s.log.Close()
		err = errors.Join(err, removeIfThere(s.path), removeIfThere(IndexPath(s.path)))
	}
	return err
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// LostHashes are the hashes of the ids Lost reports.
func (j *Journal) LostHashes() []uint64 {
	out := make([]uint64, 0, len(j.lost))
	for h := range j.lost {
		out = append(out, h)
	}
	return out
}

// Lost reports whether Open found id's entry damaged and could not keep
// it: a record of id that reaches the stage now is done again.
func (j *Journal) Lost(id string) bool { return j.lost[Hash(id)] }

// Warnings are what Open found removed or damaged by hand.
func (j *Journal) Warnings() []string { return j.warns }

// Truncated is the bytes of torn tails Open cut; Recovered the whole lines
// past the last commit it adopted.
func (j *Journal) Truncated() int64 { return j.cut }
func (j *Journal) Recovered() int   { return j.adopt }

// Path is the segments' directory.
func (j *Journal) Path() string { return j.opts.Dir }

// Append writes one line for the record id into the active segment; it is
// pending until the next Commit.
func (j *Journal) Append(id string, line []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	s := j.segs[len(j.segs)-1]
	if err := s.log.Append(id, line); err != nil {
		return err
	}
	j.own(Hash(id), s)
	return nil
}

// Lookup returns the last line of id among those the journal held when it
// was opened.
func (j *Journal) Lookup(id string) ([]byte, bool, error) {
	j.heldMu.RLock()
	defer j.heldMu.RUnlock()
	for i := len(j.held) - 1; i >= 0; i-- {
		line, ok, err := j.held[i].log.Lookup(id)
		if err != nil || ok {
			return line, ok, err
		}
	}
	return nil, false, nil
}

// Commit makes every line appended so far durable, then rolls the active
// segment if it is full. Appends go on while it waits for the disk.
func (j *Journal) Commit() error {
	j.mu.Lock()
	if j.broken != nil {
		j.mu.Unlock()
		return j.broken
	}
	active := j.segs[len(j.segs)-1]
	var rolled bool
	if active.log.Size() >= j.opts.SegmentBytes {
		if err := j.create(); err != nil {
			j.broken = fmt.Errorf("journal %s: starting a segment: %w", j.opts.Dir, err)
			j.mu.Unlock()
			return j.broken
		}
		rolled = true
	}
	j.mu.Unlock()
	// Lines appended before the roll are in active; this commits them.
	if err := active.log.Commit(); err != nil {
		return err
	}
	if !rolled {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	active.sealed = true
	active.log.seal()
	return j.sweep(false)
}

// Finished tells the journal that the ids with these hashes are finished
// for good (durably in the run directory's done log): a sealed segment all
// of whose ids are finished is deleted.
func (j *Journal) Finished(hashes []uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, h := range hashes {
		if s, ok := j.live[h]; ok {
			delete(j.live, h)
			s.unfinished--
		}
	}
	return j.sweep(false)
}

// Done deletes what is finished, the active segment too when every id in
// it is: for the end of a run, before its figures are taken. Appends after
// it start a new segment.
func (j *Journal) Done() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.sweepAll(); err != nil {
		return err
	}
	if len(j.segs) == 0 {
		return j.create()
	}
	return nil
}

func (j *Journal) sweepAll() error {
	if j.broken != nil || len(j.segs) == 0 {
		return nil
	}
	// Only committed lines may go: a pending line's id is not finished.
	if st := j.segs[len(j.segs)-1].log.Stats(); st.PendingRows > 0 {
		return nil
	}
	return j.sweep(true)
}

// Bytes is the size of the segments the journal holds.
func (j *Journal) Bytes() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	var n int64
	for _, s := range j.segs {
		n += s.log.Size()
	}
	return n
}

// Close deletes what is finished, the active segment too when every id in
// it is (a finished run leaves no journal), and closes the files without
// committing: pending lines are cut at the next Open.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.sweepAll()
	j.heldMu.Lock()
	j.held = nil
	j.heldMu.Unlock()
	for _, s := range j.segs {
		err = errors.Join(err, s.log.Close())
	}
	j.segs = nil
	return err
}

// JournalFiles lists the data files of stage's journal under dir (the run
// directory's journal/): an earlier single file STAGE.jsonl first, then
// the segments STAGE/NNNNN.jsonl in order. stage "" lists every stage's.
func JournalFiles(dir, stage string) []string {
	pattern := stage
	if pattern == "" {
		pattern = "*"
	}
	legacy, _ := filepath.Glob(filepath.Join(dir, pattern+".jsonl"))
	dirs, _ := filepath.Glob(filepath.Join(dir, pattern))
	var out []string
	for _, p := range legacy {
		if filepath.Base(p)[0] != '.' {
			out = append(out, p)
		}
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		entries, _ := os.ReadDir(d) // not a directory: none
		var segs []string
		for _, e := range entries {
			if segmentName.MatchString(e.Name()) {
				segs = append(segs, filepath.Join(d, e.Name()))
			}
		}
		out = append(out, sortSegments(segs)...)
	}
	return out
}
