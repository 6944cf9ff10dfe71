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
		if err := t.set(k, fp.interp(p, table[k]), p); err != nil {
			fp.at(p, "[trainer]: %v", err)
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

// set sets key k to v, given at p; the error says what k takes.
func (t *Trainer) set(k string, v any, p Pos) error {
	switch k {
	case "name":
		s, _ := v.(string)
		t.Name = s
		if s != "specforge" {
			return fmt.Errorf("name must be \"specforge\" (the trainer pipe knows the rules of), got %s", DescribeValue(v))
		}
	case "method":
		s, _ := v.(string)
		t.Method = s
		if !slices.Contains(TrainerMethods, s) {
			return fmt.Errorf("method must be one of %s, got %s%s", strings.Join(TrainerMethods, ", "), DescribeValue(v), suggest.DidYouMean(s, TrainerMethods))
		}
	case "max_length":
		n, isInt := v.(int64)
		t.MaxLength = int(n)
		if !isInt || n < 16 || n > 1<<22 {
			return fmt.Errorf("max_length must be the trainer's tokens per row, 16..4194304 (SpecForge's data.max_length), got %s", DescribeValue(v))
		}
	case "chat_template":
		s, isStr := v.(string)
		t.ChatTemplate = s
		if !isStr || s == "" {
			return fmt.Errorf("chat_template must be the trainer's template name (SpecForge's data.chat_template, e.g. \"qwen3.5\"), got %s", DescribeValue(v))
		}
	default:
		return fmt.Errorf("unknown key %q; allowed: %s%s", k, strings.Join(TrainerKeys, ", "), suggest.DidYouMean(k, TrainerKeys))
	}
	t.KeyPos[k] = p
	return nil
}

// setTrainerKey applies --set trainer.KEY=v, given at p, to the file's
// [trainer].
func (f *File) setTrainerKey(key string, v any, p Pos) error {
	if f.Trainer == nil {
		return fmt.Errorf("the file has no [trainer] to set %s in: declare the trainer there (name, method, max_length, chat_template)", key)
	}
	return f.Trainer.set(key, v, p)
}

func (t *Trainer) String() string {
	return fmt.Sprintf("%s %s, max_length %d", t.Name, t.Method, t.MaxLength)
}
