// Package gguf writes model files in GGUF, the binary format of ggml,
// llama.cpp and ollama (version 3 of the format, little-endian).
//
// A file is a header, a list of typed metadata key/value pairs, a list of
// tensor descriptions, then the tensor data, each tensor starting at a
// multiple of the file's alignment (general.alignment, default 32 bytes)
// counted from the start of the data section.
package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Magic opens every GGUF file; Version is the format version this package writes.
const (
	Magic   = "GGUF"
	Version = 3
)

// DefaultAlignment applies when the metadata has no general.alignment key.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that overrides DefaultAlignment; its value
// must be a uint32 power of two.
const AlignmentKey = "general.alignment"

// maxTensorName is ggml's GGML_MAX_NAME: names must be shorter than this.
const maxTensorName = 64

// ValueType is the type code of a metadata value.
type ValueType uint32

// The metadata value types of the GGUF specification, by their codes.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

// TensorType is a ggml element type. Only the unquantized float types are
// provided: they are all a generated test model needs.
type TensorType uint32

// ggml type codes.
const (
	F32 TensorType = 0
	F16 TensorType = 1
)

// Size is the number of bytes one element takes.
func (t TensorType) Size() int {
	switch t {
	case F32:
		return 4
	case F16:
		return 2
	}
	return 0
}

func (t TensorType) String() string {
	switch t {
	case F32:
		return "F32"
	case F16:
		return "F16"
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// KV is one metadata pair. Value is one of uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64, float64, or a slice of
// one of those (written as a GGUF array).
type KV struct {
	Key   string
	Value any
}

// Tensor is one named tensor.
type Tensor struct {
	Name string
	// Shape lists the dimensions innermost (fastest-varying) first, as ggml's
	// ne[] does: a matrix that maps n_in inputs to n_out outputs, stored as
	// n_out rows of n_in values, has Shape {n_in, n_out}.
	Shape []uint64
	Type  TensorType
	// Data holds the elements, little-endian, in Shape order; its length is
	// the product of Shape times Type.Size().
	Data []byte
}

// Elements is the product of the dimensions.
func (t Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a GGUF file to write: metadata and tensors, in the order given.
type File struct {
	KV      []KV
	Tensors []Tensor
}

// Set appends a metadata pair, or replaces the value of an existing key.
func (f *File) Set(key string, value any) {
	for i := range f.KV {
		if f.KV[i].Key == key {
			f.KV[i].Value = value
			return
		}
	}
	f.KV = append(f.KV, KV{key, value})
}

// Alignment is the data alignment the file will be written with.
func (f *File) Alignment() (uint64, error) {
	for _, kv := range f.KV {
		if kv.Key != AlignmentKey {
			continue
		}
		a, ok := kv.Value.(uint32)
		if !ok {
			return 0, fmt.Errorf("gguf: %s must be a uint32, got %T", AlignmentKey, kv.Value)
		}
		if a == 0 || a&(a-1) != 0 {
			return 0, fmt.Errorf("gguf: %s must be a power of two, got %d", AlignmentKey, a)
		}
		return uint64(a), nil
	}
	return DefaultAlignment, nil
}

// Offsets returns where each tensor's data starts, relative to the start of
// the data section (the value stored in its tensor info).
func (f *File) Offsets() ([]uint64, error) {
	align, err := f.Alignment()
	if err != nil {
		return nil, err
	}
	offs := make([]uint64, len(f.Tensors))
	var off uint64
	for i, t := range f.Tensors {
		offs[i] = off
		off = pad(off+uint64(len(t.Data)), align)
	}
	return offs, nil
}

func (f *File) validate() error {
	seen := make(map[string]bool, len(f.KV))
	for _, kv := range f.KV {
		if seen[kv.Key] {
			return fmt.Errorf("gguf: duplicate metadata key %q", kv.Key)
		}
		seen[kv.Key] = true
		if _, err := valueType(kv.Value); err != nil {
			return fmt.Errorf("gguf: metadata %q: %w", kv.Key, err)
		}
	}
	names := make(map[string]bool, len(f.Tensors))
	for _, t := range f.Tensors {
		switch {
		case t.Name == "" || len(t.Name) >= maxTensorName:
			return fmt.Errorf("gguf: tensor name %q must be 1..%d bytes", t.Name, maxTensorName-1)
		case names[t.Name]:
			return fmt.Errorf("gguf: duplicate tensor %q", t.Name)
		case len(t.Shape) == 0 || len(t.Shape) > 4:
			return fmt.Errorf("gguf: tensor %q has %d dimensions, want 1..4", t.Name, len(t.Shape))
		case t.Type.Size() == 0:
			return fmt.Errorf("gguf: tensor %q has unsupported type %v", t.Name, t.Type)
		case t.Elements()*uint64(t.Type.Size()) != uint64(len(t.Data)):
			return fmt.Errorf("gguf: tensor %q: shape %v of %v needs %d bytes, data has %d",
				t.Name, t.Shape, t.Type, t.Elements()*uint64(t.Type.Size()), len(t.Data))
		}
		names[t.Name] = true
	}
	_, err := f.Alignment()
	return err
}

// WriteTo writes the file. It checks the whole file before writing anything.
func (f *File) WriteTo(w io.Writer) (int64, error) {
	if err := f.validate(); err != nil {
		return 0, err
	}
	align, _ := f.Alignment()
	offs, _ := f.Offsets()

	e := &encoder{w: bufio.NewWriterSize(w, 1<<16)}
	e.bytes([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(f.Tensors)))
	e.u64(uint64(len(f.KV)))
	for _, kv := range f.KV {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	for i, t := range f.Tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(offs[i])
	}
	e.zeros(pad(e.n, align) - e.n)
	start := e.n
	for i, t := range f.Tensors {
		e.zeros(start + offs[i] - e.n)
		e.bytes(t.Data)
	}
	if len(f.Tensors) > 0 {
		// Pad the last tensor too, as ggml does, so the data section's size
		// is a multiple of the alignment.
		e.zeros(pad(e.n, align) - e.n)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return int64(e.n), e.err
}

func pad(n, align uint64) uint64 {
	return (n + align - 1) / align * align
}

// valueType is the GGUF type code of a Go value, checking that it can be encoded.
func valueType(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case float32:
		return TypeFloat32, nil
	case bool:
		return TypeBool, nil
	case string:
		return TypeString, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float64:
		return TypeFloat64, nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32,
		[]bool, []string, []uint64, []int64, []float64:
		return TypeArray, nil
	case nil:
		return 0, errors.New("nil value")
	}
	return 0, fmt.Errorf("unsupported value type %T", v)
}

// encoder writes little-endian values, remembering the first error and the
// number of bytes written.
type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(b)
	e.n += uint64(n)
	e.err = err
}

func (e *encoder) zeros(n uint64) {
	var z [DefaultAlignment]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.bytes(e.buf[:1]) }

func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.bytes(e.buf[:2])
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.bytes(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.bytes(e.buf[:8])
}

func (e *encoder) boolean(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// str writes a GGUF string: a uint64 byte length, then the bytes (no NUL).
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

// value writes a value's type code, then the value.
func (e *encoder) value(v any) {
	t, _ := valueType(v)
	e.u32(uint32(t))
	if !e.scalar(v) {
		e.arrayValue(v)
	}
}

// scalar writes v if it is one value, not an array, and reports whether
// it was.
func (e *encoder) scalar(v any) bool {
	switch v := v.(type) {
	case uint8:
		e.u8(v)
	case int8:
		e.u8(uint8(v))
	case uint16:
		e.u16(v)
	case int16:
		e.u16(uint16(v))
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case bool:
		e.boolean(v)
	case string:
		e.str(v)
	case uint64:
		e.u64(v)
	case int64:
		e.u64(uint64(v))
	case float64:
		e.u64(math.Float64bits(v))
	default:
		return false
	}
	return true
}

// arrayValue writes v if it is an array of a GGUF value type; anything
// else writes nothing (valueType rejects it before).
func (e *encoder) arrayValue(v any) {
	switch v := v.(type) {
	case []uint8:
		array(e, TypeUint8, v, e.u8)
	case []int8:
		array(e, TypeInt8, v, func(x int8) { e.u8(uint8(x)) })
	case []uint16:
		array(e, TypeUint16, v, e.u16)
	case []int16:
		array(e, TypeInt16, v, func(x int16) { e.u16(uint16(x)) })
	case []uint32:
		array(e, TypeUint32, v, e.u32)
	case []int32:
		array(e, TypeInt32, v, func(x int32) { e.u32(uint32(x)) })
	case []float32:
		array(e, TypeFloat32, v, func(x float32) { e.u32(math.Float32bits(x)) })
	case []bool:
		array(e, TypeBool, v, e.boolean)
	case []string:
		array(e, TypeString, v, e.str)
	case []uint64:
		array(e, TypeUint64, v, e.u64)
	case []int64:
		array(e, TypeInt64, v, func(x int64) { e.u64(uint64(x)) })
	case []float64:
		array(e, TypeFloat64, v, func(x float64) { e.u64(math.Float64bits(x)) })
	}
}

// array writes the element type, the element count, then the elements.
func array[T any](e *encoder, t ValueType, xs []T, put func(T)) {
	e.u32(uint32(t))
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		put(x)
	}
}
