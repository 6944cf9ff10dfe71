package arrowrow

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// FileInfo is what a shard file says of itself, without its rows' data.
type FileInfo struct {
	Format string // FormatParquet or FormatArrow
	Schema *arrow.Schema
	Rows   int64
	// Groups are its Parquet row groups, or its Arrow IPC record batches.
	Groups int
}

// Describe reads a shard's schema and counts (told by its extension, as
// ReadFile does): a Parquet file's from its footer, an Arrow IPC file's
// from its batches' headers.
func Describe(path string, mem memory.Allocator) (*FileInfo, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet":
		pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(mem)))
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable Parquet file: %w", path, err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		schema, err := fr.Schema()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &FileInfo{Format: FormatParquet, Schema: schema, Rows: pf.NumRows(), Groups: pf.NumRowGroups()}, nil
	case ".arrow", ".feather", ".ipc":
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable Arrow IPC file: %w", path, err)
		}
		defer r.Close()
		info := &FileInfo{Format: FormatArrow, Schema: r.Schema(), Groups: r.NumRecords()}
		for i := range r.NumRecords() {
			b, err := r.RecordBatch(i)
			if err != nil {
				return info, fmt.Errorf("%s: batch %d: %w", path, i, err)
			}
			info.Rows += b.NumRows()
		}
		return info, nil
	}
	return nil, fmt.Errorf("%s: not a shard (want .parquet or .arrow)", path)
}
