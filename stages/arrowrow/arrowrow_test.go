package arrowrow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/pipe-dev/pipe/pipeline/record"
)

func testRecord(i int) *record.Record {
	ids := make([]int32, 100+i%50)
	for k := range ids {
		ids[k] = int32(k*7919+i) % 151_936
	}
	mask := make(record.LossMask, len(ids))
	for k := 20; k < len(mask); k++ {
		mask[k] = 1
	}
	r := &record.Record{
		ID:       fmt.Sprintf("rec-%05d-ü", i),
		Messages: []record.Message{{Role: "user", Content: fmt.Sprintf("prompt %d — 你好", i)}},
		Completion: &record.Completion{Reasoning: strings.Repeat("думаю ", i%7), Answer: fmt.Sprintf("answer %d 🎉", i),
			FinishReason: "stop", Server: fmt.Sprintf("s%d", i%3), LatencySeconds: float64(i) / 4, Attempts: 1,
			OutputIDs: []int{1, 2, i}, Request: map[string]any{"model": "m", "temperature": 0.5}},
		Tokens: &record.Tokens{InputIDs: ids, LossMask: mask, NumTokens: len(ids), NumLossTokens: len(ids) - 20, Source: "ids"},
		Meta:   map[string]any{"i": float64(i)},
	}
	if i%5 == 0 { // a tool-use conversation: every tool field
		r.Tools = json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"days":{"type":"integer","default":7.0}}}}},{"name":"flat"}]`)
		r.Messages = append(r.Messages,
			record.Message{Role: "assistant", Content: "", ReasoningContent: "call it", ToolCalls: []record.ToolCall{
				{ID: "call_1", Type: "function", Function: record.FunctionCall{Name: "get_weather", Arguments: json.RawMessage(`"{\"city\": \"Zürich\"}"`)}},
				{Function: record.FunctionCall{Name: "flat", Arguments: json.RawMessage(`{"z":1,"a":[1.0,"x"]}`)}}}},
			record.Message{Role: "tool", Content: "12°C", ToolCallID: "call_1", Name: "get_weather"},
			record.Message{Role: "tool", Content: "ok"})
		if i%10 == 0 {
			r.Completion.ToolCalls = []record.ToolCall{{ID: "c2", Type: "function", Function: record.FunctionCall{Name: "flat", Arguments: json.RawMessage(`{}`)}}}
		}
	}
	return r
}

// writeFile writes recs into path in batches of batch rows.
func writeFile(t *testing.T, path, format, compression string, recs []*record.Record, batch int) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fw, err := NewFileWriter(f, format, compression, batch, mem)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder(mem)
	defer b.Release()
	flush := func() {
		rb := b.NewBatch()
		defer rb.Release()
		if err := fw.Write(rb); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range recs {
		if err := b.Append(r); err != nil {
			t.Fatal(err)
		}
		if b.Len() == batch {
			flush()
		}
	}
	if b.Len() > 0 {
		flush()
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
}

// poisonAllocator overwrites what is freed, so that anything still pointing
// into a released batch reads garbage.
type poisonAllocator struct{ *memory.CheckedAllocator }

func (p poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 'X'
	}
	p.CheckedAllocator.Free(b)
}

func readAll(t *testing.T, path string, mem memory.Allocator) []*record.Record {
	t.Helper()
	var out []*record.Record
	err := ReadFile(context.Background(), path, mem, func(b arrow.RecordBatch) error {
		recs, err := Records(b)
		out = append(out, recs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every compression of both formats reads back as written, and the records
// read own their memory: nothing in them points into the batches, which are
// released (here: overwritten) after the callback.
func TestArrowrowFormatsAndCompressions(t *testing.T) {
	recs := make([]*record.Record, 2500)
	for i := range recs {
		recs[i] = testRecord(i)
	}
	for _, tc := range []struct{ format, compression string }{
		{FormatParquet, ""}, {FormatParquet, "zstd"}, {FormatParquet, "snappy"}, {FormatParquet, "lz4"}, {FormatParquet, "none"},
		{FormatArrow, ""}, {FormatArrow, "zstd"}, {FormatArrow, "lz4"}, {FormatArrow, "none"},
	} {
		t.Run(tc.format+"-"+tc.compression, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "part-00000"+Ext(tc.format))
			writeFile(t, path, tc.format, tc.compression, recs, 1500) // batches over the reader's 1024
			mem := poisonAllocator{memory.NewCheckedAllocator(memory.NewGoAllocator())}
			got := readAll(t, path, mem)
			mem.AssertSize(t, 0)
			if len(got) != len(recs) {
				t.Fatalf("read %d rows, wrote %d", len(got), len(recs))
			}
			for i := range recs {
				if !reflect.DeepEqual(got[i], recs[i]) {
					g, _ := json.Marshal(got[i])
					w, _ := json.Marshal(recs[i])
					t.Fatalf("row %d:\n got %.300s\nwant %.300s", i, g, w)
				}
			}
		})
	}
	for _, tc := range []struct{ format, compression, err string }{
		{FormatArrow, "snappy", "arrow shards take"},
		{FormatParquet, "brotli", "parquet shards take"},
		{"csv", "", "unknown format"},
	} {
		if _, err := NewFileWriter(&bytes.Buffer{}, tc.format, tc.compression, 1024, memory.DefaultAllocator); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s with %q: %v, want %q", tc.format, tc.compression, err, tc.err)
		}
	}
	if err := ReadFile(context.Background(), "x.csv", memory.DefaultAllocator, nil); err == nil || !strings.Contains(err.Error(), "not a shard") {
		t.Errorf("reading x.csv: %v", err)
	}
}

// A record whose free JSON does not encode is refused whole: the columns
// stay aligned and the rows before and after it are written.
func TestArrowrowAppendErrorLeavesNoPartialRow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewBuilder(mem)
	defer b.Release()
	for _, bad := range []*record.Record{
		{ID: "meta", Meta: map[string]any{"x": math.NaN()}},
		{ID: "request", Completion: &record.Completion{Answer: "a", Request: map[string]any{"f": func() {}}}},
		{ID: "stop", Completion: &record.Completion{Answer: "a", MatchedStop: make(chan int)}},
	} {
		if err := b.Append(testRecord(0)); err != nil {
			t.Fatal(err)
		}
		n, size := b.Len(), b.Bytes()
		if err := b.Append(bad); err == nil {
			t.Fatalf("%s: no error", bad.ID)
		}
		if b.Len() != n || b.Bytes() != size {
			t.Fatalf("%s: a refused record changed the builder: %d rows, %d bytes; was %d, %d", bad.ID, b.Len(), b.Bytes(), n, size)
		}
	}
	if err := b.Append(testRecord(1)); err != nil {
		t.Fatal(err)
	}
	batch := b.NewBatch() // panics if a column is longer than the others
	defer batch.Release()
	recs, err := Records(batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []*record.Record{testRecord(0), testRecord(0), testRecord(0), testRecord(1)}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("got %d rows %v", len(recs), recs)
	}
}

// Request settings become typed columns whatever Go type holds the number.
func TestArrowrowRequestColumns(t *testing.T) {
	mem := memory.NewGoAllocator()
	b := NewBuilder(mem)
	defer b.Release()
	half, k := 0.5, 40
	for _, req := range []map[string]any{
		{"model": "a", "api": "chat", "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "max_new_tokens": int64(4096), "enable_thinking": true},
		{"model": "b", "temperature": json.Number("1.5"), "top_p": &half, "top_k": &k, "enable_thinking": false},
		{"temperature": "hot", "top_k": nil, "enable_thinking": "yes"}, // not numbers / bools: null
		nil,
	} {
		if err := b.Append(&record.Record{ID: "r", Completion: &record.Completion{Request: req}}); err != nil {
			t.Fatal(err)
		}
	}
	batch := b.NewBatch()
	defer batch.Release()
	col := func(name string) arrow.Array {
		for i, f := range batch.Schema().Fields() {
			if f.Name == name {
				return batch.Column(i)
			}
		}
		t.Fatalf("no column %s", name)
		return nil
	}
	show := func(name string) string {
		a := col(name)
		var s []string
		for i := range a.Len() {
			s = append(s, a.ValueStr(i))
		}
		return strings.Join(s, " ")
	}
	for name, want := range map[string]string{
		ColModel:          "a b (null) (null)",
		ColAPI:            "chat (null) (null) (null)",
		ColTemperature:    "0.7 1.5 (null) (null)",
		ColTopP:           "0.9 0.5 (null) (null)",
		ColTopK:           "20 40 (null) (null)",
		ColMinP:           "0.05 (null) (null) (null)",
		ColMaxNewTokens:   "4096 (null) (null) (null)",
		ColEnableThinking: "true false (null) (null)",
	} {
		if got := show(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if col(ColRequest).IsValid(3) {
		t.Errorf("request of a completion without settings is %q, want null", col(ColRequest).ValueStr(3))
	}
}

// Records reads batches of another schema version: columns it does not know
// are ignored, missing ones stay zero; a batch without an id column is not
// a pipe shard.
func TestArrowrowRecordsOtherSchemas(t *testing.T) {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.String},
		{Name: ColInputIDs, Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "future_column", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	rb.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	lb := rb.Field(1).(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{7, 8, 9}, nil)
	lb.AppendNull()
	rb.Field(2).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	batch := rb.NewRecordBatch()
	defer batch.Release()
	recs, err := Records(batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []*record.Record{{ID: "a", Tokens: &record.Tokens{InputIDs: []int32{7, 8, 9}}}, {ID: "b"}}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("got %+v %+v", recs[0], recs[1])
	}

	other := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}}, nil))
	defer other.Release()
	other.Field(0).(*array.StringBuilder).Append("t")
	ob := other.NewRecordBatch()
	defer ob.Release()
	if _, err := Records(ob); err == nil || !strings.Contains(err.Error(), "not a pipe shard") {
		t.Fatalf("a batch without id: %v", err)
	}
}

// Shards of pipe-row-1 hold messages as JSON text: they still read, with
// the same messages as a pipe-row-2 shard of the same records; and messages
// with reasoning read back from the struct column as written.
func TestArrowrowMessagesOldAndNew(t *testing.T) {
	mem := memory.NewGoAllocator()
	msgs := []record.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"},
		{Role: "assistant", Content: "hello", ReasoningContent: "greet — 你好"}, {Role: "user", Content: ""}}
	old := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.String},
		{Name: ColMessages, Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil))
	defer old.Release()
	js, _ := json.Marshal(msgs)
	old.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b"}, nil)
	old.Field(1).(*array.StringBuilder).AppendValues([]string{string(js), ""}, []bool{true, false})
	ob := old.NewRecordBatch()
	defer ob.Release()
	got, err := Records(ob)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0].Messages, msgs) || got[1].Messages != nil {
		t.Fatalf("pipe-row-1 messages read as %+v, %+v", got[0].Messages, got[1].Messages)
	}

	b := NewBuilder(mem)
	defer b.Release()
	for _, r := range []*record.Record{{ID: "a", Messages: msgs}, {ID: "b"}, {ID: "c", Messages: []record.Message{}}} {
		if err := b.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	nb := b.NewBatch()
	defer nb.Release()
	if typ := nb.Schema().Field(1).Type; !arrow.TypeEqual(typ, arrow.ListOf(MessageType)) {
		t.Fatalf("messages column is %s", typ)
	}
	got, err = Records(nb)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0].Messages, msgs) || got[1].Messages != nil || got[2].Messages == nil || len(got[2].Messages) != 0 {
		t.Fatalf("pipe-row-2 messages read as %+v / %+v / %+v", got[0].Messages, got[1].Messages, got[2].Messages)
	}
	// reasoning_content is null where a turn has none, as HF datasets shows it.
	st := nb.Column(1).(*array.List).ListValues().(*array.Struct)
	if rc := st.Field(2); !rc.IsNull(0) || rc.IsNull(2) {
		t.Fatalf("reasoning_content nulls: %v", rc)
	}
	// So are the tool fields of a turn without them.
	for k := 3; k < 6; k++ {
		if f := st.Field(k); f.NullN() != f.Len() {
			t.Fatalf("%s of turns without tools: %v", MessageType.Field(k).Name, f)
		}
	}

	// pipe-row-2: messages without the tool fields read with them empty.
	row2 := arrow.StructOf(MessageType.Fields()[:3]...)
	rb := array.NewRecordBuilder(mem, arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.String},
		{Name: ColMessages, Type: arrow.ListOf(row2), Nullable: true},
	}, nil))
	defer rb.Release()
	rb.Field(0).(*array.StringBuilder).Append("a")
	lb := rb.Field(1).(*array.ListBuilder)
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	for _, m := range msgs {
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append(m.Role)
		sb.FieldBuilder(1).(*array.StringBuilder).Append(m.Content)
		if m.ReasoningContent == "" {
			sb.FieldBuilder(2).(*array.StringBuilder).AppendNull()
		} else {
			sb.FieldBuilder(2).(*array.StringBuilder).Append(m.ReasoningContent)
		}
	}
	b2 := rb.NewRecordBatch()
	defer b2.Release()
	if got, err = Records(b2); err != nil || !reflect.DeepEqual(got[0].Messages, msgs) || got[0].Tools != nil {
		t.Fatalf("pipe-row-2 shard read as %+v (%v)", got[0], err)
	}
}

// ReadFileRows reads a Parquet shard in batches of the rows asked, every
// row once, in order, and holds less for a small batch: the Arrow buffers
// out while a batch of every column is being read are at most a sixth of a
// row group's at 32 rows (the report's sampler reads so to show a few
// rows).
func TestArrowrowReadFileRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.parquet")
	var recs []*record.Record
	for i := range 1024 {
		ids := make([]int32, 2000)
		for j := range ids {
			ids[j] = int32(i*7 + j)
		}
		recs = append(recs, &record.Record{ID: fmt.Sprintf("r-%04d", i),
			Completion: &record.Completion{Reasoning: strings.Repeat("think ", 300), Answer: "a", FinishReason: "stop"},
			Tokens:     &record.Tokens{InputIDs: ids, LossMask: make(record.LossMask, len(ids)), NumTokens: len(ids)}})
	}
	writeFile(t, path, FormatParquet, "zstd", recs, 1024)
	peak := map[int]int{}
	for _, rows := range []int{32, 1024} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		var got []string
		err := ReadFileRows(context.Background(), path, rows, mem, func(b arrow.RecordBatch) error {
			peak[rows] = max(peak[rows], mem.CurrentAlloc())
			if b.NumRows() > int64(rows) {
				t.Fatalf("a batch of %d rows; asked for %d", b.NumRows(), rows)
			}
			rs, err := Records(b)
			for _, r := range rs {
				got = append(got, r.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		mem.AssertSize(t, 0)
		if len(got) != len(recs) || got[0] != recs[0].ID || got[len(got)-1] != recs[len(recs)-1].ID {
			t.Fatalf("batches of %d: read %d rows (%v … ), wrote %d", rows, len(got), got[:min(3, len(got))], len(recs))
		}
	}
	if peak[32]*6 > peak[1024] {
		t.Fatalf("Arrow buffers at most %d bytes out in batches of 32 rows, %d in batches of 1024", peak[32], peak[1024])
	}
}

// Describe gives a shard's schema and counts without its rows: a Parquet
// file's row groups from its footer, an Arrow IPC file's batches.
func TestDescribe(t *testing.T) {
	recs := make([]*record.Record, 25)
	for i := range recs {
		recs[i] = testRecord(i)
	}
	for _, format := range []string{FormatParquet, FormatArrow} {
		path := filepath.Join(t.TempDir(), "part-00000"+Ext(format))
		writeFile(t, path, format, "zstd", recs, 10)
		info, err := Describe(path, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if info.Format != format || info.Rows != 25 || info.Groups != 3 || info.Schema.NumFields() != Schema.NumFields() {
			t.Errorf("%s: %+v, want 25 rows in 3 groups of pipe's schema", format, info)
		}
	}
	bad := filepath.Join(t.TempDir(), "x.parquet")
	os.WriteFile(bad, []byte("not parquet"), 0o644)
	if _, err := Describe(bad, memory.DefaultAllocator); err == nil || !strings.Contains(err.Error(), "not a readable Parquet file") {
		t.Errorf("a file that is not Parquet: %v", err)
	}
}
