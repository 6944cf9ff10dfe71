package trainers

import (
	"strings"
	"testing"
)

// The data: block's rules (schema.py DataConfig, extra="forbid",
// _exactly_one_source; Config._validate_run_structure's data rules), on
// YAML read as Config.from_file reads it.
func TestCheckSpecForgeConfigYAML(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		errs       []string // each a part of one error; none: passes
	}{
		{"prompts", "data:\n  prompts_path: /d/out.jsonl\n  max_length: 4096\n  chat_template: qwen3.5\n", nil},
		{"conversations", "data:\n  train_data_path: out.jsonl\n  max_length: '4096'\n  is_preformatted: no\n  dataloader_num_workers: null\n", nil},
		{"two sources", "data:\n  prompts_path: a.jsonl\n  train_data_path: b.jsonl\n", []string{"set exactly one of data.train_data_path", "set: 2 (train_data_path, prompts_path)"}},
		{"no source", "data:\n  prompts_path: ''\n  max_length: 8\n", []string{"set: 0 ()"}},
		{"unknown field", "data:\n  prompts_path: a.jsonl\n  min_loss_tokens: 2\n", []string{"data.min_loss_tokens: extra inputs are not permitted"}},
		{"types", "data:\n  prompts_path: a.jsonl\n  max_length: 0\n  chat_template: 3\n  is_preformatted: maybe\n  build_dataset_num_proc: 1.5\n  max_prompts: -1\n",
			[]string{"data.max_length: input should be greater than 0", "data.chat_template: input should be a valid string", "data.is_preformatted: input should be a valid boolean",
				"data.build_dataset_num_proc: input should be a valid integer", "data.max_prompts: input should be greater than or equal to 0"}},
		{"null string", "data:\n  prompts_path: a.jsonl\n  cache_dir: null\n", []string{"data.cache_dir: input should be a valid str, got null"}},
		{"eval", "data:\n  prompts_path: a.jsonl\n  eval_data_path: e.jsonl\n  eval_hidden_states_path: f\n", []string{"eval_data_path is unsupported", "eval_hidden_states_path requires an offline"}},
		{"offline eval", "data:\n  hidden_states_path: h\n  eval_hidden_states_path: f\n", nil},
		{"no data", "model:\n  target_model_path: x\n", []string{"data: is missing"}},
	} {
		errs := CheckSpecForgeConfigYAML([]byte(c.yaml))
		if (len(errs) == 0) != (len(c.errs) == 0) {
			t.Errorf("%s: errors %v, want %q", c.name, errs, c.errs)
			continue
		}
		var all []string
		for _, e := range errs {
			all = append(all, e.Error())
		}
		for _, want := range c.errs {
			if !strings.Contains(strings.Join(all, "\n"), want) {
				t.Errorf("%s: errors %q lack %q", c.name, all, want)
			}
		}
	}
}
