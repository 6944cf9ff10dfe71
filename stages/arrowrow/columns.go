package arrowrow

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// ReadColumns is ReadFile reading only the named top-level columns of a
// Parquet shard (the others are neither read nor decompressed: token id
// lists are most of a shard); batches have just those columns, those the
// file lacks left out. An Arrow IPC shard is read whole, as ReadFile does.
func ReadColumns(ctx context.Context, path string, columns []string, mem memory.Allocator, fn func(arrow.RecordBatch) error) error {
	if strings.ToLower(filepath.Ext(path)) != ".parquet" {
		return ReadFile(ctx, path, mem, fn)
	}
	pf, err := file.OpenParquetFile(path, false, file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer pf.Close()
	want := map[string]bool{}
	for _, c := range columns {
		want[c] = true
	}
	var leaves []int
	sc := pf.MetaData().Schema
	for i := range sc.NumColumns() {
		if p := sc.Column(i).ColumnPath(); len(p) > 0 && want[p[0]] {
			leaves = append(leaves, i)
		}
	}
	if len(leaves) == 0 {
		return nil // none of the columns: nothing to read (nil leaves would read them all)
	}
	return parquetBatches(ctx, path, pf, leaves, readBatchRows, mem, fn)
}

// EachID calls fn with the id of every row of a shard, in order, reading
// only that column of a Parquet shard.
func EachID(ctx context.Context, path string, mem memory.Allocator, fn func(id string)) error {
	return ReadColumns(ctx, path, []string{ColID}, mem, func(b arrow.RecordBatch) error {
		idx := b.Schema().FieldIndices(ColID)
		if len(idx) == 0 {
			return fmt.Errorf("%s has no %q column", path, ColID)
		}
		col, ok := b.Column(idx[0]).(*array.String)
		if !ok {
			return fmt.Errorf("%s: column %q is %s, not strings", path, ColID, b.Column(idx[0]).DataType())
		}
		for i := range col.Len() {
			fn(col.Value(i))
		}
		return nil
	})
}
