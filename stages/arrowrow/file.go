package arrowrow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Formats and their file extensions.
const (
	FormatParquet = "parquet"
	FormatArrow   = "arrow"
)

// Ext is the file extension of a format.
func Ext(format string) string {
	if format == FormatArrow {
		return ".arrow"
	}
	return ".parquet"
}

// FileWriter writes rows into one shard file.
type FileWriter interface {
	// Write adds a batch of rows. Parquet puts them into the open row
	// group, which is written out when it holds the rowGroupRows given to
	// NewFileWriter, so a row group can be handed over in small batches:
	// the levels and encodings made for a batch are then those of a few
	// rows, not of a whole row group. An Arrow IPC file takes each batch
	// as one record batch of the file.
	Write(arrow.RecordBatch) error
	// Buffered is about how many bytes (compressed) the open row group
	// holds that are not yet written.
	Buffered() int64
	// Close writes what is buffered and the footer; it does not close the
	// underlying writer.
	Close() error
}

// NewFileWriter starts a shard of format on w, with Parquet row groups of
// rowGroupRows rows. compression is "zstd", "snappy", "lz4" or "none" (""
// means zstd for Parquet, none for Arrow, so that every Arrow reader can
// read it).
func NewFileWriter(w io.Writer, format, compression string, rowGroupRows int, mem memory.Allocator) (FileWriter, error) {
	schema, err := fileSchema()
	if err != nil {
		return nil, err
	}
	switch format {
	case FormatArrow:
		opts := []ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(mem)}
		switch compression {
		case "zstd":
			opts = append(opts, ipc.WithZstd())
		case "lz4":
			opts = append(opts, ipc.WithLZ4())
		case "", "none":
		default:
			return nil, fmt.Errorf("arrow shards take compression zstd, lz4 or none, not %q", compression)
		}
		fw, err := ipc.NewFileWriter(w, opts...)
		if err != nil {
			return nil, err
		}
		return ipcFile{fw}, nil
	case FormatParquet:
		codec := compress.Codecs.Zstd
		switch compression {
		case "", "zstd":
		case "snappy":
			codec = compress.Codecs.Snappy
		case "lz4":
			codec = compress.Codecs.Lz4Raw
		case "none":
			codec = compress.Codecs.Uncompressed
		default:
			return nil, fmt.Errorf("parquet shards take compression zstd, snappy, lz4 or none, not %q", compression)
		}
		if rowGroupRows < 1 {
			return nil, fmt.Errorf("parquet row groups need at least 1 row, not %d", rowGroupRows)
		}
		props := parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithAllocator(mem),
			parquet.WithMaxRowGroupLength(int64(rowGroupRows)), parquet.WithDataPageSize(dataPageSize),
			parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor(ColModel, true),
			parquet.WithDictionaryFor(ColServer, true), parquet.WithDictionaryFor(ColFinishReason, true))
		fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return nil, err
		}
		return parquetFile{fw}, nil
	}
	return nil, fmt.Errorf("unknown format %q (parquet or arrow)", format)
}

// dataPageSize is the Parquet data pages' size before compression:
// arrow-go's default, said here because smaller pages were tried and cost
// more than they saved. Each page is compressed on its own, so a smaller
// page finds its matches in less history: on the sim's answers (16 MB of a
// rehearsal's rejects, compressed a page at a time) zstd ran at
// 200 MB/s on 1 MiB pages, 153 on 512 KiB and 122 on 256 KiB, to 20%, 26%
// and 32% of the size; at the seed's scale 256 KiB pages took 81 s of zstd
// against 54. What they saved is memory (each large column of an open row
// group keeps its page and that page's uncompressed and compressed
// copies): in a 100K rehearsal peak RSS 249 MiB against 235 (512 KiB).
const dataPageSize = 1 << 20

// parquetFile writes into buffered row groups: a row group's pages are
// kept compressed in memory until it is full (pqarrow cuts it at
// MaxRowGroupLength), then written.
type parquetFile struct{ fw *pqarrow.FileWriter }

func (p parquetFile) Write(b arrow.RecordBatch) error { return p.fw.WriteBuffered(b) }
func (p parquetFile) Buffered() int64                 { return p.fw.RowGroupTotalCompressedBytes() }
func (p parquetFile) Close() error                    { return p.fw.Close() }

// ipcFile writes each batch through: nothing is buffered.
type ipcFile struct{ *ipc.FileWriter }

func (ipcFile) Buffered() int64 { return 0 }

// fileSchema is Schema with the shards' metadata: pipe's schema version, and
// the HF datasets features (hfMetadata), so load_dataset gives the columns
// their types without guessing.
func fileSchema() (*arrow.Schema, error) {
	hf, err := hfMetadata(Schema)
	if err != nil {
		return nil, err
	}
	meta := arrow.NewMetadata([]string{"pipe.schema", HFMetadataKey}, []string{Version, hf})
	return arrow.NewSchema(Schema.Fields(), &meta), nil
}

// readBatchRows is the rows of a batch read from a Parquet shard: a row
// group's worth.
const readBatchRows = 1024

// ReadFile calls fn with every record batch of a shard (Parquet or Arrow
// IPC, told by its extension), in order; the batch is released after fn.
func ReadFile(ctx context.Context, path string, mem memory.Allocator, fn func(arrow.RecordBatch) error) error {
	return ReadFileRows(ctx, path, readBatchRows, mem, fn)
}

// ReadFileRows is ReadFile with Parquet batches of at most rows rows (0:
// 1024), for a reader that wants the first few rows: pqarrow's readers
// hold values and levels for a whole batch of every column (~70 MB for
// 1024 rows of a rehearsal's shard). An Arrow IPC shard's batches are as
// written.
func ReadFileRows(ctx context.Context, path string, rows int, mem memory.Allocator, fn func(arrow.RecordBatch) error) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".arrow", ".feather", ".ipc":
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer r.Close()
		for i := range r.NumRecords() {
			if err := ctx.Err(); err != nil {
				return err
			}
			batch, err := r.RecordBatch(i)
			if err != nil {
				return fmt.Errorf("%s: batch %d: %w", path, i, err)
			}
			if err := fn(batch); err != nil {
				return err
			}
		}
		return nil
	case ".parquet":
		pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(mem)))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer pf.Close()
		if rows <= 0 {
			rows = readBatchRows
		}
		return parquetBatches(ctx, path, pf, nil, rows, mem, fn)
	}
	return fmt.Errorf("%s: not a shard (want .parquet or .arrow)", path)
}

// parquetBatches calls fn with each record batch of pf (path names it in
// errors) of at most rows rows, reading only the leaf columns given (nil:
// all of them).
func parquetBatches(ctx context.Context, path string, pf *file.Reader, leaves []int, rows int, mem memory.Allocator, fn func(arrow.RecordBatch) error) error {
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(rows)}, mem)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer rr.Release()
	for rr.Next() {
		if err := fn(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
