package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

// le builds expected bytes by hand, straight from the specification, so the
// golden test does not share code with the writer.
type le struct{ b []byte }

func (l *le) raw(s string) *le { l.b = append(l.b, s...); return l }
func (l *le) u8(v uint8) *le   { l.b = append(l.b, v); return l }
func (l *le) u32(v uint32) *le { l.b = binary.LittleEndian.AppendUint32(l.b, v); return l }
func (l *le) u64(v uint64) *le { l.b = binary.LittleEndian.AppendUint64(l.b, v); return l }
func (l *le) str(s string) *le { return l.u64(uint64(len(s))).raw(s) }
func (l *le) zeros(n int) *le  { l.b = append(l.b, make([]byte, n)...); return l }

func TestGoldenSmallFile(t *testing.T) {
	f := &File{}
	f.Set("general.architecture", "llama")
	f.Set("llama.block_count", uint32(2))
	f.Set("tokenizer.ggml.tokens", []string{"a", "bc"})
	f.Tensors = []Tensor{
		NewF32("w", []uint64{3}, []float32{1, 2, 3}),
		NewF16("v", []uint64{2, 1}, []float32{1, -2}),
	}
	var buf bytes.Buffer
	n, err := f.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}

	w := &le{}
	w.raw("GGUF").u32(3).u64(2).u64(3) // magic, version, tensor count, kv count
	w.str("general.architecture").u32(8).str("llama")
	w.str("llama.block_count").u32(4).u32(2)
	w.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("a").str("bc")
	w.str("w").u32(1).u64(3).u32(0).u64(0)         // name, n_dims, ne, type F32, offset
	w.str("v").u32(2).u64(2).u64(1).u32(1).u64(32) // 12 data bytes of w padded to 32
	w.zeros(32 - len(w.b)%32)
	w.u32(math.Float32bits(1)).u32(math.Float32bits(2)).u32(math.Float32bits(3)).zeros(20)
	w.u8(0x00).u8(0x3c).u8(0x00).u8(0xc0).zeros(28) // f16 1 and -2, then padding

	if !bytes.Equal(buf.Bytes(), w.b) {
		t.Fatalf("written file differs from the hand-built one\n got %x\nwant %x", buf.Bytes(), w.b)
	}
	if n != int64(len(w.b)) {
		t.Errorf("WriteTo returned %d, wrote %d bytes", n, len(w.b))
	}
}

func TestAllValueTypesRoundTrip(t *testing.T) {
	values := []any{
		uint8(200), int8(-100), uint16(60000), int16(-30000), uint32(4e9), int32(-2e9),
		float32(1.5), true, "héllo", uint64(1 << 60), int64(-1 << 60), float64(math.Pi),
		[]uint8{1, 2}, []int8{-1, 2}, []uint16{3}, []int16{-4}, []uint32{5, 6, 7}, []int32{-8},
		[]float32{0.25, -1}, []bool{true, false, true}, []string{"", "x", "ĠĠ"},
		[]uint64{9}, []int64{-10}, []float64{2.5}, []string{},
	}
	f := &File{}
	for i, v := range values {
		f.Set(fmt.Sprintf("k%02d", i), v)
	}
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got := decode(t, buf.Bytes())
	if len(got.kv) != len(values) {
		t.Fatalf("decoded %d pairs, want %d", len(got.kv), len(values))
	}
	for i, v := range values {
		kv := got.kv[i]
		if kv.Key != fmt.Sprintf("k%02d", i) || !reflect.DeepEqual(kv.Value, v) {
			t.Errorf("pair %d: got %s=%#v, want k%02d=%#v", i, kv.Key, kv.Value, i, v)
		}
	}
}

func TestTensorInfosAndAlignment(t *testing.T) {
	for _, align := range []uint32{0, 32, 64, 1} {
		t.Run(fmt.Sprint(align), func(t *testing.T) {
			f := &File{}
			f.Set("general.name", "x")
			if align != 0 {
				f.Set(AlignmentKey, align)
			}
			want := uint64(align)
			if align == 0 {
				want = DefaultAlignment
			}
			f.Tensors = []Tensor{
				NewF32("a", []uint64{5}, make([]float32, 5)),            // 20 bytes
				NewF16("b.weight", []uint64{3, 7}, make([]float32, 21)), // 42 bytes
				NewF32("c", []uint64{2, 2, 2, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}),
			}
			var buf bytes.Buffer
			if _, err := f.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			d := decode(t, buf.Bytes())
			if d.alignment != want {
				t.Fatalf("alignment %d, want %d", d.alignment, want)
			}
			if d.dataStart%want != 0 {
				t.Errorf("data section starts at %d, not a multiple of %d", d.dataStart, want)
			}
			var next uint64
			for i, ti := range d.tensors {
				src := f.Tensors[i]
				if ti.name != src.Name || !reflect.DeepEqual(ti.shape, src.Shape) || ti.typ != src.Type {
					t.Errorf("tensor %d: got %s %v %v", i, ti.name, ti.shape, ti.typ)
				}
				// ggml requires each offset to be exactly the previous one
				// plus its padded size.
				if ti.offset != next || ti.offset%want != 0 {
					t.Errorf("tensor %s at offset %d, want %d", ti.name, ti.offset, next)
				}
				next += pad(uint64(len(src.Data)), want)
				start := d.dataStart + ti.offset
				if !bytes.Equal(buf.Bytes()[start:start+uint64(len(src.Data))], src.Data) {
					t.Errorf("tensor %s: data differs", ti.name)
				}
			}
			if uint64(buf.Len()) != d.dataStart+next {
				t.Errorf("file is %d bytes, want %d (last tensor padded)", buf.Len(), d.dataStart+next)
			}
		})
	}
}

func TestWriteRejectsBadFiles(t *testing.T) {
	ok := NewF32("t", []uint64{2}, []float32{1, 2})
	for _, tc := range []struct {
		name string
		f    File
		want string
	}{
		{"nested array", File{KV: []KV{{"k", [][]int32{{1}}}}}, "unsupported value type"},
		{"int", File{KV: []KV{{"k", 1}}}, "unsupported value type int"},
		{"nil", File{KV: []KV{{"k", nil}}}, "nil value"},
		{"duplicate key", File{KV: []KV{{"k", "a"}, {"k", "b"}}}, "duplicate metadata key"},
		{"alignment type", File{KV: []KV{{AlignmentKey, uint64(32)}}}, "must be a uint32"},
		{"alignment power", File{KV: []KV{{AlignmentKey, uint32(48)}}}, "power of two"},
		{"duplicate tensor", File{Tensors: []Tensor{ok, ok}}, "duplicate tensor"},
		{"long name", File{Tensors: []Tensor{{Name: strings.Repeat("x", 64), Shape: []uint64{1}, Type: F32, Data: make([]byte, 4)}}}, "must be 1..63 bytes"},
		{"short data", File{Tensors: []Tensor{{Name: "t", Shape: []uint64{3}, Type: F32, Data: make([]byte, 8)}}}, "needs 12 bytes, data has 8"},
		{"five dims", File{Tensors: []Tensor{{Name: "t", Shape: []uint64{1, 1, 1, 1, 1}, Type: F32, Data: make([]byte, 4)}}}, "5 dimensions"},
		{"type", File{Tensors: []Tensor{{Name: "t", Shape: []uint64{1}, Type: 2, Data: make([]byte, 4)}}}, "unsupported type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := tc.f.WriteTo(&buf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes of an invalid file", buf.Len())
			}
		})
	}
}

func TestSetReplaces(t *testing.T) {
	f := &File{}
	f.Set("a", uint32(1))
	f.Set("b", "x")
	f.Set("a", uint32(2))
	if want := []KV{{"a", uint32(2)}, {"b", "x"}}; !reflect.DeepEqual(f.KV, want) {
		t.Fatalf("KV = %v, want %v", f.KV, want)
	}
}

// decoded is what the test decoder read back.
type decoded struct {
	kv        []KV
	tensors   []tensorInfo
	alignment uint64
	dataStart uint64
}

type tensorInfo struct {
	name   string
	shape  []uint64
	typ    TensorType
	offset uint64
}

// decode is an independent reader of the format, following the specification.
func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	r := &reader{t: t, b: b}
	if string(r.next(4)) != "GGUF" {
		t.Fatal("bad magic")
	}
	if v := r.u32(); v != 3 {
		t.Fatalf("version %d", v)
	}
	nt, nkv := r.u64(), r.u64()
	d := decoded{alignment: 32}
	for range nkv {
		key := r.str()
		v := r.value(ValueType(r.u32()))
		if key == "general.alignment" {
			d.alignment = uint64(v.(uint32))
		}
		d.kv = append(d.kv, KV{key, v})
	}
	for range nt {
		ti := tensorInfo{name: r.str()}
		nd := r.u32()
		for range nd {
			ti.shape = append(ti.shape, r.u64())
		}
		ti.typ = TensorType(r.u32())
		ti.offset = r.u64()
		d.tensors = append(d.tensors, ti)
	}
	d.dataStart = (r.off + d.alignment - 1) / d.alignment * d.alignment
	return d
}

type reader struct {
	t   *testing.T
	b   []byte
	off uint64
}

func (r *reader) next(n uint64) []byte {
	if r.off+n > uint64(len(r.b)) {
		r.t.Fatalf("read past the end at %d", r.off)
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}
func (r *reader) u8() uint8   { return r.next(1)[0] }
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.next(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.next(8)) }
func (r *reader) str() string { return string(r.next(r.u64())) }

func (r *reader) value(typ ValueType) any {
	switch typ {
	case TypeUint8:
		return r.u8()
	case TypeInt8:
		return int8(r.u8())
	case TypeUint16:
		return r.u16()
	case TypeInt16:
		return int16(r.u16())
	case TypeUint32:
		return r.u32()
	case TypeInt32:
		return int32(r.u32())
	case TypeFloat32:
		return math.Float32frombits(r.u32())
	case TypeBool:
		return r.u8() != 0
	case TypeString:
		return r.str()
	case TypeUint64:
		return r.u64()
	case TypeInt64:
		return int64(r.u64())
	case TypeFloat64:
		return math.Float64frombits(r.u64())
	case TypeArray:
		et := ValueType(r.u32())
		n := int(r.u64())
		// Build a typed slice of the element type so results compare with
		// the values written.
		var elem reflect.Type
		switch et {
		case TypeUint8:
			elem = reflect.TypeFor[uint8]()
		case TypeInt8:
			elem = reflect.TypeFor[int8]()
		case TypeUint16:
			elem = reflect.TypeFor[uint16]()
		case TypeInt16:
			elem = reflect.TypeFor[int16]()
		case TypeUint32:
			elem = reflect.TypeFor[uint32]()
		case TypeInt32:
			elem = reflect.TypeFor[int32]()
		case TypeFloat32:
			elem = reflect.TypeFor[float32]()
		case TypeBool:
			elem = reflect.TypeFor[bool]()
		case TypeString:
			elem = reflect.TypeFor[string]()
		case TypeUint64:
			elem = reflect.TypeFor[uint64]()
		case TypeInt64:
			elem = reflect.TypeFor[int64]()
		case TypeFloat64:
			elem = reflect.TypeFor[float64]()
		default:
			r.t.Fatalf("array of type %d", et)
		}
		s := reflect.MakeSlice(reflect.SliceOf(elem), n, n)
		for i := range n {
			s.Index(i).Set(reflect.ValueOf(r.value(et)))
		}
		return s.Interface()
	}
	r.t.Fatalf("unknown value type %d at %d", typ, r.off)
	return nil
}
