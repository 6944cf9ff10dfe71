package commitlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/diskdamage"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// entryLine is a journal line as the engine writes it: a completion with
// its output ids, its checksum first.
func entryLine(t testing.TB, id string) []byte {
	t.Helper()
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = 1000 + i*37
	}
	line, err := AppendJournalEntry(nil, JournalEntry{Port: "out", Record: &record.Record{ID: id,
		Completion: &record.Completion{Reasoning: "x", Answer: "answer of " + id, OutputIDs: ids}}})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// A flipped digit inside output_ids still parses; the checksum catches it.
func TestJournalChecksumCatchesAFlippedDigit(t *testing.T) {
	line := entryLine(t, "p1")
	if e, err := ParseJournalEntry(line); err != nil || e.Record.ID != "p1" || len(e.Record.Completion.OutputIDs) != 40 {
		t.Fatalf("a whole line: %+v, %v", e, err)
	}
	i := bytes.Index(line, []byte(`"output_ids":[1000,1037`)) + len(`"output_ids":[1000,10`)
	bad := bytes.Clone(line)
	bad[i] = '4' // 1037 -> 1047: still JSON, still a journal entry
	var e JournalEntry
	if err := jsonUnmarshal(bad, &e); err != nil {
		t.Fatalf("the flipped line should still parse as JSON: %v", err)
	}
	if _, err := ParseJournalEntry(bad); !errors.Is(err, errJournalChecksum) {
		t.Fatalf("ParseJournalEntry of a flipped digit = %v, want errJournalChecksum", err)
	}
	if _, err := JournalEntryID(bad); !errors.Is(err, errJournalChecksum) {
		t.Fatalf("JournalEntryID of a flipped digit = %v, want errJournalChecksum", err)
	}
	// A line of an earlier pipe, without a checksum, is read as it is.
	old := []byte(`{"port":"out","record":{"id":"p2"}}`)
	if e, err := ParseJournalEntry(old); err != nil || e.Record.ID != "p2" {
		t.Fatalf("a line without a checksum: %+v, %v", e, err)
	}
}

// damages are the disk's faults, sized for a small segment.
var damages = []diskdamage.Damage{diskdamage.RandomBytes(100), diskdamage.Zeros(512, false), diskdamage.Cut(700), diskdamage.CopyBlock(100, 900)}

// Each kind of damage, in the part of a segment whose prompts are finished
// and in the part whose prompts are not: the journal opens, names what it
// set aside, keeps every readable entry before and after the damage, and
// says which unfinished prompts are to be generated again, and a second
// open finds nothing more.
func TestJournalSetsDamageAsideAndKeepsTheRest(t *testing.T) {
	const n = 200
	for _, part := range []string{"finished", "unfinished"} {
		for _, dmg := range damages {
			t.Run(part+"/"+dmg.Name, func(t *testing.T) {
				dir := t.TempDir()
				o := testJournalOptions(dir)
				o.IDOf, o.SegmentBytes = JournalEntryID, 1<<30
				j, err := OpenJournal(o)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					id := fmt.Sprintf("p%03d", i)
					if err := j.Append(id, entryLine(t, id)); err != nil {
						t.Fatal(err)
					}
					if i%10 == 9 {
						if err := j.Commit(); err != nil {
							t.Fatal(err)
						}
					}
				}
				j.Close()
				seg := JournalFiles(filepath.Join(dir, "journal"), "gen")[0]
				data, _ := os.ReadFile(seg)
				// The first half is finished (in every output), the rest not.
				finished := map[uint64]bool{}
				for i := range n / 2 {
					finished[Hash(fmt.Sprintf("p%03d", i))] = true
				}
				o.Done = func(h uint64) bool { return finished[h] }
				at := len(data) * 30 / 100
				if part == "unfinished" {
					at = len(data) * 70 / 100
				}
				rng := rand.New(rand.NewPCG(1, 2))
				if err := os.WriteFile(seg, dmg.Do(data, at, rng), 0o644); err != nil {
					t.Fatal(err)
				}

				j, err = OpenJournal(o)
				if err != nil {
					t.Fatalf("a damaged segment stopped the journal: %v", err)
				}
				w := strings.Join(j.Warnings(), "\n")
				for _, want := range []string{"segment " + seg + " is damaged", "set aside as " + seg + ".damaged-", "readable entries are kept"} {
					if !strings.Contains(w, want) {
						t.Errorf("warnings lack %q:\n%s", want, w)
					}
				}
				if aside, _ := filepath.Glob(seg + ".damaged-*"); len(aside) != 1 {
					t.Errorf("the damaged file was not kept aside: %v", aside)
				}
				var kept, lost int
				for i := range n {
					id := fmt.Sprintf("p%03d", i)
					line, ok, err := j.Lookup(id)
					if err != nil {
						t.Fatalf("lookup %s: %v", id, err)
					}
					if !ok {
						if i >= n/2 && !j.Lost(id) {
							t.Errorf("%s is neither kept nor named lost: it would be generated again unseen", id)
						}
						lost++
						continue
					}
					if e, err := ParseJournalEntry(line); err != nil || e.Record.ID != id {
						t.Fatalf("lookup %s gave a damaged or wrong line: %v", id, err)
					}
					kept++
				}
				if lost == 0 || lost > 12 {
					t.Errorf("%d entries lost to %s; want a few (those the damage touched)", lost, dmg.Name)
				}
				// Entries on both sides of the damage are read.
				for _, id := range []string{"p000", "p199"} {
					if _, ok, _ := j.Lookup(id); !ok && dmg.Name != "duplicated-block" {
						t.Errorf("%s, far from the damage, is lost", id)
					}
				}
				if part == "unfinished" && !strings.Contains(w, "generated again") {
					t.Errorf("lost unfinished prompts are not said to be generated again:\n%s", w)
				}
				if part == "finished" && strings.Contains(w, "generated again") {
					t.Errorf("only finished prompts lost entries, yet the warning speaks of generating again:\n%s", w)
				}
				seen := map[string]bool{}
				EachCommitted(seg, func(_ int, line []byte) error {
					id, _ := JournalEntryID(line)
					if seen[id] {
						t.Errorf("the rewritten segment holds %s twice", id)
					}
					seen[id] = true
					return nil
				})
				// It goes on: appends after the repair, then a clean reopen.
				if err := j.Append("p999", entryLine(t, "p999")); err != nil {
					t.Fatal(err)
				}
				if err := errors.Join(j.Commit(), j.Close()); err != nil {
					t.Fatal(err)
				}
				j, err = OpenJournal(o)
				if err != nil {
					t.Fatal(err)
				}
				defer j.Close()
				if w := j.Warnings(); len(w) > 0 {
					t.Errorf("the repaired journal warns again: %q", w)
				}
				if _, ok, _ := j.Lookup("p999"); !ok {
					t.Error("the entry appended after the repair is gone")
				}
				t.Logf("%s in the %s part: %d kept, %d lost", dmg.Name, part, kept, lost)
			})
		}
	}
}

// A segment all of whose prompts are finished is not read at open (a
// journal kept for audit may hold a whole run): its damage is found only
// if one of its entries is looked up, and that entry reads as damaged.
func TestJournalReadsOnlySegmentsThatMatter(t *testing.T) {
	dir := t.TempDir()
	o := testJournalOptions(dir)
	o.IDOf, o.Keep = JournalEntryID, true
	j, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		id := fmt.Sprint("p", i)
		if err := j.Append(id, entryLine(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	j.Commit()
	j.Close()
	seg := JournalFiles(filepath.Join(dir, "journal"), "gen")[0]
	data, _ := os.ReadFile(seg)
	i := bytes.Index(data, []byte(`answer of p3`)) + len("answer of p")
	data[i] = '8'
	os.WriteFile(seg, data, 0o644)
	o.Done = func(uint64) bool { return true }
	if j, err = OpenJournal(o); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if w := j.Warnings(); len(w) > 0 {
		t.Errorf("a finished segment was read at open: %q", w)
	}
	line, ok, err := j.Lookup("p3")
	if err != nil || !ok {
		t.Fatalf("lookup: %v %v", ok, err)
	}
	if _, err := ParseJournalEntry(line); !errors.Is(err, errJournalChecksum) {
		t.Fatalf("the changed entry reads as %v, want errJournalChecksum", err)
	}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Damage past the index (entries a killed process wrote after the last
// commit): the entries after it are kept too, not cut as a torn tail, and
// a prompt whose id is still legible in the damaged entry is named lost.
func TestJournalDamagePastTheIndex(t *testing.T) {
	dir := t.TempDir()
	o := testJournalOptions(dir)
	o.IDOf, o.SegmentBytes = JournalEntryID, 1<<30
	j, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		id := fmt.Sprintf("p%02d", i)
		if err := j.Append(id, entryLine(t, id)); err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			j.Commit() // p10 … p29 are past the index
		}
	}
	j.Close()
	seg := JournalFiles(filepath.Join(dir, "journal"), "gen")[0]
	data, _ := os.ReadFile(seg)
	i := bytes.Index(data, []byte(`"answer":"answer of p20"`))
	copy(data[i+2:], "XXXX") // a changed key: still JSON, but not what was written
	os.WriteFile(seg, data, 0o644)

	if j, err = OpenJournal(o); err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if w := strings.Join(j.Warnings(), "\n"); !strings.Contains(w, "1 prompts whose completions were lost") {
		t.Errorf("warnings: %s", w)
	}
	if !j.Lost("p20") {
		t.Error("p20, legible in its damaged entry, is not named lost")
	}
	for _, id := range []string{"p19", "p21", "p29"} {
		if _, ok, _ := j.Lookup(id); !ok {
			t.Errorf("%s, past the index and undamaged, was cut", id)
		}
	}
}

// BenchmarkJournalOpenReadsSegment is the cost a start pays to read whole a
// segment holding unfinished prompts: a full 64 MiB segment of completions
// of 2,000 output ids each (a reasoning completion's size), none finished.
func BenchmarkJournalOpenReadsSegment(b *testing.B) {
	dir := b.TempDir()
	o := testJournalOptions(dir)
	o.IDOf, o.SegmentBytes = JournalEntryID, 1<<30
	j, err := OpenJournal(o)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int, 2000)
	for i := range ids {
		ids[i] = 1000 + i*37%150000
	}
	var size int64
	for i := 0; size < 64<<20; i++ {
		id := fmt.Sprintf("p%07d", i)
		line, err := AppendJournalEntry(nil, JournalEntry{Port: "out", Record: &record.Record{ID: id,
			Completion: &record.Completion{Reasoning: strings.Repeat("thinking ", 600), Answer: "answer", OutputIDs: ids}}})
		if err != nil {
			b.Fatal(err)
		}
		j.Append(id, line)
		size += int64(len(line) + 1)
	}
	j.Commit()
	j.Close()
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		j, err := OpenJournal(o)
		if err != nil || len(j.Warnings()) > 0 {
			b.Fatal(err, j.Warnings())
		}
		j.Close()
	}
}

// JournalEntryID reads a checksummed line's id without decoding the line:
// it must give what decoding gives, for any id.
func TestJournalEntryIDFastPath(t *testing.T) {
	for _, id := range []string{"p1", `quote"inside`, `back\slash`, "tab\there", "ünïcode ✓", "<think>&", `\"`, "x\u2028y"} {
		line, err := AppendJournalEntry(nil, JournalEntry{Port: "rejected", Record: &record.Record{ID: id, Meta: map[string]any{"id": "not this"}}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := JournalEntryID(line)
		e, perr := ParseJournalEntry(line)
		if err != nil || perr != nil || got != id || e.Record.ID != id {
			t.Errorf("id %q: JournalEntryID = %q, %v; decoded %v", id, got, err, perr)
		}
	}
}
