package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// TokenFreqSuffix replaces an output's extension in the name of the
// loss-token counts written beside it (tokenFreqPath).
const TokenFreqSuffix = ".token_freq.json"

// tokenFreqPath is where the loss-token counts of the output at out go.
func tokenFreqPath(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + TokenFreqSuffix
}

// tokenFreq is the file of loss-token counts: how often each token id
// carries loss in the rows SpecForge trains on (each row cut at
// max_length, as the trainer cuts it). They are the counts EAGLE3's
// vocabulary mapping starts from (SpecForge specforge/data/preprocessing.py
// generate_vocab_mapping_file: a Counter of input_ids[loss_mask == 1] over
// the dataset, then process_token_dict_to_mappings), so the trainer needs
// no separate pass over the data to make them.
type tokenFreq struct {
	About      string          `json:"about"`
	Source     string          `json:"source"`
	MaxLength  int             `json:"max_length"`
	Rows       int64           `json:"rows"`
	LossTokens int64           `json:"loss_tokens"`
	Counts     map[int32]int64 `json:"counts"`
}

// tokenFreqNote is what the handoff's YAML says of the counts at path.
func tokenFreqNote(path string) string {
	return fmt.Sprintf("EAGLE3 vocabulary mapping without a second pass over the data: %s holds the\n"+
		"loss tokens' counts that specforge/data/preprocessing.py generate_vocab_mapping_file makes. In Python:\n"+
		"  counts = Counter({int(k): v for k, v in json.load(open(PATH))[\"counts\"].items()})\n"+
		"  d2t, t2d = process_token_dict_to_mappings(counts, draft_vocab_size, target_vocab_size)\n"+
		"  torch.save({\"d2t\": d2t, \"t2d\": t2d}, \"vocab_mapping.pt\")   # model.vocab_mapping_path", filepath.Base(path))
}

// writeTokenFreq counts the loss tokens of the committed rows of a
// specforge-layout output at out (id, input_ids, loss_mask per line) and
// writes them beside it; it returns the file written and, counted in the
// same pass, the figures of the memory note.
func writeTokenFreq(ctx context.Context, out string, maxLength int) (string, promptsFig, error) {
	var fig promptsFig
	_, size, err := commitlog.Committed(out)
	if err != nil {
		return "", fig, err
	}
	f, err := os.Open(out)
	if err != nil {
		return "", fig, err
	}
	defer f.Close()
	tf := tokenFreq{About: "loss-token counts of the rows, each cut at max_length: SpecForge generate_vocab_mapping_file's Counter",
		Source: filepath.Base(out), MaxLength: maxLength, Counts: map[int32]int64{}}
	sc := bufio.NewScanner(io.LimitReader(f, size))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	var row struct {
		InputIDs []int32         `json:"input_ids"`
		LossMask record.LossMask `json:"loss_mask"`
	}
	for line := 1; sc.Scan(); line++ {
		if line%4096 == 0 && ctx.Err() != nil {
			return "", fig, ctx.Err()
		}
		row.InputIDs, row.LossMask = row.InputIDs[:0], nil
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return "", fig, fmt.Errorf("%s:%d: %v", out, line, err)
		}
		n := min(len(row.InputIDs), len(row.LossMask))
		if maxLength > 0 {
			n = min(n, maxLength)
		}
		fig.rows, fig.tokens = fig.rows+1, fig.tokens+int64(n)
		for i := range n {
			if row.InputIDs[i] > 256 {
				fig.big++
			}
			if row.LossMask[i] == 1 {
				tf.Counts[row.InputIDs[i]]++
				tf.LossTokens++
			}
		}
		tf.Rows++
	}
	if err := sc.Err(); err != nil {
		return "", fig, err
	}
	b, err := json.Marshal(&tf)
	if err != nil {
		return "", fig, err
	}
	path := tokenFreqPath(out)
	return path, fig, commitlog.WriteFileAtomic(path, append(b, '\n'))
}
