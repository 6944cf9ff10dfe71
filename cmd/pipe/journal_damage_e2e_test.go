//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/diskdamage"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
)

// journalDamages are the disk's faults, sized for a segment of megabytes:
// a bad sector's random bytes, a torn page of zeros, a lost block, a
// misdirected write.
var journalDamages = []diskdamage.Damage{diskdamage.RandomBytes(100), diskdamage.Zeros(4096, true), diskdamage.Cut(3000), diskdamage.CopyBlock(100, 4096)}

// A journal damaged while pipe is stopped, as a bad sector, a torn page, a
// cut or a misdirected write leaves it, in the part of the segment whose
// prompts are in every output and in the part whose prompts are not: the
// same command finishes with exit 0, every id exactly once in every
// output, the warning names what was set aside, and the report counts the
// prompts generated again (as many as the warning said).
func TestJournalDamageThenResume(t *testing.T) {
	for _, dmg := range journalDamages {
		t.Run(dmg.Name, func(t *testing.T) {
			r := newCrashRig(t, "", 20000)
			cmd := r.start("--commit-every", "1s")
			seg := r.waitForJournal(cmd, 200, 200)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()

			finishedAt, unfinishedAt := r.journalParts(seg)
			data, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
			// The later offset first, so a cut leaves the earlier one where it was.
			data = dmg.Do(data, unfinishedAt, rng)
			data = dmg.Do(data, finishedAt, rng)
			if err := os.WriteFile(seg, data, 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(r.log, "=== %s written at bytes %d (finished part) and %d (unfinished part) of %s\n", dmg.Name, finishedAt, unfinishedAt, seg)
			logStart, _ := r.log.Seek(0, 1)

			r.finish()
			r.check()
			out, _ := os.ReadFile(r.log.Name())
			said := string(out[logStart:])
			for _, want := range []string{"segment " + seg + " is damaged", "set aside as " + seg + ".damaged-",
				"lost entries were of prompts already in every output"} { // the finished part's damage, seen too
				if !strings.Contains(said, want) {
					t.Fatalf("the resumed run does not say %q:\n%s", want, tail(said, 3000))
				}
			}
			if aside, _ := filepath.Glob(seg + ".damaged-*"); len(aside) != 1 {
				t.Fatalf("the damaged segment is not kept aside: %v", aside)
			}
			lost := 0
			if m := regexp.MustCompile(`(\d+) prompts whose completions were lost are generated again`).FindStringSubmatch(said); m != nil {
				lost, _ = strconv.Atoi(m[1])
			}
			if lost == 0 {
				t.Fatalf("damage in the unfinished part lost no prompt, or the warning does not count them:\n%s", tail(said, 3000))
			}
			var rep struct {
				Redone map[string]int64 `json:"redone_after_journal_damage"`
			}
			js, err := exec.Command(r.bin, "report", "--json", filepath.Join(r.dir, "run")).Output()
			if err != nil {
				t.Fatalf("pipe report: %v", err)
			}
			if err := json.Unmarshal(js, &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Redone["gen"] != int64(lost) {
				t.Fatalf("the report counts %d prompts generated again after the damage; the warning said %d", rep.Redone["gen"], lost)
			}
			text, _ := exec.Command(r.bin, "report", filepath.Join(r.dir, "run")).Output()
			if want := fmt.Sprintf("journal damage: gen did %d record", lost); !strings.Contains(string(text), want) {
				t.Fatalf("pipe report lacks %q:\n%s", want, text)
			}
			t.Logf("%s: %d prompts generated again", dmg.Name, lost)
		})
	}
}

// waitForJournal waits until the run's journal holds at least finished
// entries of prompts in every output and unfinished ones of prompts not
// yet, and returns the segment holding them.
func (r *crashRig) waitForJournal(cmd *exec.Cmd, finished, unfinished int) string {
	r.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if n, _ := commitlog.CountIDs(filepath.Join(r.dir, "run", "done.ids")); n < int64(finished) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		segs := commitlog.JournalFiles(filepath.Join(r.dir, "run", "journal"), "gen")
		if len(segs) > 0 {
			seg := segs[len(segs)-1]
			f, u := r.journalCounts(seg)
			if f >= finished && u >= unfinished {
				return seg
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	r.t.Fatal("the journal never held both parts (did the run end first?)")
	return ""
}

// journalLinesOf returns the committed lines of a segment (those its
// index names: a damaged one among them is known by its id's hash) with
// their offsets and whether their ids are finished (in done.ids).
func (r *crashRig) journalLinesOf(seg string) (offs []int, finished []bool) {
	r.t.Helper()
	done := map[uint64]bool{}
	hs, _ := commitlog.ReadIDLog(filepath.Join(r.dir, "run", "done.ids"))
	for _, h := range hs {
		done[h] = true
	}
	data, _ := os.ReadFile(seg)
	_, committed, _ := commitlog.Committed(seg)
	data = data[:min(int64(len(data)), committed)]
	off := 0
	for {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return offs, finished
		}
		id, err := commitlog.JournalEntryID(data[off : off+nl])
		if err == nil {
			offs = append(offs, off)
			finished = append(finished, done[commitlog.Hash(id)])
		}
		off += nl + 1
	}
}

func (r *crashRig) journalCounts(seg string) (finished, unfinished int) {
	_, fin := r.journalLinesOf(seg)
	for _, f := range fin {
		if f {
			finished++
		} else {
			unfinished++
		}
	}
	return finished, unfinished
}

// journalParts returns an offset in the middle of the segment's finished
// entries and one in the middle of its unfinished ones.
func (r *crashRig) journalParts(seg string) (finishedAt, unfinishedAt int) {
	r.t.Helper()
	offs, fin := r.journalLinesOf(seg)
	var f, u []int
	for i, off := range offs {
		if fin[i] {
			f = append(f, off)
		} else {
			u = append(u, off)
		}
	}
	if len(f) == 0 || len(u) == 0 {
		r.t.Fatalf("segment %s: %d finished and %d unfinished entries", seg, len(f), len(u))
	}
	finishedAt, unfinishedAt = f[len(f)/2]+20, u[len(u)/2]+20
	if finishedAt > unfinishedAt {
		r.t.Fatalf("the finished entries (at %d) come after the unfinished ones (at %d)", finishedAt, unfinishedAt)
	}
	return finishedAt, unfinishedAt
}

// An output damaged while pipe is stopped, as a disk does it: its index
// (a bad header) is mended at the next start from the output's lines; a
// torn page inside its committed lines, which only reading them shows,
// fails that start's end verification with exit 1 and a word of what the
// next does, and the next start reads the output whole, sets the damage
// aside and writes the lost rows again. Each id ends exactly once.
func TestOutputDamageThenResume(t *testing.T) {
	for _, what := range []string{"index", "data"} {
		t.Run(what, func(t *testing.T) {
			r := newCrashRig(t, "", 20000)
			cmd := r.start()
			train := filepath.Join(r.dir, "out", "train.jsonl")
			deadline := time.Now().Add(2 * time.Minute)
			for rows, _, _ := commitlog.Committed(train); rows < 2000; rows, _, _ = commitlog.Committed(train) {
				if time.Now().After(deadline) {
					t.Fatal("no 2000 rows committed within 2 minutes")
				}
				time.Sleep(20 * time.Millisecond)
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			_, committed, _ := commitlog.Committed(train)
			f, err := os.OpenFile(map[string]string{"index": commitlog.IndexPath(train), "data": train}[what], os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			at := int64(0)
			if what == "data" {
				at = committed / 2 &^ 4095
			}
			f.WriteAt(make([]byte, 4096), at) // a torn page
			f.Close()
			fmt.Fprintf(r.log, "=== a page of zeros written at byte %d of the %s of %s\n", at, what, train)

			next := r.start()
			err = r.wait(next, 4*time.Minute)
			out, _ := os.ReadFile(r.log.Name())
			if what == "data" {
				// Only reading the lines shows it: the end's verification does.
				if code := exitCode(next); code != exitFailed {
					t.Fatalf("the start after the damage: exit %d, want %d:\n%s", code, exitFailed, tail(string(out), 3000))
				}
				next = r.start()
				err = r.wait(next, 4*time.Minute)
				out, _ = os.ReadFile(r.log.Name())
				if !strings.Contains(string(out), "the last start found outputs not as committed") {
					t.Fatalf("the start after a failed verification does not say it reads the outputs whole:\n%s", tail(string(out), 3000))
				}
			}
			if err != nil {
				t.Fatalf("the resumed run: %v\n%s", err, tail(string(out), 3000))
			}
			for _, want := range []string{train + " was damaged", "set aside as " + train + ".damaged-"} {
				if !strings.Contains(string(out), want) {
					t.Fatalf("the runs do not say %q:\n%s", want, tail(string(out), 3000))
				}
			}
			r.check()
		})
	}
}
