package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/arrowrow"
)

// pipe inspect: shard files.

type shardReport struct {
	Path      string       `json:"path"`
	Format    string       `json:"format"`
	Schema    string       `json:"schema,omitempty"` // pipe.schema metadata
	Columns   []columnInfo `json:"columns"`
	Rows      int64        `json:"rows"`
	Tokens    int64        `json:"tokens"`
	LossTok   int64        `json:"loss_tokens"`
	Bytes     int64        `json:"bytes"`
	Groups    int          `json:"row_groups"` // Parquet row groups or Arrow record batches
	PipeShard bool         `json:"pipe_shard"` // has the id column rows are read by
}

type columnInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// shardFile reads a shard's metadata, its token counts (the num_tokens
// and num_loss_tokens columns only, for Parquet) and its first n rows,
// through arrowrow (the one reader of shard files).
func (ins *inspector) shardFile(path string, n int) (*shardReport, []rowReport, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	sr := &shardReport{Path: path, Bytes: st.Size()}
	info, err := arrowrow.Describe(path, ins.mem)
	if info == nil {
		return nil, nil, err
	}
	sr.Format, sr.Rows, sr.Groups = info.Format, info.Rows, info.Groups
	sr.setSchema(info.Schema)
	if err != nil {
		return sr, nil, err
	}
	if sr.Rows == 0 {
		return sr, nil, nil
	}
	cols := []string{arrowrow.ColNumTokens, arrowrow.ColNumLossTokens}
	if err := arrowrow.ReadColumns(ins.ctx, path, cols, ins.mem, func(b arrow.RecordBatch) error { sr.sumTokens(b); return nil }); err != nil {
		return sr, nil, err
	}
	if n == 0 || !sr.PipeShard {
		return sr, nil, nil
	}
	var first []*record.Record
	err = arrowrow.ReadFileRows(ins.ctx, path, n, ins.mem, func(batch arrow.RecordBatch) error {
		k := min(int64(n-len(first)), batch.NumRows())
		part := batch.NewSlice(0, k)
		defer part.Release()
		recs, err := arrowrow.Records(part)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if first = append(first, recs...); len(first) >= n {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return sr, ins.rows(first), err
}

// errEnough ends a read that has the rows it wanted.
var errEnough = errors.New("enough rows")

func (sr *shardReport) setSchema(s *arrow.Schema) {
	if v, ok := s.Metadata().GetValue("pipe.schema"); ok {
		sr.Schema = v
	}
	for _, f := range s.Fields() {
		sr.Columns = append(sr.Columns, columnInfo{Name: f.Name, Type: typeName(f.Type), Nullable: f.Nullable})
		if f.Name == arrowrow.ColID && f.Type.ID() == arrow.STRING {
			sr.PipeShard = true
		}
	}
}

// typeName is a column type as a person reads it: "list<int32>".
func typeName(t arrow.DataType) string {
	switch lt := t.(type) {
	case *arrow.ListType:
		return "list<" + typeName(lt.Elem()) + ">"
	case *arrow.LargeListType:
		return "large_list<" + typeName(lt.Elem()) + ">"
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list<%s, %d>", typeName(lt.Elem()), lt.Len())
	}
	switch t.ID() {
	case arrow.STRING:
		return "string" // Arrow's "utf8", as pyarrow and the README name it
	case arrow.LARGE_STRING:
		return "large_string"
	}
	return t.String()
}

// sumTokens adds the num_tokens and num_loss_tokens columns of batch.
func (sr *shardReport) sumTokens(batch arrow.RecordBatch) {
	for i, f := range batch.Schema().Fields() {
		col, ok := batch.Column(i).(*array.Int32)
		if !ok {
			continue
		}
		var dst *int64
		switch f.Name {
		case arrowrow.ColNumTokens:
			dst = &sr.Tokens
		case arrowrow.ColNumLossTokens:
			dst = &sr.LossTok
		default:
			continue
		}
		for r := range col.Len() {
			if col.IsValid(r) {
				*dst += int64(col.Value(r))
			}
		}
	}
}
