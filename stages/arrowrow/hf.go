package arrowrow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// HFMetadataKey is the schema metadata key HF datasets reads its features
// from: Features.from_arrow_schema (datasets src/datasets/features/
// features.py) takes metadata["huggingface"]["info"]["features"] for each
// column whose Arrow field it maps to equals the file's, and guesses the
// others from the Arrow type.
const HFMetadataKey = "huggingface"

// hfMetadata is the "huggingface" value for schema: {"info": {"features":
// {...}}} in the form Features.to_dict writes and generate_from_dict reads
// (features.py), for datasets 2.x to 4.x alike:
//   - a scalar is {"dtype": "int32", "_type": "Value"};
//   - a list of scalars is {"feature": ..., "_type": "Sequence"}, which every
//     version maps to pa.list_ (4.x reads Sequence of a non-dict as List);
//   - a list of structs is [{...}], a Python list of one dict: pa.list_ of a
//     struct in every version (Sequence of a dict would be a dict of lists);
//   - a struct's fields keep their order, as pa.struct does.
func hfMetadata(schema *arrow.Schema) (string, error) {
	var b strings.Builder
	b.WriteString(`{"info":{"features":{`)
	for i, f := range schema.Fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := hfField(&b, f); err != nil {
			return "", err
		}
	}
	b.WriteString(`}}}`)
	return b.String(), nil
}

func hfField(b *strings.Builder, f arrow.Field) error {
	name, _ := json.Marshal(f.Name)
	b.Write(name)
	b.WriteByte(':')
	return hfType(b, f.Type)
}

func hfType(b *strings.Builder, t arrow.DataType) error {
	switch t := t.(type) {
	case *arrow.ListType:
		if st, ok := t.Elem().(*arrow.StructType); ok {
			b.WriteByte('[')
			if err := hfType(b, st); err != nil {
				return err
			}
			b.WriteByte(']')
			return nil
		}
		b.WriteString(`{"feature":`)
		if err := hfType(b, t.Elem()); err != nil {
			return err
		}
		b.WriteString(`,"_type":"Sequence"}`)
		return nil
	case *arrow.StructType:
		b.WriteByte('{')
		for i, f := range t.Fields() {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := hfField(b, f); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	// Value's dtype is the pyarrow type's name (features.py _arrow_to_datasets_dtype).
	dtype := map[arrow.Type]string{
		arrow.STRING: "string", arrow.INT32: "int32", arrow.INT64: "int64", arrow.UINT8: "uint8",
		arrow.FLOAT64: "float64", arrow.BOOL: "bool",
	}[t.ID()]
	if dtype == "" {
		return fmt.Errorf("no HF datasets feature for Arrow type %s", t)
	}
	fmt.Fprintf(b, `{"dtype":%q,"_type":"Value"}`, dtype)
	return nil
}
