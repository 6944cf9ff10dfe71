package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/commitlog"
	"github.com/pipe-dev/pipe/pipeline/record/recordline"
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
	tf := tokenFreq{About: "loss-token counts of the rows, each cut at max_length: SpecForge generate_vocab_mapping_file's Counter",
		Source: filepath.Base(out), MaxLength: maxLength, Counts: map[int32]int64{}}
	err := eachCommittedLine(ctx, out, func(n int, line []byte) error {
		if !recordline.EachInputID(line, maxLength, func(id int, loss bool) {
			fig.tokens++
			if id > 256 {
				fig.big++
			}
			if loss {
				tf.Counts[int32(id)]++
				tf.LossTokens++
			}
		}) {
			return fmt.Errorf("%s:%d: not a row of the specforge layout (no input_ids list)", out, n)
		}
		fig.rows++
		tf.Rows++
		return nil
	})
	if err != nil {
		return "", fig, err
	}
	b, err := json.Marshal(&tf)
	if err != nil {
		return "", fig, err
	}
	path := tokenFreqPath(out)
	return path, fig, commitlog.WriteFileAtomic(path, append(b, '\n'))
}
