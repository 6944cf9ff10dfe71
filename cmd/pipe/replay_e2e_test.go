//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// The re-validation: a run against pipe sim, its servers stopped,
// then `pipe run FILE --from gen=RUN_DIR --set check.min_answer_length=N`.
// The replay needs no server and sends no request; it accepts exactly the
// completions that meet the new rule; a kill -9 in the middle and the same
// command again leave every id exactly once.
func TestReplayFromJournalWithoutServers(t *testing.T) {
	r := newCrashRig(t, "", 1500)
	// A finished run deletes its journal segments unless it keeps them;
	// this replay reads the journal (the one without it, the shards).
	src, _ := os.ReadFile(r.file)
	os.WriteFile(r.file, []byte(strings.Replace(string(src), `run_dir = "run"`, "run_dir = \"run\"\nkeep_journal = true", 1)), 0o644)
	r.finish()
	orig := filepath.Join(r.dir, "run")
	accepted := map[string]bool{}
	for _, rec := range readJSONL(t, filepath.Join(r.dir, "out", "train.jsonl")) {
		accepted[rec["id"].(string)] = true
	}
	if len(accepted) < r.prompts/2 {
		t.Fatalf("the original run accepted %d of %d", len(accepted), r.prompts)
	}
	urls := r.sim.URLs
	r.sim.Stop()
	for _, u := range urls {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(u, "http://"), time.Second); err == nil {
			c.Close()
			t.Fatalf("%s still accepts connections after the servers stopped", u)
		}
	}

	// The new rule, judged here with the real tokenizer: answers of at
	// least the median length among the accepted.
	tk, err := tokenize.Load(testenv.Qwen3Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	answerLen := map[string]int{}
	var lens []int
	files, err := commitlog.StageJournalFiles(orig, "gen")
	if err != nil || len(files) == 0 {
		t.Fatalf("journal of the original run: %v, %v", files, err)
	}
	for _, f := range files {
		if err := commitlog.EachCommitted(f, func(_ int, line []byte) error {
			var e struct {
				Port   string `json:"port"`
				Record struct {
					ID         string `json:"id"`
					Completion *struct {
						Answer string `json:"answer"`
					} `json:"completion"`
				} `json:"record"`
			}
			if err := json.Unmarshal(line, &e); err != nil {
				return err
			}
			if e.Record.Completion != nil {
				n := len(tk.Encode(e.Record.Completion.Answer))
				answerLen[e.Record.ID] = n
				if accepted[e.Record.ID] {
					lens = append(lens, n)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sort.Ints(lens)
	minLen := lens[len(lens)/2]
	want := map[string]bool{}
	for id := range accepted {
		if answerLen[id] >= minLen {
			want[id] = true
		}
	}
	if len(want) == len(accepted) || len(want) == 0 {
		t.Fatalf("min_answer_length %d keeps %d of %d: no move to see", minLen, len(want), len(accepted))
	}

	replay := []string{"--from", "gen=run", "--set", fmt.Sprintf("check.min_answer_length=%d", minLen), "--commit-every", "50ms"}
	dir := filepath.Join(r.dir, "run-from-gen")
	train := filepath.Join(dir, "out", "train.jsonl")

	// --dry-run and pipe graph show the replaced part, and do nothing.
	for _, args := range [][]string{
		append([]string{"run", "--dry-run", r.file}, replay...),
		{"graph", "--from", "gen=run", r.file},
	} {
		c := exec.Command(r.bin, args...)
		c.Dir = r.dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("pipe %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		for _, w := range []string{"replaced by --from gen=run: prompts, todo, gen", "gen (read-journal) reads run/journal/gen (1 files): no server is asked", "read-journal"} {
			if !strings.Contains(string(out), w) {
				t.Fatalf("pipe %s does not say %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		t.Logf("pipe %s:\n%s", strings.Join(args, " "), out)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the dry run made the replay's run directory")
	}

	// Kill -9 once some rows are committed, while the replay runs.
	cmd := r.start(replay...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if rows, _, _ := commitlog.Committed(train); rows > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replay committed no row in 2 minutes")
		}
		time.Sleep(2 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the replay ended before it was killed: make the test's run longer")
	}
	committedAtKill, _, _ := commitlog.Committed(train)
	if err := r.wait(r.start(replay...), 2*time.Minute); err != nil {
		t.Fatalf("the resumed replay: %v", err)
	}

	got := map[string]int{}
	for _, rec := range readJSONL(t, train) {
		got[rec["id"].(string)]++
	}
	rejected := map[string]int{}
	moved := 0
	for _, rec := range readJSONL(t, filepath.Join(dir, "out", "rejected.jsonl")) {
		id := rec["id"].(string)
		rejected[id]++
		if accepted[id] {
			if reason := rec["reject"].(map[string]any)["reason"]; reason != "answer_too_short" {
				t.Errorf("id %s: accepted before, now rejected as %v; want answer_too_short", id, reason)
			}
			moved++
		}
	}
	failed, _ := filepath.Glob(filepath.Join(dir, "failed", "*.jsonl"))
	dead, _ := filepath.Glob(filepath.Join(dir, "rejected", "*.jsonl"))
	for _, f := range append(failed, dead...) {
		for _, rec := range readJSONL(t, f) {
			rejected[rec["id"].(string)]++
		}
	}
	for id, n := range got {
		if n != 1 || rejected[id] != 0 {
			t.Fatalf("id %s: %d times accepted and %d times rejected, want exactly once", id, n, rejected[id])
		}
		if !want[id] {
			t.Errorf("id %s accepted, but its answer has %d tokens (min %d) or it was not accepted before", id, answerLen[id], minLen)
		}
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("id %s meets the rule (%d tokens) but was not accepted", id, answerLen[id])
		}
	}
	for id, n := range rejected {
		if n != 1 {
			t.Fatalf("id %s is rejected %d times", id, n)
		}
	}
	if len(got)+len(rejected) != len(answerLen)+countGenRejects(t, orig) {
		t.Fatalf("%d accepted + %d rejected in the replay, the original journal holds %d completions and %d rejects", len(got), len(rejected), len(answerLen), countGenRejects(t, orig))
	}
	if moved != len(accepted)-len(want) {
		t.Fatalf("%d moved from accepted to rejected, want %d", moved, len(accepted)-len(want))
	}
	// The replay's summary and pipe report A B show the move by reason.
	logText, _ := os.ReadFile(r.log.Name())
	wantMove := fmt.Sprintf("accepted → rejected answer_too_short: %s", thousandsOf(moved))
	if !strings.Contains(string(logText), "what changed: run → run-from-gen") || !strings.Contains(string(logText), wantMove) {
		t.Fatalf("the replay's summary does not say %q:\n%s", wantMove, tail(string(logText), 3000))
	}
	if i := strings.LastIndex(string(logText), "what changed"); i >= 0 {
		t.Logf("the replay's summary ends:\n%s", logText[i:])
	}
	rep := exec.Command(r.bin, "report", "--json", "run", "run-from-gen")
	rep.Dir = r.dir
	out, err := rep.Output()
	if err != nil {
		t.Fatalf("pipe report run run-from-gen: %v", err)
	}
	var cmp struct {
		Counts []struct {
			Verdict string
			A, B    int
		}
		Moves []struct {
			From, To string
			Count    int
			Examples []string
		}
	}
	if err := json.Unmarshal(out, &cmp); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range cmp.Moves {
		if m.From == "accepted" && m.To == "rejected answer_too_short" {
			found = true
			if m.Count != moved || len(m.Examples) != 3 {
				t.Fatalf("move %+v, want %d ids and 3 examples", m, moved)
			}
			for _, id := range m.Examples {
				if !accepted[id] || want[id] {
					t.Fatalf("example %s did not make that move", id)
				}
			}
		} else if m.From == "accepted" || m.To == "accepted" {
			t.Fatalf("move %+v: only accepted → answer_too_short can happen with a stricter answer rule", m)
		}
	}
	if !found {
		t.Fatalf("pipe report shows no move to answer_too_short:\n%s", out)
	}
	for _, c := range cmp.Counts {
		if c.Verdict == "accepted" && (c.A != len(accepted) || c.B != len(want)) {
			t.Fatalf("accepted %d → %d, want %d → %d", c.A, c.B, len(accepted), len(want))
		}
	}

	// pipe init revalidate writes the same replay as a file of its own,
	// which passes pipe check.
	for _, args := range [][]string{{"init", "revalidate", "--from", "run", "-o", "reval/revalidate.toml"}, {"check", "reval/revalidate.toml"}} {
		if args[0] == "init" {
			os.Mkdir(filepath.Join(r.dir, "reval"), 0o755)
		}
		c := exec.Command(r.bin, args...)
		c.Dir = r.dir
		if out, err := c.CombinedOutput(); err != nil {
			text, _ := os.ReadFile(filepath.Join(r.dir, "reval", "revalidate.toml"))
			t.Fatalf("pipe %s: %v\n%s\n%s", strings.Join(args, " "), err, out, text)
		}
	}
	text, _ := os.ReadFile(filepath.Join(r.dir, "reval", "revalidate.toml"))
	for _, w := range []string{`kind = "read-journal"`, `run_dir = "../run"`, `kind = "validate-thinking"`, `path = "../run-from-gen/out/train.jsonl"`, "# (in the run: prompts → todo → gen)"} {
		if !strings.Contains(string(text), w) {
			t.Fatalf("pipe init revalidate wrote no %q:\n%s", w, text)
		}
	}
	t.Logf("pipe init revalidate --from run:\n%s", text)

	// Without the journal (a segmented one is swept once every output
	// committed it) the replay reads the shards of the writer fed by gen.
	if err := os.Rename(filepath.Join(orig, "journal"), filepath.Join(r.dir, "journal-aside")); err != nil {
		t.Fatal(err)
	}
	fromShards := append(append([]string(nil), replay...), "--run-dir", "run-from-shards")
	if err := r.wait(r.start(fromShards...), 2*time.Minute); err != nil {
		t.Fatalf("the replay from the completions shards: %v", err)
	}
	logText, _ = os.ReadFile(r.log.Name())
	if !strings.Contains(string(logText), "what changed: run → run-from-shards") || !strings.Contains(string(logText), `stage "gen" (read-completions):`) {
		t.Fatalf("the replay from shards did not compare:\n%s", tail(string(logText), 3000))
	}
	shardAccepted := map[string]bool{}
	for _, rec := range readJSONL(t, filepath.Join(r.dir, "run-from-shards", "out", "train.jsonl")) {
		shardAccepted[rec["id"].(string)] = true
	}
	if len(shardAccepted) != len(want) {
		t.Fatalf("the replay from shards accepted %d, want %d", len(shardAccepted), len(want))
	}
	for id := range want {
		if !shardAccepted[id] {
			t.Fatalf("the replay from shards did not accept %s", id)
		}
	}

	t.Logf("replay of %d completions with min_answer_length %d: %d accepted (was %d), %d moved; %d rows committed at the kill",
		len(answerLen), minLen, len(got), len(accepted), moved, committedAtKill)
	if _, err := os.Stat(filepath.Join(dir, "journal", "gen.jsonl")); err == nil {
		t.Fatal("the replay journaled its reader as if it generated")
	}
}

func thousandsOf(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// countGenRejects counts the records the generate stage's journal holds on
// its rejected port.
func countGenRejects(t *testing.T, runDir string) int {
	n := 0
	commitlog.EachCommitted(filepath.Join(runDir, "journal", "gen.jsonl"), func(_ int, line []byte) error {
		if strings.HasPrefix(string(line), `{"port":"rejected"`) {
			n++
		}
		return nil
	})
	return n
}
