package gguf

import (
	"encoding/binary"
	"math"
)

// NewF32 is a tensor of float32 values; shape is innermost first (see Tensor.Shape).
func NewF32(name string, shape []uint64, values []float32) Tensor {
	data := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return Tensor{Name: name, Shape: shape, Type: F32, Data: data}
}

// NewF16 is a tensor of IEEE 754 half-precision values converted from values
// (rounded to nearest even); shape is innermost first (see Tensor.Shape).
func NewF16(name string, shape []uint64, values []float32) Tensor {
	data := make([]byte, 2*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint16(data[2*i:], Float16(v))
	}
	return Tensor{Name: name, Shape: shape, Type: F16, Data: data}
}

// Float16 converts f to the bits of the nearest IEEE 754 binary16 value,
// ties to even. Values too large become ±Inf, NaN stays NaN, and values too
// small for a subnormal half become ±0.
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff

	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp == 0: // zero or a single subnormal, far below the smallest half
		return sign
	}

	// Unbiased exponent; the half bias is 15, the single bias 127.
	e := exp - 127 + 15
	m := mant | 0x800000 // with the implicit leading 1
	if e >= 0x1f {
		return sign | 0x7c00
	}

	// Number of low mantissa bits to drop: 13 for a normal half, more for a
	// subnormal one.
	shift := uint32(13)
	if e <= 0 {
		shift = uint32(14 - e)
		if shift > 24 {
			return sign
		}
		e = 0
	}
	half := m >> shift
	rem := m & (1<<shift - 1)
	mid := uint32(1) << (shift - 1)
	if rem > mid || (rem == mid && half&1 == 1) {
		half++
	}
	if e == 0 {
		// Subnormal: no implicit bit; a carry into bit 10 correctly makes it
		// the smallest normal.
		return sign | uint16(half)
	}
	// Normal: drop the implicit bit and add the exponent; a mantissa carry
	// correctly bumps the exponent (up to Inf).
	return sign | uint16(uint32(e)<<10+(half-0x400))
}
