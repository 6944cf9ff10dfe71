package trainers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// SpecForge's run config (`specforge train --config run.yaml`) is checked
// by pydantic models with extra="forbid" (specforge/config/schema.py
// StrictConfigModel); a YAML file is read with yaml.safe_load
// (Config.from_file). These are the rules of its data: block, from
// schema.py at sgl-project/SpecForge a6b6b023.

// dataField is one field of schema.py DataConfig: its pydantic type and
// bounds.
type dataField struct {
	kind     string // "str", "int", "bool"
	optional bool   // Optional[...]: null is allowed
	gt, ge   *int64 // Field(gt=...), Field(ge=...)
}

func bound(n int64) *int64 { return &n }

// dataFields is DataConfig's fields, in its order.
var dataFields = []struct {
	name string
	dataField
}{
	{"train_data_path", dataField{kind: "str"}},
	{"prompts_path", dataField{kind: "str"}},
	{"hidden_states_path", dataField{kind: "str"}},
	{"eval_data_path", dataField{kind: "str"}},
	{"eval_hidden_states_path", dataField{kind: "str"}},
	{"max_length", dataField{kind: "int", gt: bound(0)}},
	{"chat_template", dataField{kind: "str"}},
	{"is_preformatted", dataField{kind: "bool"}},
	{"train_only_last_turn", dataField{kind: "bool"}},
	{"build_dataset_num_proc", dataField{kind: "int", gt: bound(0)}},
	{"dataloader_num_workers", dataField{kind: "int", optional: true, ge: bound(0)}},
	{"cache_dir", dataField{kind: "str"}},
	{"cache_key", dataField{kind: "str", optional: true}},
	{"max_prompts", dataField{kind: "int", optional: true, ge: bound(0)}},
}

// SpecForgeDataSources are DataConfig's data sources, of which exactly
// one is set (DataConfig._exactly_one_source).
var SpecForgeDataSources = []string{"train_data_path", "prompts_path", "hidden_states_path"}

// CheckSpecForgeData judges a data: block as SpecForge's schema would,
// returning every problem (nil: it passes):
//   - a field DataConfig does not declare is an error (extra="forbid");
//   - each field has its declared type under pydantic's lax mode (str takes
//     only a string; int an integer, an integral float, a bool or a numeric
//     string; bool a bool, 0/1 or the strings pydantic accepts) and bounds
//     (max_length and build_dataset_num_proc > 0; dataloader_num_workers
//     and max_prompts >= 0 or null; cache_key a string or null);
//   - exactly one of train_data_path, prompts_path, hidden_states_path is
//     set, non-empty (DataConfig._exactly_one_source);
//   - eval_data_path is refused, and eval_hidden_states_path needs
//     hidden_states_path (Config._validate_run_structure: offline mode is
//     "data.hidden_states_path set", Config.mode).
//
// Rules that need other sections (eval_hidden_states_path with
// training.eval_interval) are not judged.
func CheckSpecForgeData(data map[string]any) []error {
	var errs []error
	for _, k := range sortedKeys(data) {
		i := slices.IndexFunc(dataFields, func(f struct {
			name string
			dataField
		}) bool {
			return f.name == k
		})
		if i < 0 {
			errs = append(errs, fmt.Errorf("data.%s: extra inputs are not permitted (DataConfig declares %s)", k, strings.Join(dataFieldNames(), ", ")))
			continue
		}
		if err := dataFields[i].check(data[k]); err != nil {
			errs = append(errs, fmt.Errorf("data.%s: %v", k, err))
		}
	}
	var set []string
	for _, k := range SpecForgeDataSources {
		if s, ok := data[k].(string); ok && s != "" {
			set = append(set, k)
		}
	}
	if len(set) != 1 {
		errs = append(errs, fmt.Errorf("set exactly one of data.train_data_path (raw online data), data.prompts_path (pre-tokenized online data), or data.hidden_states_path (offline features); set: %d (%s)", len(set), strings.Join(set, ", ")))
	}
	if s, _ := data["eval_data_path"].(string); s != "" {
		errs = append(errs, errors.New("data.eval_data_path is unsupported; online evaluation is not supported by the server-only capture path"))
	}
	if s, _ := data["eval_hidden_states_path"].(string); s != "" {
		if h, _ := data["hidden_states_path"].(string); h == "" {
			errs = append(errs, errors.New("data.eval_hidden_states_path requires an offline training data source"))
		}
	}
	return errs
}

// CheckSpecForgeConfigYAML reads a YAML file's data: block as
// Config.from_file does (yaml.safe_load; YAML 1.1 scalars, which
// sigs.k8s.io/yaml's go-yaml v2 also follows) and judges it. Other
// top-level keys are left alone: the file pipe writes holds only data:,
// to be merged into a run config.
func CheckSpecForgeConfigYAML(text []byte) []error {
	js, err := yaml.YAMLToJSON(text)
	if err != nil {
		return []error{fmt.Errorf("not YAML: %v", err)}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return []error{fmt.Errorf("not a YAML mapping: %v", err)}
	}
	data, ok := doc["data"].(map[string]any)
	if !ok {
		return []error{fmt.Errorf("data: is missing or not a mapping (Config.data is required)")}
	}
	return CheckSpecForgeData(data)
}

func (f dataField) check(v any) error {
	if v == nil {
		if f.optional {
			return nil
		}
		return fmt.Errorf("input should be a valid %s, got null", f.kind)
	}
	switch f.kind {
	case "str":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("input should be a valid string, got %s", describe(v))
		}
		return nil
	case "bool":
		if _, ok := laxBool(v); !ok {
			return fmt.Errorf("input should be a valid boolean, got %s", describe(v))
		}
		return nil
	}
	n, ok := laxInt(v)
	if !ok {
		return fmt.Errorf("input should be a valid integer, got %s", describe(v))
	}
	if f.gt != nil && n <= *f.gt {
		return fmt.Errorf("input should be greater than %d, got %d", *f.gt, n)
	}
	if f.ge != nil && n < *f.ge {
		return fmt.Errorf("input should be greater than or equal to %d, got %d", *f.ge, n)
	}
	return nil
}

// laxInt is pydantic's int in lax mode: an int, a float with no
// fraction, a bool, or a string of an integer.
func laxInt(v any) (int64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, true
		}
		f, err := x.Float64()
		if err != nil || f != math.Trunc(f) {
			return 0, false
		}
		return int64(f), true
	case float64:
		if x != math.Trunc(x) {
			return 0, false
		}
		return int64(x), true
	case int:
		return int64(x), true
	case int64:
		return x, true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// laxBool is pydantic's bool in lax mode.
func laxBool(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		switch strings.ToLower(x) {
		case "0", "off", "f", "false", "n", "no":
			return false, true
		case "1", "on", "t", "true", "y", "yes":
			return true, true
		}
		return false, false
	}
	if n, ok := laxInt(v); ok && (n == 0 || n == 1) {
		return n == 1, true
	}
	return false, false
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case json.Number:
		return "number " + x.String()
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T %v", v, v)
}

func dataFieldNames() []string {
	out := make([]string, len(dataFields))
	for i, f := range dataFields {
		out[i] = f.name
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
