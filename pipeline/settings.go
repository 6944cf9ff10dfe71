package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/config"
)

// Settings returns the stage's decoded config as key → value, every key of
// its kind (defaults included), with values JSON can hold: strings, bools,
// int64, float64, nil (an unset pointer), []any, map[string]any. A config.Duration
// is its string ("30m0s"), a fmt.Stringer its String(), another struct a map
// of its exported fields. Paths are as resolved (absolute).
//
// Without includeOp, keys tagged `op:"true"` are left out: they say how the
// run goes (servers, timeouts, input limits), not what data it makes, so the
// rest is what a resumed run must keep unchanged.
func (s *PlanStage) Settings(includeOp bool) map[string]any {
	out := map[string]any{}
	if s == nil || s.Config == nil {
		return out
	}
	v := reflect.ValueOf(s.Config)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return out
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return out
	}
	fields, _ := fieldsOf(v.Type())
	for _, f := range fields {
		if f.Op && !includeOp {
			continue
		}
		out[f.Key] = settingValue(v.Field(f.Index))
		if dir, ok := out[f.Key].(string); ok && dir != "" && f.Path == "indir" && slices.Contains(f.Contains, "tokenizer.json") {
			// The chat template makes the prompts and the rows: a run
			// resumed or merged with another one makes other data.
			out[f.Key+TemplateDigestSuffix] = templateDigest(dir)
		}
	}
	return out
}

// DefaultSetting is the value key takes in Settings when a stage of this
// stage's kind leaves it unset (its default tag), and whether the kind has
// the key and a default for it.
func (s *PlanStage) DefaultSetting(key string) (any, bool) {
	if s == nil || s.Spec == nil || s.Spec.Config == nil {
		return nil, false
	}
	t := reflect.TypeOf(s.Spec.Config)
	fields, _ := fieldsOf(t)
	for _, f := range fields {
		if f.Key != key || !f.HasDef {
			continue
		}
		v := reflect.New(t).Elem().Field(f.Index)
		if err := setFromDefault(v, f.Default); err != nil {
			return nil, false
		}
		return settingValue(v), true
	}
	return nil, false
}

// TemplateDigestSuffix names, after a tokenizer key, the setting that
// holds the digest of its model directory's chat template (templateDigest).
const TemplateDigestSuffix = "_template_sha256"

// templateDigest is the SHA-256 (hex) of what decides how a model
// directory's chat template renders: chat_template.jinja, which
// transformers prefers, and tokenizer_config.json's chat_template and
// special tokens (bos_token, eos_token, ... and added_tokens_decoder), not
// its other keys (model_max_length, ...). A file that cannot be read or
// parsed counts as empty.
func templateDigest(dir string) string {
	h := sha256.New()
	b, _ := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	fmt.Fprintf(h, "chat_template.jinja %d\n", len(b))
	h.Write(b)
	var cfg map[string]json.RawMessage
	b, _ = os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	_ = json.Unmarshal(b, &cfg)
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if k == "chat_template" || k == "added_tokens_decoder" || strings.HasSuffix(k, "_token") {
			fmt.Fprintf(h, "%s %d\n", k, len(cfg[k]))
			h.Write(cfg[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// OperationalKeys returns the keys of the stage's kind tagged `op:"true"`,
// sorted.
func (s *Spec) OperationalKeys() []string {
	if s == nil || s.Config == nil {
		return nil
	}
	fields, _ := fieldsOf(reflect.TypeOf(s.Config))
	var out []string
	for _, f := range fields {
		if f.Op {
			out = append(out, f.Key)
		}
	}
	sort.Strings(out)
	return out
}

var stringerType = reflect.TypeOf((*fmt.Stringer)(nil)).Elem()

// settingValue converts a config value to one JSON can hold.
func settingValue(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	if v.Type() == durationType {
		return v.Interface().(config.Duration).String()
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return settingValue(v.Elem())
	}
	if v.Type().Implements(stringerType) {
		return v.Interface().(fmt.Stringer).String()
	}
	if v.CanAddr() && v.Addr().Type().Implements(stringerType) {
		return v.Addr().Interface().(fmt.Stringer).String()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64) // JSON has no NaN or Inf
		}
		return f
	}
	return compositeSetting(v)
}

// compositeSetting is settingValue of a slice, array, map or struct (its
// exported fields), item by item; anything else is printed.
func compositeSetting(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		// nil and empty are the same setting: none.
		out := make([]any, v.Len())
		for i := range out {
			out[i] = settingValue(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		iter := v.MapRange()
		for iter.Next() {
			out[fmt.Sprint(iter.Key().Interface())] = settingValue(iter.Value())
		}
		return out
	case reflect.Struct:
		out := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				out[t.Field(i).Name] = settingValue(v.Field(i))
			}
		}
		return out
	}
	return fmt.Sprint(v.Interface())
}
