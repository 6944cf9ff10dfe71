package gguf

import (
	"math"
	"testing"
)

// halfToFloat decodes binary16 bits exactly (every half is a float32).
func halfToFloat(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float32(h & 0x3ff)
	switch exp {
	case 0:
		return sign * mant * float32(math.Pow(2, -24))
	case 0x1f:
		if mant != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * (1 + mant/1024) * float32(math.Pow(2, float64(exp-15)))
}

func TestFloat16Values(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.1, 0x2e66},
		{65504, 0x7bff}, // largest half
		{65519, 0x7bff}, // rounds down
		{65520, 0x7c00}, // rounds to +Inf
		{1e10, 0x7c00},  // overflow
		{float32(math.Inf(-1)), 0xfc00},
		{float32(math.NaN()), 0x7e00},
		{0x1p-14, 0x0400},       // smallest normal
		{0x1p-24, 0x0001},       // smallest subnormal
		{0x1p-25, 0x0000},       // tie between 0 and the smallest subnormal: even
		{0x1.8p-25, 0x0001},     // above the tie
		{0x1p-30, 0x0000},       // underflow
		{1 + 0x1p-11, 0x3c00},   // tie, rounds to even
		{1 + 3*0x1p-11, 0x3c02}, // tie, rounds to even (up)
		{0x1.ffcp-15, 0x0400},   // subnormal rounding carries into the smallest normal
		{1e-45, 0x0000},         // float32 subnormal
	} {
		if got := Float16(tc.f); got != tc.want {
			t.Errorf("Float16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
}

// Every finite half converts back to itself, and every midpoint between two
// neighbouring halves rounds to the one with an even mantissa.
func TestFloat16Exhaustive(t *testing.T) {
	for h := range uint32(0x7c00) {
		for _, sign := range []uint16{0, 0x8000} {
			bits := uint16(h) | sign
			f := halfToFloat(bits)
			if got := Float16(f); got != bits {
				t.Fatalf("Float16(%g) = %#04x, want %#04x", f, got, bits)
			}
			if h == 0x7bff {
				continue
			}
			mid := float32((float64(f) + float64(halfToFloat(bits+1))) / 2)
			want := bits
			if bits&1 == 1 {
				want = bits + 1
			}
			if got := Float16(mid); got != want {
				t.Fatalf("Float16(midpoint %g) = %#04x, want %#04x", mid, got, want)
			}
		}
	}
}

func TestNewTensors(t *testing.T) {
	a := NewF32("a", []uint64{2}, []float32{1, -1})
	if a.Type != F32 || string(a.Data) != "\x00\x00\x80\x3f\x00\x00\x80\xbf" {
		t.Errorf("NewF32: %v %x", a.Type, a.Data)
	}
	b := NewF16("b", []uint64{2}, []float32{1, -1})
	if b.Type != F16 || string(b.Data) != "\x00\x3c\x00\xbc" {
		t.Errorf("NewF16: %v %x", b.Type, b.Data)
	}
}
