package pipefile

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pipe-dev/pipe/internal/suggest"
)

// Trainer is the [trainer] table: the trainer that consumes the run's
// output, declared once. Stages read it through their config's trainer
// tags (pipeline's decodeConfig) instead of each repeating its keys.
type Trainer struct {
	// Name is the trainer ("specforge").
	Name string
	// Method is the draft model's training method: "eagle3" or "dflash".
	Method string
	// MaxLength is the tokens of a row the trainer keeps (SpecForge's
	// data.max_length: it keeps input_ids[:max_length]). 0: not given.
	MaxLength int
	// ChatTemplate is the trainer's name for the chat template
	// (SpecForge's data.chat_template, e.g. "qwen3.5"); "" when not given.
	ChatTemplate string
	// Pos is the [trainer] header; KeyPos each key's position.
	Pos    Pos
	KeyPos map[string]Pos
}

// TrainerKeys are [trainer]'s keys.
var TrainerKeys = []string{"name", "method", "max_length", "chat_template"}

// TrainerMethods are the methods [trainer] method takes.
var TrainerMethods = []string{"eagle3", "dflash"}

// KeyPosition is where key is set, or the [trainer] header.
func (t *Trainer) KeyPosition(key string) Pos {
	if p, ok := t.KeyPos[key]; ok {
		return p
	}
	return t.Pos
}

// Value is the value of [trainer] key k as a stage key of the same
// meaning takes it (an int or a string); ok is false when the table does
// not set it.
func (t *Trainer) Value(k string) (v any, ok bool) {
	if t == nil {
		return nil, false
	}
	if _, set := t.KeyPos[k]; !set {
		return nil, false
	}
	switch k {
	case "name":
		return t.Name, true
	case "method":
		return t.Method, true
	case "max_length":
		return t.MaxLength, true
	case "chat_template":
		return t.ChatTemplate, true
	}
	return nil, false
}

// parseTrainer reads [trainer].
func (fp *fileParser) parseTrainer() {
	raw, present := fp.doc["trainer"]
	if !present {
		return
	}
	table, ok := raw.(map[string]any)
	if !ok {
		fp.at(fp.pos.table("trainer", ""), "[trainer] must be a table, got %s", DescribeValue(raw))
		return
	}
	t := &Trainer{Pos: fp.pos.table("trainer", ""), KeyPos: map[string]Pos{}}
	for _, k := range slices.Sorted(maps.Keys(table)) {
		p := fp.pos.table("trainer", k)
		v := fp.interp(p, table[k])
		t.KeyPos[k] = p
		switch k {
		case "name":
			s, _ := v.(string)
			if s != "specforge" {
				fp.at(p, "[trainer]: name must be \"specforge\" (the trainer pipe knows the rules of), got %s", DescribeValue(v))
			}
			t.Name = s
		case "method":
			s, _ := v.(string)
			if !slices.Contains(TrainerMethods, s) {
				fp.at(p, "[trainer]: method must be one of %s, got %s%s", strings.Join(TrainerMethods, ", "), DescribeValue(v), suggest.DidYouMean(s, TrainerMethods))
			}
			t.Method = s
		case "max_length":
			n, isInt := v.(int64)
			if !isInt || n < 16 || n > 1<<22 {
				fp.at(p, "[trainer]: max_length must be the trainer's tokens per row, 16..4194304 (SpecForge's data.max_length), got %s", DescribeValue(v))
			}
			t.MaxLength = int(n)
		case "chat_template":
			s, isStr := v.(string)
			if !isStr || s == "" {
				fp.at(p, "[trainer]: chat_template must be the trainer's template name (SpecForge's data.chat_template, e.g. \"qwen3.5\"), got %s", DescribeValue(v))
			}
			t.ChatTemplate = s
		default:
			delete(t.KeyPos, k)
			fp.at(p, "[trainer]: unknown key %q; allowed: %s%s", k, strings.Join(TrainerKeys, ", "), suggest.DidYouMean(k, TrainerKeys))
		}
	}
	for _, k := range []string{"name", "max_length"} {
		if _, set := t.KeyPos[k]; !set {
			fp.at(t.Pos, "[trainer]: missing %s (%s)", k, map[string]string{
				"name":       `name = "specforge"`,
				"max_length": "max_length = N, the trainer's tokens per row (SpecForge's data.max_length)",
			}[k])
		}
	}
	if t.Method == "" {
		t.Method = "eagle3" // SpecForge's default method
	}
	fp.f.Trainer = t
}

func (t *Trainer) String() string {
	return fmt.Sprintf("%s %s, max_length %d", t.Name, t.Method, t.MaxLength)
}
