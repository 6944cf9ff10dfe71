package arrowrow

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Records decodes the rows of a batch written with Schema. Columns it does
// not know are ignored and missing ones stay zero, so shards of a later
// schema version still read. The records own their memory: the batch may be
// released.
func Records(batch arrow.RecordBatch) ([]*record.Record, error) {
	cols := map[string]arrow.Array{}
	for i, f := range batch.Schema().Fields() {
		cols[f.Name] = batch.Column(i)
	}
	ids, ok := cols[ColID].(*array.String)
	if !ok {
		return nil, fmt.Errorf("no string column %q: not a pipe shard", ColID)
	}
	n := int(batch.NumRows())
	out := make([]*record.Record, n)
	for i := range n {
		rec := &record.Record{ID: strings.Clone(ids.Value(i))}
		if err := decodeRow(cols, i, rec); err != nil {
			return nil, fmt.Errorf("row %d (id %q): %w", i, rec.ID, err)
		}
		out[i] = rec
	}
	return out, nil
}

func decodeRow(cols map[string]arrow.Array, i int, rec *record.Record) error {
	r := row{cols: cols, i: i}
	if err := r.messages(rec); err != nil {
		return err
	}
	if tools, ok := r.str(ColTools); ok {
		rec.Tools = json.RawMessage(tools)
	}
	if err := r.json(ColMeta, &rec.Meta); err != nil {
		return err
	}
	if reasoning, ok := r.str(ColReasoning); ok {
		c, err := r.completion(reasoning)
		if err != nil {
			return err
		}
		rec.Completion = c
	}
	rec.Tokens = r.tokens()
	if reason, ok := r.str(ColRejectReason); ok {
		rj := &record.Rejection{Reason: reason}
		rj.Stage, _ = r.str(ColRejectStage)
		rj.Detail, _ = r.str(ColRejectDetail)
		rec.Reject = rj
	}
	return nil
}

// row is row i of a batch's columns, by name. Its readers give a column
// that is absent, of another type or null in the row as the zero value
// (str also says so).
type row struct {
	cols map[string]arrow.Array
	i    int
}

func (r row) str(name string) (string, bool) {
	a, ok := r.cols[name].(*array.String)
	if !ok || a.IsNull(r.i) {
		return "", false
	}
	// A copy: Value points into the batch, which the caller releases.
	return strings.Clone(a.Value(r.i)), true
}

func (r row) int(name string) int {
	a, ok := r.cols[name].(*array.Int32)
	if !ok || a.IsNull(r.i) {
		return 0
	}
	return int(a.Value(r.i))
}

func (r row) float(name string) float64 {
	a, ok := r.cols[name].(*array.Float64)
	if !ok || a.IsNull(r.i) {
		return 0
	}
	return a.Value(r.i)
}

// json decodes the JSON text of a string column into dst; a null leaves
// dst as it is.
func (r row) json(name string, dst any) error {
	if v, ok := r.str(name); ok {
		if err := json.Unmarshal([]byte(v), dst); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// messages reads the conversation: a list of structs from pipe-row-2 on,
// JSON text in pipe-row-1.
func (r row) messages(rec *record.Record) error {
	switch a := r.cols[ColMessages].(type) {
	case *array.List: // pipe-row-2 and later
		var err error
		rec.Messages, err = messageList(a, r.i)
		return err
	case *array.String: // pipe-row-1: JSON text
		return r.json(ColMessages, &rec.Messages)
	}
	return nil
}

// completion reads the completion of a row whose reasoning column is set.
func (r row) completion(reasoning string) (*record.Completion, error) {
	c := &record.Completion{Reasoning: reasoning}
	c.Answer, _ = r.str(ColAnswer)
	c.FinishReason, _ = r.str(ColFinishReason)
	if err := r.json(ColMatchedStop, &c.MatchedStop); err != nil {
		return nil, err
	}
	if err := r.json(ColToolCalls, &c.ToolCalls); err != nil {
		return nil, err
	}
	c.PromptTokens, c.CompletionTokens = r.int(ColPromptTokens), r.int(ColCompletionTokens)
	c.CachedTokens, c.ReasoningTokens = r.int(ColCachedTokens), r.int(ColReasoningTokens)
	c.PromptIDs, c.OutputIDs = intList(r.cols[ColPromptIDs], r.i), intList(r.cols[ColOutputIDs], r.i)
	c.SpecVerifyCt, c.SpecAcceptLength = r.int(ColSpecVerifyCt), r.float(ColSpecAcceptLength)
	c.LatencySeconds = r.float(ColLatency)
	c.Server, _ = r.str(ColServer)
	c.Attempts = r.int(ColAttempts)
	c.SystemPrompt, _ = r.str(ColSystemPrompt)
	if err := r.json(ColRequest, &c.Request); err != nil {
		return nil, err
	}
	return c, nil
}

// tokens reads the tokens; nil when the row has no input ids.
func (r row) tokens() *record.Tokens {
	l, ok := r.cols[ColInputIDs].(*array.List)
	if !ok || l.IsNull(r.i) {
		return nil
	}
	t := &record.Tokens{}
	start, end := l.ValueOffsets(r.i)
	vals := l.ListValues().(*array.Int32).Int32Values()[start:end]
	t.InputIDs = append([]int32(nil), vals...)
	if m, ok := r.cols[ColLossMask].(*array.List); ok && !m.IsNull(r.i) {
		ms, me := m.ValueOffsets(r.i)
		t.LossMask = append(record.LossMask(nil), m.ListValues().(*array.Uint8).Uint8Values()[ms:me]...)
	}
	t.NumTokens, t.NumLossTokens = r.int(ColNumTokens), r.int(ColNumLossTokens)
	t.Source, _ = r.str(ColTokensSource)
	return t
}

// intList reads row i of a list<int32> column; nil when null or absent.
func intList(a arrow.Array, i int) []int {
	l, ok := a.(*array.List)
	if !ok || l.IsNull(i) {
		return nil
	}
	start, end := l.ValueOffsets(i)
	vals := l.ListValues().(*array.Int32).Int32Values()[start:end]
	out := make([]int, len(vals))
	for k, v := range vals {
		out[k] = int(v)
	}
	return out
}

// messageList reads row i of a list<MessageType> column; nil when null.
// Struct fields are found by name, so a writer's other field order reads,
// and one an older shard lacks is empty.
func messageList(l *array.List, i int) ([]record.Message, error) {
	if l.IsNull(i) {
		return nil, nil
	}
	st, ok := l.ListValues().(*array.Struct)
	if !ok {
		return nil, nil
	}
	field := func(name string) *array.String {
		t := st.DataType().(*arrow.StructType)
		if k, ok := t.FieldIdx(name); ok {
			s, _ := st.Field(k).(*array.String)
			return s
		}
		return nil
	}
	role, content, reasoning := field(MsgRole), field(MsgContent), field(MsgReasoningContent)
	toolCalls, toolCallID, name := field(MsgToolCalls), field(MsgToolCallID), field(MsgName)
	get := func(a *array.String, k int) string {
		if a == nil || a.IsNull(k) {
			return ""
		}
		return strings.Clone(a.Value(k))
	}
	start, end := l.ValueOffsets(i)
	out := make([]record.Message, 0, end-start)
	for k := int(start); k < int(end); k++ {
		m := record.Message{Role: get(role, k), Content: get(content, k), ReasoningContent: get(reasoning, k),
			ToolCallID: get(toolCallID, k), Name: get(name, k)}
		if toolCalls != nil && !toolCalls.IsNull(k) {
			if err := json.Unmarshal([]byte(toolCalls.Value(k)), &m.ToolCalls); err != nil {
				return nil, fmt.Errorf("%s[%d].%s: %w", ColMessages, k-int(start), MsgToolCalls, err)
			}
		}
		out = append(out, m)
	}
	return out, nil
}
