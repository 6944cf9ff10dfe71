package commitlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func journalLine(id string) []byte {
	return fmt.Appendf(nil, `{"record":{"id":%q},"pad":%q}`, id, strings.Repeat("x", 100))
}

func journalID(line []byte) (string, error) {
	var e struct {
		Record *struct{ ID string } `json:"record"`
	}
	if err := json.Unmarshal(line, &e); err != nil || e.Record == nil {
		return "", fmt.Errorf("not a journal line")
	}
	return e.Record.ID, nil
}

func testJournalOptions(dir string) JournalOptions {
	return JournalOptions{Dir: filepath.Join(dir, "journal", "gen"), Legacy: filepath.Join(dir, "journal", "gen.jsonl"),
		Listing: filepath.Join(dir, "journal-gen.json"), IDOf: journalID, SegmentBytes: 1000}
}

func appendIDs(t *testing.T, j *Journal, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := j.Append(fmt.Sprint("p", i), journalLine(fmt.Sprint("p", i))); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 { // the engine commits every second, whatever came
			if err := j.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := j.Commit(); err != nil {
		t.Fatal(err)
	}
}

func hashesOf(from, to int) []uint64 {
	var hs []uint64
	for i := from; i < to; i++ {
		hs = append(hs, Hash(fmt.Sprint("p", i)))
	}
	return hs
}

func segmentNames(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, p := range JournalFiles(filepath.Join(dir, "journal"), "gen") {
		names = append(names, filepath.Base(p))
	}
	return names
}

// Segments roll at their size; one goes once every id in it is finished,
// never before; a finished run leaves no journal; Keep keeps all.
func TestJournalDeletesFinishedSegments(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			dir := t.TempDir()
			o := testJournalOptions(dir)
			o.Keep = keep
			j, err := OpenJournal(o)
			if err != nil {
				t.Fatal(err)
			}
			appendIDs(t, j, 0, 40) // about 130 bytes a line: 8 lines a segment
			all := segmentNames(t, dir)
			if len(all) < 4 {
				t.Fatalf("40 lines of 130 bytes in segments of 1000 bytes: %v", all)
			}
			// Every id but p3 is finished: the first segment stays.
			if err := j.Finished(slices.Delete(hashesOf(0, 20), 3, 4)); err != nil {
				t.Fatal(err)
			}
			got := segmentNames(t, dir)
			if keep && !slices.Equal(got, all) {
				t.Fatalf("keep: segments %v, had %v", got, all)
			}
			if !keep && (len(got) == 0 || got[0] != "00000.jsonl" || len(got) >= len(all)) {
				t.Fatalf("after finishing p0-p19 but p3: segments %v (had %v): want 00000 kept, the next finished ones gone", got, all)
			}
			if line, ok, err := j.Lookup("p3"); err != nil || ok {
				t.Fatalf("Lookup of a line appended since Open: %q %v %v", line, ok, err)
			}
			if err := j.Finished(append(hashesOf(3, 4), hashesOf(20, 40)...)); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			got = segmentNames(t, dir)
			if keep != (len(got) == len(all)) || (!keep && len(got) != 0) {
				t.Fatalf("every id finished, closed: segments %v (keep %v)", got, keep)
			}
		})
	}
}

// A resumed run finds the lines of earlier runs in every segment, reads an
// earlier pipe's single-file journal as the oldest segment, and continues
// numbering; lines of ids finished at open are not needed, and their
// segments go at once.
func TestJournalReopenLegacyAndLookup(t *testing.T) {
	dir := t.TempDir()
	o := testJournalOptions(dir)
	os.MkdirAll(filepath.Dir(o.Legacy), 0o755)
	legacy, err := openLookup(o.Legacy, journalID)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		legacy.Append(fmt.Sprint("p", i), journalLine(fmt.Sprint("p", i)))
	}
	if err := legacy.Commit(); err != nil {
		t.Fatal(err)
	}
	legacy.Close()

	j, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	appendIDs(t, j, 5, 30)
	j.Close()
	before := segmentNames(t, dir)
	if before[0] != "gen.jsonl" || len(before) < 3 {
		t.Fatalf("segments %v: want the legacy file first, then segments", before)
	}

	// p0-p4 (the legacy file) and p5-p15 (the first segment: committed every
	// 4 lines, rolled past 1000 bytes) were finished by then.
	done := map[uint64]bool{}
	for _, h := range hashesOf(0, 16) {
		done[h] = true
	}
	o.Done = func(h uint64) bool { return done[h] }
	j, err = OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if w := j.Warnings(); len(w) != 0 {
		t.Fatalf("warnings %v", w)
	}
	for _, id := range []string{"p16", "p22", "p29"} {
		line, ok, err := j.Lookup(id)
		if err != nil || !ok || !strings.Contains(string(line), `"id":"`+id+`"`) {
			t.Fatalf("Lookup(%s) = %q, %v, %v", id, line, ok, err)
		}
	}
	after := segmentNames(t, dir)
	if slices.Contains(after, "gen.jsonl") || slices.Contains(after, "00000.jsonl") {
		t.Fatalf("segments of finished ids kept: %v (had %v)", after, before)
	}
	appendIDs(t, j, 30, 31)
	if last := segmentNames(t, dir); last[len(last)-1] < before[len(before)-1] {
		t.Fatalf("numbering went back: %v after %v", last, before)
	}
}

// A segment removed or damaged by hand is noticed and named; the journal
// goes on with the rest, and a damaged segment is set aside, not deleted.
func TestJournalNoticesRemovedAndDamagedSegments(t *testing.T) {
	dir := t.TempDir()
	o := testJournalOptions(dir)
	j, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	appendIDs(t, j, 0, 30)
	j.Close()
	segs := JournalFiles(filepath.Join(dir, "journal"), "gen")
	if len(segs) < 3 {
		t.Fatalf("segments %v", segs)
	}
	os.Remove(segs[0])
	os.Truncate(segs[1], 10) // its index says more was committed

	j, err = OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	w := strings.Join(j.Warnings(), "\n")
	for _, want := range []string{
		"segment " + segs[0] + " (8 records) was removed by hand",
		"segment " + segs[1] + " is damaged",
		"set aside as " + segs[1] + ".damaged-",
		"generated again",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if _, ok, _ := j.Lookup("p29"); !ok {
		t.Error("the intact segments are no longer read")
	}
	if aside, _ := filepath.Glob(segs[1] + ".damaged-*"); len(aside) != 1 {
		t.Errorf("the damaged segment was not kept aside: %v", aside)
	}

	// The whole directory removed: the listing outside it still tells.
	j.Close()
	os.RemoveAll(filepath.Join(dir, "journal"))
	j, err = OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(j.Warnings(), "\n"); !strings.Contains(w, "was removed by hand") {
		t.Errorf("a removed journal directory went unnoticed: %q", w)
	}
	j.Close()
}

// A sealed segment takes no more lines, so it keeps none of the buffers
// appends reuse: a run that keeps its journal holds hundreds of them.
func TestJournalSealedSegmentLetsGoOfBuffers(t *testing.T) {
	j, err := OpenJournal(testJournalOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	appendIDs(t, j, 0, 40)
	if len(j.segs) < 3 {
		t.Fatalf("%d segments, want several", len(j.segs))
	}
	for _, s := range j.segs[:len(j.segs)-1] {
		if !s.sealed || s.log.pendHashes != nil || s.log.pendEnds != nil || s.log.line != nil {
			t.Errorf("sealed segment %s: sealed %v, pending lists cap %d/%d, line buffer cap %d; want nil", s.name, s.sealed, cap(s.log.pendHashes), cap(s.log.pendEnds), cap(s.log.line))
		}
	}
	if active := j.segs[len(j.segs)-1]; active.sealed {
		t.Errorf("the active segment %s is sealed", active.name)
	}
}

// A lookup under way (a resumed run reading a completion back from disk)
// holds up no append and no commit: the expensive stage's workers would
// otherwise queue behind it holding their completions. A sweep that
// closes a segment being read waits for the read.
func TestJournalAppendsDoNotWaitForLookups(t *testing.T) {
	dir := t.TempDir()
	o := testJournalOptions(dir)
	j, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	appendIDs(t, j, 0, 12)
	j.Close()
	if j, err = OpenJournal(o); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, ok, err := j.Lookup("p3"); !ok || err != nil {
		t.Fatalf("Lookup(p3) = %v, %v after a reopen", ok, err)
	}

	j.heldMu.RLock() // a lookup in progress
	appended := make(chan error, 1)
	go func() {
		for i := 12; i < 40; i++ {
			if err := j.Append(fmt.Sprint("p", i), journalLine(fmt.Sprint("p", i))); err != nil {
				appended <- err
				return
			}
			if err := j.Commit(); err != nil { // rolls segments: SegmentBytes is 1000
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	select {
	case err := <-appended:
		if err != nil {
			j.heldMu.RUnlock()
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		j.heldMu.RUnlock()
		t.Fatal("appends and commits waited for a lookup")
	}

	// Every id finished: the sweep removes the segments opened with lines,
	// but not while the lookup reads them.
	swept := make(chan error, 1)
	go func() { swept <- j.Finished(hashesOf(0, 40)) }()
	select {
	case err := <-swept:
		j.heldMu.RUnlock()
		t.Fatalf("a sweep closed segments under a lookup (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	j.heldMu.RUnlock()
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if _, ok, err := j.Lookup("p3"); ok || err != nil {
		t.Fatalf("Lookup(p3) = %v, %v after its segment was swept", ok, err)
	}
}
