package stages

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/pipe-dev/pipe/pipeline"
)

// The model a run's servers serve against the tokenizer its answers are
// tokenized with: a generate stage records the model its servers report
// once they are ready (Open); a tokenize stage, opened after it, compares
// that with its tokenizer directory and warns when they look like two
// models (meta-llama/Llama-3.1-8B answers tokenized with a Qwen3 template).
// It is a warning: a local checkpoint path names no family.

// servedModels are the models generate stages reported, by stage id.
type servedModels struct {
	mu sync.Mutex
	by map[string]string
}

func servedModelsOf(env *pipeline.Env) *servedModels {
	if env == nil || env.Resources == nil {
		return nil
	}
	v, err := env.Resources.Get("served-models", func() (any, func() error, error) {
		return &servedModels{by: map[string]string{}}, nil, nil
	})
	if err != nil {
		return nil
	}
	return v.(*servedModels)
}

// recordServedModel notes that stage's servers serve model.
func recordServedModel(env *pipeline.Env, stage, model string) {
	if sm := servedModelsOf(env); sm != nil && model != "" {
		sm.mu.Lock()
		sm.by[stage] = model
		sm.mu.Unlock()
	}
}

// warnServedModel writes a notice for every recorded served model that
// does not look like the model of the tokenizer in dir.
func warnServedModel(env *pipeline.Env, dir string) {
	sm := servedModelsOf(env)
	if sm == nil || env.Notice == nil {
		return
	}
	sm.mu.Lock()
	stages := make([]string, 0, len(sm.by))
	for s := range sm.by {
		stages = append(stages, s)
	}
	sort.Strings(stages)
	models := make([]string, len(stages))
	for i, s := range stages {
		models[i] = sm.by[s]
	}
	sm.mu.Unlock()
	names := tokenizerNames(dir)
	for i, model := range models {
		if sameModel(model, names) {
			continue
		}
		fmt.Fprintf(env.Notice, "warning: stage %q: the servers of stage %q serve %q, but tokenizer %s is %s: its answers would be tokenized with another model's tokenizer and chat template; check the servers and the tokenizer\n",
			env.StageID, stages[i], model, dir, strings.Join(quoteAll(names), " / "))
	}
}

// tokenizerNames are what a tokenizer directory says about its model: its
// base name, config.json's _name_or_path and model_type, and
// tokenizer_config.json's tokenizer_class family (Qwen2Tokenizer → qwen),
// unless generic (PreTrainedTokenizerFast).
func tokenizerNames(dir string) []string {
	names := []string{filepath.Base(filepath.Clean(dir))}
	var cfg struct {
		NameOrPath string `json:"_name_or_path"`
		ModelType  string `json:"model_type"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil && json.Unmarshal(data, &cfg) == nil {
		names = append(names, cfg.NameOrPath, cfg.ModelType)
	}
	var tc struct {
		TokenizerClass string `json:"tokenizer_class"`
	}
	if data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil && json.Unmarshal(data, &tc) == nil {
		family := strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(tc.TokenizerClass, "Fast"), "Tokenizer"), "0123456789")
		if family != "" && family != "PreTrained" {
			names = append(names, family)
		}
	}
	var out []string
	for _, n := range names {
		if n != "" && n != "." && n != "/" {
			out = append(out, n)
		}
	}
	return out
}

// sameModel reports whether model (as a server reports it, a hub name or
// a path) and one of the tokenizer's names contain each other once both are
// letters and digits only: "Qwen/Qwen3-32B" and "qwen3".
func sameModel(model string, names []string) bool {
	m := alnum(model)
	last := alnum(filepath.Base(model))
	for _, n := range names {
		a := alnum(filepath.Base(n))
		if a != "" && (strings.Contains(m, a) || (last != "" && strings.Contains(a, last))) {
			return true
		}
	}
	return len(names) == 0
}

func alnum(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9':
			return r
		case 'A' <= r && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, s)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
