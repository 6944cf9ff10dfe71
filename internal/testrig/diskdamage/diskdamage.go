// Package diskdamage is what a failing disk does to a file while no
// process has it open, for tests of what a restart makes of it: bytes
// changed in place, a page of zeros, a cut, a block written over another.
package diskdamage

import (
	"bytes"
	"math/rand/v2"
)

// A Damage changes data at offset at and returns the damaged data (a cut
// shortens it).
type Damage struct {
	Name string
	Do   func(data []byte, at int, rng *rand.Rand) []byte
}

// RandomBytes overwrites n bytes at at with random ones (a bad sector).
func RandomBytes(n int) Damage {
	return Damage{"random-bytes", func(d []byte, at int, rng *rand.Rand) []byte {
		for i := at; i < at+n && i < len(d); i++ {
			d[i] = byte(rng.IntN(256))
		}
		return d
	}}
}

// Zeros overwrites n bytes at at with zeros; with page, the page of size
// n that holds at (a torn page after a power cut).
func Zeros(n int, page bool) Damage {
	return Damage{"zeros", func(d []byte, at int, _ *rand.Rand) []byte {
		if page {
			at -= at % n
		}
		for i := at; i < at+n && i < len(d); i++ {
			d[i] = 0
		}
		return d
	}}
}

// Cut removes n bytes at at (a lost block: what followed moves up).
func Cut(n int) Damage {
	return Damage{"truncated-middle", func(d []byte, at int, _ *rand.Rand) []byte {
		return append(d[:at:at], d[min(at+n, len(d)):]...)
	}}
}

// CopyBlock writes the n bytes at from over those at at (a misdirected
// write).
func CopyBlock(from, n int) Damage {
	return Damage{"duplicated-block", func(d []byte, at int, _ *rand.Rand) []byte {
		copy(d[at:], bytes.Clone(d[from:min(from+n, len(d))]))
		return d
	}}
}
