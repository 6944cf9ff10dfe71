package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/pipe-dev/pipe/internal/testrig/trainers"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
)

// trainRowsMain is `trainrows --max-length N FILE`, for the scripts
// (testdata/script/trainer_economy.txtar): it reads tokenize-and-mask's
// rows as write-jsonl's records and checks what a declared trainer
// promises of each one. No request asked for more than its row could
// train (prompt + the output bound recorded with the completion <=
// max_length); no row is longer than max_length; a completion kept though
// the length limit cut it (meta.cut_at_length) fills its row, and its
// row ends at its last generated token, with loss. It prints one line of
// counts, or the first broken row and exits 1.
func trainRowsMain() int {
	fs := flag.NewFlagSet("trainrows", flag.ContinueOnError)
	maxLength := fs.Int("max-length", 0, "the trainer's max_length")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 1 || *maxLength <= 0 {
		fmt.Fprintln(os.Stderr, "usage: trainrows --max-length N FILE")
		return 2
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainrows:", err)
		return 1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	var rows, cut, decoded, trained int
	for line := 1; sc.Scan(); line++ {
		var rec record.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			fmt.Fprintf(os.Stderr, "trainrows: line %d: %v\n", line, err)
			return 1
		}
		if err := checkTrainRow(&rec, *maxLength); err != nil {
			fmt.Fprintf(os.Stderr, "trainrows: line %d (id %s): %v\n", line, rec.ID, err)
			return 1
		}
		rows++
		if rec.Meta[recordline.MetaCutAtLength] == true {
			cut++
		}
		decoded += rec.Completion.CompletionTokens
		trained += rec.Tokens.NumLossTokens
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "trainrows:", err)
		return 1
	}
	fmt.Printf("rows %d, cut at length %d, decoded per trained %.2f\n", rows, cut, float64(decoded)/float64(max(trained, 1)))
	return 0
}

func checkTrainRow(rec *record.Record, maxLength int) error {
	c, t := rec.Completion, rec.Tokens
	if c == nil || t == nil {
		return fmt.Errorf("no completion or no tokens")
	}
	bound, _ := c.Request["max_new_tokens"].(float64)
	if bound == 0 {
		bound, _ = c.Request["max_tokens"].(float64)
	}
	if prompt := len(c.PromptIDs); prompt+int(bound) > maxLength {
		return fmt.Errorf("the request asked for %d tokens after a %d-token prompt: past max_length %d", int(bound), prompt, maxLength)
	}
	n := len(t.InputIDs)
	if n > maxLength || n != len(t.LossMask) || n != t.NumTokens {
		return fmt.Errorf("%d input ids, %d mask values, num_tokens %d, max_length %d", n, len(t.LossMask), t.NumTokens, maxLength)
	}
	if rec.Meta[recordline.MetaCutAtLength] != true {
		if c.FinishReason != "stop" {
			return fmt.Errorf("finish_reason %q in a row not marked cut_at_length", c.FinishReason)
		}
		return nil
	}
	if c.FinishReason != "length" {
		return fmt.Errorf("cut_at_length with finish_reason %q", c.FinishReason)
	}
	if want := min(maxLength, len(c.PromptIDs)+len(c.OutputIDs)); n != want {
		return fmt.Errorf("a row cut at length has %d tokens, want %d (prompt %d + output %d, max_length %d)", n, want, len(c.PromptIDs), len(c.OutputIDs), maxLength)
	}
	if last := len(c.OutputIDs) - 1 - (len(c.PromptIDs) + len(c.OutputIDs) - n); t.LossMask[n-1] != 1 || int(t.InputIDs[n-1]) != c.OutputIDs[last] {
		return fmt.Errorf("the row does not end at a generated token with loss: last id %d (mask %d), output id %d", t.InputIDs[n-1], t.LossMask[n-1], c.OutputIDs[last])
	}
	return nil
}

// specForgeConfigMain is `specforgeconfig FILE`: whether FILE, a run
// config (or its data: block), passes SpecForge's schema rules
// (trainers.CheckSpecForgeConfigYAML, after specforge/config/schema.py).
func specForgeConfigMain() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: specforgeconfig FILE")
		return 2
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "specforgeconfig:", err)
		return 1
	}
	if errs := trainers.CheckSpecForgeConfigYAML(b); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "specforgeconfig:", e)
		}
		return 1
	}
	fmt.Println("specforgeconfig: ok")
	return 0
}
