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
	s := func(name string) (string, bool) {
		a, ok := cols[name].(*array.String)
		if !ok || a.IsNull(i) {
			return "", false
		}
		// A copy: Value points into the batch, which the caller releases.
		return strings.Clone(a.Value(i)), true
	}
	n := func(name string) int {
		a, ok := cols[name].(*array.Int32)
		if !ok || a.IsNull(i) {
			return 0
		}
		return int(a.Value(i))
	}
	f := func(name string) float64 {
		a, ok := cols[name].(*array.Float64)
		if !ok || a.IsNull(i) {
			return 0
		}
		return a.Value(i)
	}
	js := func(name string, dst any) error {
		if v, ok := s(name); ok {
			if err := json.Unmarshal([]byte(v), dst); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	}
	switch a := cols[ColMessages].(type) {
	case *array.List: // pipe-row-2 and later
		var err error
		if rec.Messages, err = messageList(a, i); err != nil {
			return err
		}
	case *array.String: // pipe-row-1: JSON text
		if err := js(ColMessages, &rec.Messages); err != nil {
			return err
		}
	}
	if tools, ok := s(ColTools); ok {
		rec.Tools = json.RawMessage(tools)
	}
	if err := js(ColMeta, &rec.Meta); err != nil {
		return err
	}
	if reasoning, ok := s(ColReasoning); ok {
		c := &record.Completion{Reasoning: reasoning}
		c.Answer, _ = s(ColAnswer)
		c.FinishReason, _ = s(ColFinishReason)
		if err := js(ColMatchedStop, &c.MatchedStop); err != nil {
			return err
		}
		if err := js(ColToolCalls, &c.ToolCalls); err != nil {
			return err
		}
		c.PromptTokens, c.CompletionTokens = n(ColPromptTokens), n(ColCompletionTokens)
		c.CachedTokens, c.ReasoningTokens = n(ColCachedTokens), n(ColReasoningTokens)
		c.PromptIDs, c.OutputIDs = intList(cols[ColPromptIDs], i), intList(cols[ColOutputIDs], i)
		c.SpecVerifyCt, c.SpecAcceptLength = n(ColSpecVerifyCt), f(ColSpecAcceptLength)
		c.LatencySeconds = f(ColLatency)
		c.Server, _ = s(ColServer)
		c.Attempts = n(ColAttempts)
		c.SystemPrompt, _ = s(ColSystemPrompt)
		if err := js(ColRequest, &c.Request); err != nil {
			return err
		}
		rec.Completion = c
	}
	if l, ok := cols[ColInputIDs].(*array.List); ok && !l.IsNull(i) {
		t := &record.Tokens{}
		start, end := l.ValueOffsets(i)
		vals := l.ListValues().(*array.Int32).Int32Values()[start:end]
		t.InputIDs = append([]int32(nil), vals...)
		if m, ok := cols[ColLossMask].(*array.List); ok && !m.IsNull(i) {
			ms, me := m.ValueOffsets(i)
			t.LossMask = append(record.LossMask(nil), m.ListValues().(*array.Uint8).Uint8Values()[ms:me]...)
		}
		t.NumTokens, t.NumLossTokens = n(ColNumTokens), n(ColNumLossTokens)
		t.Source, _ = s(ColTokensSource)
		rec.Tokens = t
	}
	if reason, ok := s(ColRejectReason); ok {
		r := &record.Rejection{Reason: reason}
		r.Stage, _ = s(ColRejectStage)
		r.Detail, _ = s(ColRejectDetail)
		rec.Reject = r
	}
	return nil
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
