package arrowrow

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// TestKeptZstdSameBytes: the codec registered for Parquet's zstd writes
// the bytes arrow-go's own codec writes (so shards are the same files) and
// reads them back, for pages from empty to larger than the 8 MB window.
func TestKeptZstdSameBytes(t *testing.T) {
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	kept, ok := codec.(*keptZstd)
	if !ok {
		t.Fatalf("the Parquet zstd codec is %T, not *keptZstd", codec)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the model thinks step by step before it answers <think> </think> 151644 151645 assistant user")
	text := func(n int) []byte {
		var b bytes.Buffer
		for b.Len() < n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
			if rng.IntN(50) == 0 { // some incompressible bytes too
				for range 64 {
					b.WriteByte(byte(rng.Uint32()))
				}
			}
		}
		return b.Bytes()[:n]
	}
	// arrow-go's codec, as registered before this package replaced it.
	orig := kept.orig
	for _, n := range []int{0, 1, 1000, 128 << 10, 1<<20 + 7, 9 << 20, 20 << 20} {
		src := text(n)
		for _, level := range []int{compress.DefaultCompressionLevel, 1, 3, 7} {
			for range 2 { // a kept encoder a second time too
				got := kept.EncodeLevel(nil, src, level)
				want := orig.EncodeLevel(nil, src, level)
				if !bytes.Equal(got, want) {
					t.Fatalf("%d bytes at level %d: %d compressed bytes, arrow-go's codec writes %d (or other bytes)", n, level, len(got), len(want))
				}
				back, err := kept.DecodeWithError(nil, got)
				if err != nil || !bytes.Equal(back, src) {
					t.Fatalf("%d bytes at level %d: read back %d bytes, err %v", n, level, len(back), err)
				}
			}
		}
	}
}
