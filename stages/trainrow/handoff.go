package trainrow

import (
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The handoff to SpecForge: the data: block of a run config (`specforge
// train --config run.yaml`, docs/basic_usage/training.md) that loads one
// output of a trainer layout. Rules from SpecForge a6b6b023:
//   - specforge/config/schema.py DataConfig: exactly one data source;
//     prompts_path is "already-tokenized JSONL records", train_data_path
//     "raw conversation JSON/JSONL"; unknown fields are errors
//     (StrictConfigModel, extra="forbid"); chat_template defaults to
//     "llama3", max_length to 2048, so both are always written.
//   - specforge/training/assembly.py _prepare_prompts: either path goes to
//     prompt_builder.py prepare_prompt_tasks with data.chat_template,
//     data.max_length and data.is_preformatted; the pre-tokenized route
//     never reads is_preformatted or the template.
//   - training.md "Launch a run": paths are resolved from the current
//     working directory, so the path written is absolute.

// HandoffSuffix replaces an output's extension in its handoff file's name:
// OUT.jsonl → OUT.specforge.yaml, beside it. An output of a trainer
// layout is one file (SpecForge reads one, prompt_builder.py
// _iter_records), never a directory HF datasets would list.
const HandoffSuffix = ".specforge.yaml"

// HandoffPath is where the data: block of the output at out is written.
func HandoffPath(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + HandoffSuffix
}

// DataBlock is the part of SpecForge's DataConfig a handoff sets.
type DataBlock struct {
	// TrainDataPath or PromptsPath: the output, absolute; exactly one.
	TrainDataPath string `json:"train_data_path,omitempty"`
	PromptsPath   string `json:"prompts_path,omitempty"`
	MaxLength     int    `json:"max_length"`
	ChatTemplate  string `json:"chat_template,omitempty"`
	// IsPreformatted is false for the conversations layout (rows of
	// messages, rendered at train time), absent for the pre-tokenized one.
	IsPreformatted *bool `json:"is_preformatted,omitempty"`
}

// NewDataBlock is the block that loads path, an output of layout
// (SpecForge or Conversations), for a trainer with maxLength and
// chatTemplate ("" leaves SpecForge's default, which Notes names).
func NewDataBlock(layout, path string, maxLength int, chatTemplate string) (DataBlock, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return DataBlock{}, err
	}
	d := DataBlock{MaxLength: maxLength, ChatTemplate: chatTemplate}
	switch layout {
	case SpecForge:
		d.PromptsPath = abs
	case Conversations:
		d.TrainDataPath = abs
		no := false
		d.IsPreformatted = &no
	default:
		return DataBlock{}, fmt.Errorf("layout %q has no SpecForge data source (want %s or %s)", layout, SpecForge, Conversations)
	}
	return d, nil
}

// YAML is the handoff file: comments (each line prefixed "# "), then
// data: with the block. sigs.k8s.io/yaml writes it (go-yaml v2 quotes
// any string YAML 1.1 would read as another type, as PyYAML's safe_load
// does).
func (d DataBlock) YAML(comments []string) ([]byte, error) {
	body, err := yaml.Marshal(map[string]DataBlock{"data": d})
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, c := range comments {
		for _, line := range strings.Split(c, "\n") {
			b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
		}
	}
	b.Write(body)
	return []byte(b.String()), nil
}

// Python's cost of the pre-tokenized route, which holds every row as
// lists of ints (prompt_builder.py _materialize_prompt_tasks appends each
// row's {"payload": {"input_ids": [...], "loss_mask": [...]}} to one
// list). In 64-bit CPython 3: a list slot is an 8-byte pointer, and
// input_ids[:max_length] allocates exactly its length (list_slice); an int
// object above 256 is 28 bytes (sys.getsizeof(300) == 28), allocated in
// pymalloc's 32-byte size class, one per token since json.loads makes a
// new int for each number; -5..256 are shared small ints (0 and 1 of the
// mask cost their slot only). A row's two lists, two dicts and their
// headers take about 600 bytes (sys.getsizeof: list 56, dict with one or
// two keys 184; the payload's key strings are shared).
const (
	pyListSlot  = 8
	pyIntObject = 32
	pyRowFixed  = 600
)

// PromptsMemory is the Python heap the pre-tokenized route needs to hold
// rows of tokens in all (each row cut to max_length before), of which
// bigIDs are token ids above 256 (an object each; the rest are shared).
func PromptsMemory(rows, tokens, bigIDs int64) int64 {
	return rows*pyRowFixed + tokens*2*pyListSlot + bigIDs*pyIntObject
}
