package arrowrow

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// TestKeptZstdSameBytes: the codec registered for Parquet's zstd writes
// the bytes arrow-go's own codec writes for pages up to its window
// (pageWindow; pages are about dataPageSize), and for larger ones (a single value
// of many MB) bytes that arrow-go reads back, at most 2% more of them; its
// own decoding reads them all back, for pages from empty to beyond arrow-go's
// 8 MB window.
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
	for _, n := range []int{0, 1, 1000, 128 << 10, 1<<20 + 7, pageWindow, pageWindow + 1, 9 << 20, 20 << 20} {
		src := text(n)
		for _, level := range []int{compress.DefaultCompressionLevel, 1, 3, 7} {
			for range 2 { // a kept encoder a second time too
				got := kept.EncodeLevel(nil, src, level)
				want := orig.EncodeLevel(nil, src, level)
				if n <= pageWindow && !bytes.Equal(got, want) {
					t.Fatalf("%d bytes at level %d: %d compressed bytes, arrow-go's codec writes %d (or other bytes)", n, level, len(got), len(want))
				}
				if n > pageWindow && float64(len(got)) > 1.02*float64(len(want)) {
					t.Fatalf("%d bytes at level %d: %d compressed bytes, arrow-go's codec writes %d", n, level, len(got), len(want))
				}
				if back, err := orig.DecodeWithError(nil, got); err != nil || !bytes.Equal(back, src) {
					t.Fatalf("%d bytes at level %d: arrow-go's codec reads back %d bytes, err %v", n, level, len(back), err)
				}
				back, err := kept.DecodeWithError(nil, got)
				if err != nil || !bytes.Equal(back, src) {
					t.Fatalf("%d bytes at level %d: read back %d bytes, err %v", n, level, len(back), err)
				}
			}
		}
	}
}

// An encoder's memory is about its window, not the level's 8 MB: a new
// encoder compressing one 1 MiB page allocates its window and 3 MiB more
// (match tables, blocks) at most; with the 8 MB window it took 10.9 MB.
func TestKeptZstdEncoderMemory(t *testing.T) {
	kept := &keptZstd{free: map[zstd.EncoderLevel][]*zstd.Encoder{}}
	src := bytes.Repeat([]byte("the model thinks step by step 151644 "), (1<<20)/37)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := kept.EncodeLevel(make([]byte, 0, len(src)), src, compress.DefaultCompressionLevel)
	runtime.ReadMemStats(&after)
	if len(out) == 0 {
		t.Fatal("nothing compressed")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > pageWindow+3<<20 {
		t.Fatalf("a new encoder took %d bytes for one 1 MiB page; want its window (%d) and 3 MiB at most", n, pageWindow)
	}
}
