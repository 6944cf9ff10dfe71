package pipeline

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline/config"
	"github.com/pipe-dev/pipe/pipeline/pipefile"
)

// fieldInfo is one config key of a kind, read from struct tags.
type fieldInfo struct {
	Key      string
	Index    int
	Type     reflect.Type
	Doc      string
	Default  string
	HasDef   bool
	Min, Max *float64
	Enum     []string
	Required bool
	Path     string // "", "in", "indir", "inany", "rundir", "out", "dir"
	// Contains lists files an "indir" directory must hold (tag `contains:"a,b"`).
	Contains []string
	// Op marks an operational key (tag `op:"true"`): how the run goes, not
	// what data it makes, so a resume may change it (see PlanStage.Settings).
	Op bool
	// ShardPrefix marks a destination prefix that is not a path (tag
	// `shard:"prefix"`, e.g. an s3:// URI): a sharded run appends the
	// shard's name to it, as it puts the name into out and dir paths.
	ShardPrefix bool
	// Trainer names the [trainer] key this key repeats (tag
	// `trainer:"max_length"`): unset in the stage, it takes the table's
	// value; set to another, pipe check names the conflict.
	Trainer string
}

var (
	durationType      = reflect.TypeOf(config.Duration{})
	configDecoderType = reflect.TypeOf((*config.Decoder)(nil)).Elem()
)

func fieldsOf(t reflect.Type) ([]fieldInfo, error) {
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		key := sf.Tag.Get("toml")
		if !sf.IsExported() || key == "" || key == "-" {
			continue
		}
		f := fieldInfo{Key: key, Index: i, Type: sf.Type, Doc: sf.Tag.Get("doc"), Path: sf.Tag.Get("path")}
		f.Default, f.HasDef = sf.Tag.Lookup("default")
		f.Required = sf.Tag.Get("required") == "true"
		f.Op = sf.Tag.Get("op") == "true"
		f.ShardPrefix = sf.Tag.Get("shard") == "prefix"
		f.Trainer = sf.Tag.Get("trainer")
		if c := sf.Tag.Get("contains"); c != "" {
			f.Contains = strings.Split(c, ",")
		}
		if e := sf.Tag.Get("enum"); e != "" {
			f.Enum = strings.Split(e, "|")
		}
		for _, b := range []struct {
			tag string
			dst **float64
		}{{"min", &f.Min}, {"max", &f.Max}} {
			if s := sf.Tag.Get(b.tag); s != "" {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return nil, fmt.Errorf("field %s: bad %s tag %q", sf.Name, b.tag, s)
				}
				*b.dst = &v
			}
		}
		if f.HasDef {
			if err := setFromDefault(reflect.New(sf.Type).Elem(), f.Default); err != nil {
				return nil, fmt.Errorf("field %s: bad default %q: %v", sf.Name, f.Default, err)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// setFromDefault sets v from a default tag: scalars as written, lists comma-separated.
func setFromDefault(v reflect.Value, s string) error {
	if v.Addr().Type().Implements(configDecoderType) {
		return v.Addr().Interface().(config.Decoder).DecodeConfig(s)
	}
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		v.Set(reflect.ValueOf(config.Duration{Duration: d}))
		return err
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		v.SetBool(b)
		return err
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, err := strconv.ParseInt(s, 10, 64)
		v.SetInt(n)
		return err
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		v.SetFloat(f)
		return err
	case reflect.Slice:
		if s == "" {
			return nil
		}
		parts := strings.Split(s, ",")
		sl := reflect.MakeSlice(v.Type(), len(parts), len(parts))
		for i, p := range parts {
			if err := setFromDefault(sl.Index(i), strings.TrimSpace(p)); err != nil {
				return err
			}
		}
		v.Set(sl)
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		if err := setFromDefault(e.Elem(), s); err != nil {
			return err
		}
		v.Set(e)
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// typeName is a config type in the user's words.
func typeName(t reflect.Type) string {
	if tn, ok := reflect.New(t).Interface().(config.TypeNamer); ok {
		return tn.ConfigTypeName()
	}
	if t == durationType {
		return `duration (e.g. "90s")`
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "array of " + typeName(t.Elem())
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Map:
		return "table"
	}
	return t.String()
}

func withArticle(s string) string {
	if strings.IndexAny(s[:1], "aeiou") == 0 {
		return "an " + s
	}
	return "a " + s
}

// setFromRaw sets v from a decoded TOML value, checking its type.
func setFromRaw(v reflect.Value, raw any) error {
	if v.Addr().Type().Implements(configDecoderType) {
		return v.Addr().Interface().(config.Decoder).DecodeConfig(raw)
	}
	mismatch := func() error {
		return fmt.Errorf("must be %s, got %s", withArticle(typeName(v.Type())), pipefile.DescribeValue(raw))
	}
	if v.Type() == durationType {
		s, ok := raw.(string)
		if !ok {
			return mismatch()
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf(`must be a duration like "90s" or "10m", got %q`, s)
		}
		v.Set(reflect.ValueOf(config.Duration{Duration: d}))
		return nil
	}
	switch v.Kind() {
	case reflect.Slice:
		return setSliceFromRaw(v, raw, mismatch)
	case reflect.Pointer:
		e := reflect.New(v.Type().Elem())
		if err := setFromRaw(e.Elem(), raw); err != nil {
			return err
		}
		v.Set(e)
		return nil
	case reflect.Map:
		return setMapFromRaw(v, raw, mismatch)
	case reflect.Interface:
		v.Set(reflect.ValueOf(raw))
		return nil
	}
	return setScalarFromRaw(v, raw, mismatch)
}

// setScalarFromRaw sets a string, bool, integer or float v from raw;
// mismatch is the error for a value of the wrong type.
func setScalarFromRaw(v reflect.Value, raw any, mismatch func() error) error {
	switch v.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return mismatch()
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return mismatch()
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := raw.(int64)
		if !ok {
			return mismatch()
		}
		if v.OverflowInt(n) {
			return fmt.Errorf("%d is out of range", n)
		}
		v.SetInt(n)
	case reflect.Float64:
		switch x := raw.(type) {
		case float64:
			v.SetFloat(x)
		case int64:
			v.SetFloat(float64(x))
		default:
			return mismatch()
		}
	default:
		return fmt.Errorf("unsupported config type %s", v.Type())
	}
	return nil
}

// setSliceFromRaw sets a slice v from an array (of values or of tables),
// each item by setFromRaw; an item's error names it (from 1).
func setSliceFromRaw(v reflect.Value, raw any, mismatch func() error) error {
	var items []any
	switch x := raw.(type) {
	case []any:
		items = x
	case []map[string]any:
		for _, m := range x {
			items = append(items, m)
		}
	default:
		return mismatch()
	}
	sl := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, it := range items {
		if err := setFromRaw(sl.Index(i), it); err != nil {
			return fmt.Errorf("item %d %v", i+1, err)
		}
	}
	v.Set(sl)
	return nil
}

// setMapFromRaw sets a map v with string keys from a table, each value by
// setFromRaw; a value's error names its key.
func setMapFromRaw(v reflect.Value, raw any, mismatch func() error) error {
	m, ok := raw.(map[string]any)
	if !ok || v.Type().Key().Kind() != reflect.String {
		return mismatch()
	}
	out := reflect.MakeMapWithSize(v.Type(), len(m))
	for k, it := range m {
		e := reflect.New(v.Type().Elem()).Elem()
		if err := setFromRaw(e, it); err != nil {
			return fmt.Errorf("key %q %v", k, err)
		}
		out.SetMapIndex(reflect.ValueOf(k), e)
	}
	v.Set(out)
	return nil
}

// checkRange applies min/max/enum tags to a set value.
func (f *fieldInfo) checkRange(v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	var x float64
	switch v.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		x = float64(v.Int())
	case reflect.Float64:
		x = v.Float()
	case reflect.String:
		if len(f.Enum) > 0 {
			for _, e := range f.Enum {
				if v.String() == e {
					return nil
				}
			}
			return fmt.Errorf("must be one of %s, got %q%s", quoteList(f.Enum), v.String(), suggest.DidYouMean(v.String(), f.Enum))
		}
		return nil
	default:
		return nil
	}
	if (f.Min != nil && x < *f.Min) || (f.Max != nil && x > *f.Max) {
		return fmt.Errorf("must be %s, got %s", f.rangeText(), strconv.FormatFloat(x, 'f', -1, 64))
	}
	return nil
}

func (f *fieldInfo) rangeText() string {
	num := func(p *float64) string { return strconv.FormatFloat(*p, 'f', -1, 64) } // 5242880, not 5.24288e+06
	switch {
	case f.Min != nil && f.Max != nil:
		return num(f.Min) + ".." + num(f.Max)
	case f.Min != nil:
		return ">= " + num(f.Min)
	case f.Max != nil:
		return "<= " + num(f.Max)
	}
	return "any"
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}
