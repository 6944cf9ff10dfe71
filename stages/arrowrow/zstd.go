package arrowrow

import (
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// keptZstd is the Parquet zstd codec with its encoders kept between pages.
// arrow-go's own (parquet/compress/zstd.go, zstdCodec.EncodeLevel) takes an
// encoder from a sync.Pool for each page; every GC empties that pool, so a
// writer makes a new encoder every few pages, and each carries 16 MB of
// history (twice the 8 MB window of the default level) plus its match
// tables: the pool and its victim held ~37 MB live at a rehearsal's peak,
// which the GC's heap goal doubles. Here the encoders are on a free list
// the GC leaves alone: as many as pages compressed at once (one per
// writing stage), each reused. They are made with arrow-go's options plus
// WithLowerEncoderMem, which sizes the history to the window instead of
// twice it, and a window of pageWindow instead of the level's 8 MB: pages
// are about dataPageSize (a page ends after the batch of values that
// fills it, so long strings make it larger), and an encoder's history is
// as large as its window whatever the page. Up to the window the compressed bytes are arrow-go's
// (TestKeptZstdSameBytes). Decoding is arrow-go's.
type keptZstd struct {
	orig interface {
		compress.ErrorCodec
		compress.StreamingCodec
	}
	mu   sync.Mutex
	free map[zstd.EncoderLevel][]*zstd.Encoder
}

func init() {
	orig, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err)
	}
	o, ok := orig.(interface {
		compress.ErrorCodec
		compress.StreamingCodec
	})
	if !ok { // a newer arrow-go changed its codec: keep it as it is
		return
	}
	compress.RegisterCodec(compress.Codecs.Zstd, &keptZstd{orig: o, free: map[zstd.EncoderLevel][]*zstd.Encoder{}})
}

func (z *keptZstd) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

// EncodeLevel is arrow-go's zstdCodec.EncodeLevel: the level mapped the
// same way, one frame per page.
func (z *keptZstd) EncodeLevel(dst, src []byte, level int) []byte {
	l := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel {
		l = zstd.EncoderLevelFromZstd(level)
	}
	enc := z.get(l)
	defer z.put(l, enc)
	return enc.EncodeAll(src, dst[:0])
}

// pageWindow is the encoders' window: a page's matches are found up to this
// far back, and its history takes this much memory.
const pageWindow = 2 << 20

func (z *keptZstd) get(l zstd.EncoderLevel) *zstd.Encoder {
	z.mu.Lock()
	if list := z.free[l]; len(list) > 0 {
		enc := list[len(list)-1]
		z.free[l] = list[:len(list)-1]
		z.mu.Unlock()
		return enc
	}
	z.mu.Unlock()
	enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l),
		zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true), zstd.WithLowerEncoderMem(true),
		zstd.WithWindowSize(pageWindow))
	if err != nil { // only for options out of range, which these are not
		panic(err)
	}
	return enc
}

func (z *keptZstd) put(l zstd.EncoderLevel, enc *zstd.Encoder) {
	z.mu.Lock()
	z.free[l] = append(z.free[l], enc)
	z.mu.Unlock()
}

func (z *keptZstd) CompressBound(n int64) int64 { return z.orig.CompressBound(n) }
func (z *keptZstd) Decode(dst, src []byte) []byte {
	return z.orig.Decode(dst, src)
}
func (z *keptZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	return z.orig.DecodeWithError(dst, src)
}
func (z *keptZstd) NewReader(r io.Reader) io.ReadCloser  { return z.orig.NewReader(r) }
func (z *keptZstd) NewWriter(w io.Writer) io.WriteCloser { return z.orig.NewWriter(w) }
func (z *keptZstd) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return z.orig.NewWriterLevel(w, level)
}
