package stages

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sampling sent whole. SGLang fills each sampling field a request leaves
// out from the model's generation_config.json (--sampling-defaults model,
// its default: "user value > model generation_config > OpenAI defaults",
// python/sglang/srt/entrypoints/openai/protocol.py), so a run that leaves
// them out samples by a file on the server's machine, not by its own. With
// the model directory (tokenizer), generate resolves every field the same
// way before it sends anything — the stage's value, else
// generation_config.json's, else the default the server would use — and
// sends all of them with every request; run.json records them with where
// each came from.

// samplingField is one sampling setting: the stage's key, the name in
// generation_config.json (SGLang's ModelConfig.get_default_sampling_params
// reads these five), and the value a server uses when neither gives one.
type samplingField struct {
	key, hf string
	neutral float64
	isInt   bool
}

var samplingFields = []samplingField{
	{"temperature", "temperature", 1, false},
	{"top_p", "top_p", 1, false},
	{"top_k", "top_k", -1, true},
	{"min_p", "min_p", 0, false},
	{"repetition_penalty", "repetition_penalty", 1, false},
	{"presence_penalty", "", 0, false},
	{"frequency_penalty", "", 0, false},
}

// GenerationConfigFile is the model's sampling defaults, beside its
// tokenizer.
const GenerationConfigFile = "generation_config.json"

// ResolvedSampling is each sampling field the stage sends and where its
// value comes from ("the stage", "generation_config.json", "the
// server's default"); nil when the stage has no model directory with a
// generation_config.json (the servers then fill what the stage leaves
// out, which pipe says at start).
func (c *generateConfig) ResolvedSampling() map[string]any {
	vals, from, err := c.resolveSampling()
	if err != nil || vals == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range vals {
		out[k] = map[string]any{"value": v, "from": from[k]}
	}
	return out
}

// stageSampling is the stage's own value of key, if set.
func (c *generateConfig) stageSampling(key string) (float64, bool) {
	switch key {
	case "temperature":
		return deref(c.Temperature)
	case "top_p":
		return deref(c.TopP)
	case "top_k":
		if c.TopK != nil {
			return float64(*c.TopK), true
		}
	case "min_p":
		return deref(c.MinP)
	case "repetition_penalty":
		return deref(c.RepetitionPenalty)
	case "presence_penalty":
		return deref(c.PresencePenalty)
	case "frequency_penalty":
		return deref(c.FrequencyPenalty)
	}
	return 0, false
}

func deref(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// resolveSampling resolves every field; vals is nil without a model
// directory holding generation_config.json.
func (c *generateConfig) resolveSampling() (vals map[string]float64, from map[string]string, err error) {
	if c.Tokenizer == "" {
		return nil, nil, nil
	}
	path := filepath.Join(c.Tokenizer, GenerationConfigFile)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var gc map[string]any
	if err := json.Unmarshal(b, &gc); err != nil {
		return nil, nil, fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	vals, from = map[string]float64{}, map[string]string{}
	for _, f := range samplingFields {
		if v, ok := c.stageSampling(f.key); ok {
			vals[f.key], from[f.key] = v, "the stage"
			continue
		}
		if v, ok := gc[f.hf].(float64); ok && f.hf != "" {
			vals[f.key], from[f.key] = v, GenerationConfigFile
			continue
		}
		vals[f.key], from[f.key] = f.neutral, "the server's default"
	}
	return vals, from, nil
}

// fillSampling sets every unset sampling field of the stage to its
// resolved value and says how the run samples: each field sent and its
// source, or, without generation_config.json, which fields the servers
// fill from their own model.
func (g *generate) fillSampling() error {
	c := &g.cfg
	vals, from, err := c.resolveSampling()
	if err != nil {
		return err
	}
	if vals == nil {
		var unset []string
		for _, f := range samplingFields[:5] {
			if _, ok := c.stageSampling(f.key); !ok {
				unset = append(unset, f.key)
			}
		}
		if len(unset) > 0 {
			where := "no tokenizer (model directory) is set"
			if c.Tokenizer != "" {
				where = fmt.Sprintf("%s has no %s", c.Tokenizer, GenerationConfigFile)
			}
			g.logf("sampling: %s unset and %s: each server fills them from its own model's %s (SGLang --sampling-defaults model); set them on the stage to make the run reproducible from its file", strings.Join(unset, ", "), where, GenerationConfigFile)
		}
		return nil
	}
	set := func(p **float64, k string) {
		if *p == nil {
			v := vals[k]
			*p = &v
		}
	}
	set(&c.Temperature, "temperature")
	set(&c.TopP, "top_p")
	if c.TopK == nil {
		k := int(vals["top_k"])
		c.TopK = &k
	}
	set(&c.MinP, "min_p")
	set(&c.RepetitionPenalty, "repetition_penalty")
	set(&c.PresencePenalty, "presence_penalty")
	set(&c.FrequencyPenalty, "frequency_penalty")
	var parts []string
	for _, f := range samplingFields {
		parts = append(parts, fmt.Sprintf("%s %g (%s)", f.key, vals[f.key], from[f.key]))
	}
	g.logf("sampling sent with every request: %s", strings.Join(parts, ", "))
	return nil
}
