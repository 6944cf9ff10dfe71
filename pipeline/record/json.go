package record

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// AppendJSON appends json.Marshal(v)'s bytes to dst. A record's token id
// lists (prompt and output ids, input ids and loss mask: thousands of
// numbers a row) took nine tenths of encoding/json's time, number by
// number through reflection; here they are written in one loop each.
// Everything else is encoding/json's own work: each other field's value
// is encoded by it, and a struct this does not walk field by field
// (embedded fields, tag options other than omitempty, its own marshaler)
// is handed to it whole.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	w := jsonWriters.Get().(*jsonWriter)
	defer w.release()
	w.buf = *bytes.NewBuffer(dst) // its contents stay; writes go after them
	if err := w.value(reflect.ValueOf(v)); err != nil {
		return nil, err
	}
	return w.buf.Bytes(), nil
}

// jsonWriter writes one value into buf; enc (into buf too) encodes what
// is not walked here.
type jsonWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonWriters = sync.Pool{New: func() any {
	w := new(jsonWriter)
	w.enc = json.NewEncoder(&w.buf)
	return w
}}

func (w *jsonWriter) release() {
	w.buf = bytes.Buffer{} // the caller owns the bytes
	jsonWriters.Put(w)
}

// encode is encoding/json's encoding of v, without the Encoder's newline.
func (w *jsonWriter) encode(v reflect.Value) error {
	// Through a pointer when v is addressable: encoding/json calls a
	// pointer receiver's MarshalJSON on an addressable value.
	x := v.Interface()
	if v.CanAddr() {
		x = v.Addr().Interface()
	}
	if err := w.enc.Encode(x); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1)
	return nil
}

func (w *jsonWriter) value(v reflect.Value) error {
	switch {
	case !v.IsValid():
		w.buf.WriteString("null")
		return nil
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Struct && walked(v.Type().Elem()) != nil:
		if v.IsNil() {
			w.buf.WriteString("null")
			return nil
		}
		return w.object(v.Elem(), walked(v.Type().Elem()))
	case v.Kind() == reflect.Struct && walked(v.Type()) != nil:
		return w.object(v, walked(v.Type()))
	}
	return w.encode(v)
}

func (w *jsonWriter) object(v reflect.Value, fields []jsonField) error {
	w.buf.WriteByte('{')
	first := true
	for i := range fields {
		f := &fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && emptyValue(fv) {
			continue
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		w.buf.WriteString(f.key)
		var err error
		switch f.kind {
		case fieldInts:
			w.ints(fv)
		case fieldLossMask:
			w.lossMask(fv.Interface().(LossMask))
		case fieldInt:
			w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), fv.Int(), 10))
		default:
			err = w.value(fv)
		}
		if err != nil {
			return err
		}
	}
	w.buf.WriteByte('}')
	return nil
}

// ints writes a []int or []int32 as encoding/json does.
func (w *jsonWriter) ints(v reflect.Value) {
	if v.IsNil() {
		w.buf.WriteString("null")
		return
	}
	b := append(w.buf.AvailableBuffer(), '[')
	switch s := v.Interface().(type) {
	case []int:
		for i, n := range s {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInt(b, int64(n))
		}
	case []int32:
		for i, n := range s {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInt(b, int64(n))
		}
	}
	w.buf.Write(append(b, ']'))
}

// appendInt is strconv.AppendInt(b, n, 10), three times as fast for the
// numbers below 10^8 that token ids are: four digits at a time from
// tables (120 KB), not one division per digit pair.
func appendInt(b []byte, n int64) []byte {
	if uint64(n) < 10000 {
		x := digits4[n]
		b = binary.LittleEndian.AppendUint64(b, x)
		return b[:len(b)-8+int(x>>56)]
	}
	if uint64(n) < 100000000 {
		x := digits4[n/10000]
		b = binary.LittleEndian.AppendUint64(b, x)
		b = b[:len(b)-8+int(x>>56)]
		return binary.LittleEndian.AppendUint32(b, padded4[n%10000])
	}
	return strconv.AppendInt(b, n, 10)
}

// digits4[n] is n in decimal (n < 10^4), its bytes from the lowest, with
// their count in the top byte; padded4[n] is n in four digits ("0042").
var digits4, padded4 = func() (d []uint64, p []uint32) {
	d, p = make([]uint64, 10000), make([]uint32, 10000)
	for n := range d {
		s := strconv.Itoa(n)
		for i := len(s) - 1; i >= 0; i-- {
			d[n] = d[n]<<8 | uint64(s[i])
		}
		d[n] |= uint64(len(s)) << 56
		s = strconv.Itoa(10000 + n)[1:]
		p[n] = binary.LittleEndian.Uint32([]byte(s))
	}
	return d, p
}()

// lossMask writes what LossMask.MarshalJSON returns.
func (w *jsonWriter) lossMask(m LossMask) {
	if m == nil {
		w.buf.WriteString("null")
		return
	}
	b := append(w.buf.AvailableBuffer(), '[')
	for i, x := range m {
		if i > 0 {
			b = append(b, ',')
		}
		if x < 10 {
			b = append(b, '0'+x)
		} else {
			b = strconv.AppendUint(b, uint64(x), 10)
		}
	}
	w.buf.Write(append(b, ']'))
}

// emptyValue is encoding/json's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

type jsonField struct {
	index     int
	key       string // `"name":`
	omitEmpty bool
	kind      int
}

// How a field's value is written.
const (
	fieldValue    = iota // by value (walked or encoding/json's)
	fieldInts            // []int, []int32
	fieldLossMask        // LossMask
	fieldInt             // int, int32, int64 (unnamed)
)

var walkedTypes sync.Map // reflect.Type → []jsonField (nil: not walked)

// walked is the fields AppendJSON writes of struct type t one by one, in
// encoding/json's order, or nil when t is left to encoding/json whole.
func walked(t reflect.Type) []jsonField {
	if f, ok := walkedTypes.Load(t); ok {
		return f.([]jsonField)
	}
	f := walkFields(t)
	walkedTypes.Store(t, f)
	return f
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	intsType          = reflect.TypeFor[[]int]()
	int32sType        = reflect.TypeFor[[]int32]()
	lossMaskType      = reflect.TypeFor[LossMask]()
)

func walkFields(t reflect.Type) []jsonField {
	if marshalsItself(t) {
		return nil
	}
	fields := []jsonField{}
	names := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil // promoted fields: encoding/json's rules
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" {
			return nil // string, omitzero, inline...: encoding/json's rules
		}
		if name == "" {
			name = sf.Name
		}
		if !plainName(name) || names[name] {
			return nil
		}
		names[name] = true
		fields = append(fields, jsonField{index: i, key: `"` + name + `":`, omitEmpty: opts == "omitempty", kind: fieldKindOf(sf.Type)})
	}
	return fields
}

// marshalsItself: t (or *t) has its own MarshalJSON or MarshalText, which
// encoding/json calls.
func marshalsItself(t reflect.Type) bool {
	for _, m := range []reflect.Type{marshalerType, textMarshalerType} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return true
		}
	}
	return false
}

// fieldKindOf is how a field of type t is written: the number lists and
// plain integers here, anything else by encoding/json.
func fieldKindOf(t reflect.Type) int {
	switch t {
	case intsType, int32sType:
		return fieldInts
	case lossMaskType:
		return fieldLossMask
	case reflect.TypeFor[int](), reflect.TypeFor[int32](), reflect.TypeFor[int64]():
		return fieldInt
	}
	return fieldValue
}

// plainName: a name encoding/json takes from a tag and writes as it is
// (letters, digits, '_' and '-', none needing an escape).
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
