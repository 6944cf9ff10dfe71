package trainers

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// HFFeatureTypes reads the "huggingface" schema metadata of a file as HF
// datasets does (src/datasets/features/features.py
// Features.from_arrow_schema: metadata["info"]["features"] through
// Features.from_dict / generate_from_dict) and returns the Arrow type each
// feature stands for (get_nested_type), by column. from_arrow_schema uses a
// column's feature only when that type (nullable) equals the file's field;
// otherwise it guesses from the Arrow type.
func HFFeatureTypes(metadata string) (map[string]arrow.DataType, []string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(metadata)))
	dec.UseNumber()
	v, err := ordered(dec)
	if err != nil {
		return nil, nil, err
	}
	root, ok := v.(obj)
	if !ok {
		return nil, nil, fmt.Errorf("huggingface metadata is not an object")
	}
	info, _ := root.get("info").(obj)
	feats, ok := info.get("features").(obj)
	if !ok {
		return nil, nil, fmt.Errorf(`huggingface metadata has no info.features`)
	}
	out := map[string]arrow.DataType{}
	var order []string
	for _, kv := range feats {
		t, err := featureType(kv.v)
		if err != nil {
			return nil, nil, fmt.Errorf("feature %s: %w", kv.k, err)
		}
		out[kv.k] = t
		order = append(order, kv.k)
	}
	return out, order, nil
}

// featureType is get_nested_type(generate_from_dict(v)).
func featureType(v any) (arrow.DataType, error) {
	switch x := v.(type) {
	case []any: // a list of one feature: pa.list_
		if len(x) != 1 {
			return nil, fmt.Errorf("a list feature has %d inner types, want 1", len(x))
		}
		inner, err := featureType(x[0])
		if err != nil {
			return nil, err
		}
		return arrow.ListOf(inner), nil
	case obj:
		typ, hasType := x.get("_type").(string)
		if !hasType { // a dict: pa.struct, in order
			return structType(x, func(t arrow.DataType) arrow.DataType { return t })
		}
		return typedFeatureType(typ, x)
	}
	return nil, fmt.Errorf("not a feature: %v", v)
}

// structType is the struct of x's features in order, each field's type
// made by field from the feature's.
func structType(x obj, field func(arrow.DataType) arrow.DataType) (arrow.DataType, error) {
	var fields []arrow.Field
	for _, kv := range x {
		t, err := featureType(kv.v)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: kv.k, Type: field(t), Nullable: true})
	}
	return arrow.StructOf(fields...), nil
}

// valueTypes are the Arrow types of the Value dtypes modelled here.
var valueTypes = map[string]arrow.DataType{
	"string": arrow.BinaryTypes.String, "large_string": arrow.BinaryTypes.LargeString,
	"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64, "uint8": arrow.PrimitiveTypes.Uint8,
	"float64": arrow.PrimitiveTypes.Float64, "float32": arrow.PrimitiveTypes.Float32, "bool": arrow.FixedWidthTypes.Boolean,
}

// typedFeatureType is the type of feature x whose _type is typ: a Value
// or a list.
func typedFeatureType(typ string, x obj) (arrow.DataType, error) {
	switch typ {
	case "Value":
		dtype, _ := x.get("dtype").(string)
		t, ok := valueTypes[dtype]
		if !ok {
			return nil, fmt.Errorf("value dtype %q not modelled here", dtype)
		}
		return t, nil
	case "List", "Sequence", "LargeList":
		return listFeatureType(typ, x.get("feature"))
	}
	return nil, fmt.Errorf("feature type %q not modelled here", typ)
}

// listFeatureType is the type of a List, Sequence or LargeList (typ) of
// feature.
func listFeatureType(typ string, feature any) (arrow.DataType, error) {
	if f, isDict := feature.(obj); typ == "Sequence" && isDict && f.get("_type") == nil {
		// Sequence of a dict is a dict of lists (Sequence.__new__).
		return structType(f, func(t arrow.DataType) arrow.DataType { return arrow.ListOf(t) })
	}
	inner, err := featureType(feature)
	if err != nil {
		return nil, err
	}
	if typ == "LargeList" {
		return arrow.LargeListOf(inner), nil
	}
	return arrow.ListOf(inner), nil
}

// obj is a JSON object with its keys in order.
type obj []struct {
	k string
	v any
}

func (o obj) get(k string) any {
	for _, kv := range o {
		if kv.k == k {
			return kv.v
		}
	}
	return nil
}

// ordered decodes the next JSON value, objects as obj.
func ordered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := tok.(type) {
	case json.Delim:
		switch d {
		case '{':
			var o obj
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := ordered(dec)
				if err != nil {
					return nil, err
				}
				o = append(o, struct {
					k string
					v any
				}{kt.(string), v})
			}
			_, err := dec.Token()
			return o, err
		case '[':
			var l []any
			for dec.More() {
				v, err := ordered(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
	}
	return tok, nil
}
