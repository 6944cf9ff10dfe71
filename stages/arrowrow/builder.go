package arrowrow

import (
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/pipe-dev/pipe/pipeline/record"
)

// Builder accumulates records into the columns of one record batch.
type Builder struct {
	b     *array.RecordBuilder
	col   map[string]int
	rows  int
	bytes int64 // rough size of what is buffered, for shard rotation
}

// NewBuilder returns an empty builder; Release it when done.
func NewBuilder(mem memory.Allocator) *Builder {
	col := map[string]int{}
	for i, f := range Schema.Fields() {
		col[f.Name] = i
	}
	return &Builder{b: array.NewRecordBuilder(mem, Schema), col: col}
}

// Release frees the builder's buffers.
func (b *Builder) Release() { b.b.Release() }

// Len is the number of rows buffered.
func (b *Builder) Len() int { return b.rows }

// Bytes is roughly how many bytes the buffered rows take.
func (b *Builder) Bytes() int64 { return b.bytes }

// NewBatch returns the buffered rows as a record batch (the caller releases
// it) and empties the builder.
func (b *Builder) NewBatch() arrow.RecordBatch {
	b.rows, b.bytes = 0, 0
	return b.b.NewRecordBatch()
}

func (b *Builder) str(name string, s string, valid bool) {
	sb := b.b.Field(b.col[name]).(*array.StringBuilder)
	if !valid {
		sb.AppendNull()
		return
	}
	sb.Append(s)
	b.bytes += int64(len(s))
}

// jsonCol is a JSON column's value, encoded before any column is appended
// to, so that a value that does not encode leaves no partial row behind.
type jsonCol struct {
	s     string
	valid bool
}

func encodeJSON(name string, v any, valid bool) (jsonCol, error) {
	if !valid {
		return jsonCol{}, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return jsonCol{}, fmt.Errorf("%s: %w", name, err)
	}
	return jsonCol{string(data), true}, nil
}

func (b *Builder) i32(name string, v int, valid bool) {
	ib := b.b.Field(b.col[name]).(*array.Int32Builder)
	if !valid {
		ib.AppendNull()
		return
	}
	ib.Append(int32(v))
}

func (b *Builder) f64(name string, v float64, valid bool) {
	fb := b.b.Field(b.col[name]).(*array.Float64Builder)
	if !valid {
		fb.AppendNull()
		return
	}
	fb.Append(v)
}

func (b *Builder) ints(name string, v []int, valid bool) {
	lb := b.b.Field(b.col[name]).(*array.ListBuilder)
	if !valid {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	vb.Reserve(len(v))
	for _, x := range v {
		vb.UnsafeAppend(int32(x))
	}
	b.bytes += 4 * int64(len(v))
}

// messages appends the conversation as a list of MessageType; nil is
// null. calls are the messages' tool_calls as JSON (messageCalls).
func (b *Builder) messages(msgs []record.Message, calls []string) {
	lb := b.b.Field(b.col[ColMessages]).(*array.ListBuilder)
	if msgs == nil {
		lb.AppendNull()
		return
	}
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	var fields [6]*array.StringBuilder
	for k := range fields {
		fields[k] = sb.FieldBuilder(k).(*array.StringBuilder)
	}
	optional := func(f *array.StringBuilder, s string) {
		if s == "" {
			f.AppendNull()
		} else {
			f.Append(s)
		}
	}
	for i := range msgs {
		m := &msgs[i]
		sb.Append(true)
		fields[0].Append(m.Role)
		fields[1].Append(m.Content)
		optional(fields[2], m.ReasoningContent)
		var tc string
		if calls != nil {
			tc = calls[i]
		}
		optional(fields[3], tc)
		optional(fields[4], m.ToolCallID)
		optional(fields[5], m.Name)
		b.bytes += int64(len(m.Role) + len(m.Content) + len(m.ReasoningContent) + len(tc) + len(m.ToolCallID) + len(m.Name))
	}
}

// messageCalls is each message's tool_calls as JSON ("" for none), or nil
// when no message has any.
func messageCalls(msgs []record.Message) ([]string, error) {
	var out []string
	for i := range msgs {
		if len(msgs[i].ToolCalls) == 0 {
			continue
		}
		if out == nil {
			out = make([]string, len(msgs))
		}
		c, err := encodeJSON(ColMessages, msgs[i].ToolCalls, true)
		if err != nil {
			return nil, fmt.Errorf("message %d tool_calls: %w", i+1, err)
		}
		out[i] = c.s
	}
	return out, nil
}

// Append adds one record as a row. On an error nothing is appended.
func (b *Builder) Append(rec *record.Record) error {
	c := rec.Completion
	has := c != nil
	if c == nil {
		c = &record.Completion{}
	}
	var js [5]jsonCol
	for i, v := range []struct {
		name  string
		v     any
		valid bool
	}{
		{ColMatchedStop, c.MatchedStop, has && c.MatchedStop != nil},
		{ColRequest, c.Request, c.Request != nil},
		{ColMeta, rec.Meta, rec.Meta != nil},
		{ColTools, rec.Tools, len(rec.Tools) > 0},
		{ColToolCalls, c.ToolCalls, len(c.ToolCalls) > 0},
	} {
		var err error
		if js[i], err = encodeJSON(v.name, v.v, v.valid); err != nil {
			return err
		}
	}
	matchedStop, request, meta, tools, toolCalls := js[0], js[1], js[2], js[3], js[4]
	calls, err := messageCalls(rec.Messages)
	if err != nil {
		return err
	}
	b.str(ColID, rec.ID, true)
	b.messages(rec.Messages, calls)
	b.str(ColTools, tools.s, tools.valid)
	b.str(ColReasoning, c.Reasoning, has)
	b.str(ColAnswer, c.Answer, has)
	b.str(ColFinishReason, c.FinishReason, has)
	b.str(ColMatchedStop, matchedStop.s, matchedStop.valid)
	b.str(ColToolCalls, toolCalls.s, toolCalls.valid)
	b.i32(ColPromptTokens, c.PromptTokens, has)
	b.i32(ColCompletionTokens, c.CompletionTokens, has)
	b.i32(ColCachedTokens, c.CachedTokens, has)
	b.i32(ColReasoningTokens, c.ReasoningTokens, has)
	b.ints(ColPromptIDs, c.PromptIDs, has && c.PromptIDs != nil)
	b.ints(ColOutputIDs, c.OutputIDs, has && c.OutputIDs != nil)
	b.i32(ColSpecVerifyCt, c.SpecVerifyCt, has)
	b.f64(ColSpecAcceptLength, c.SpecAcceptLength, has)
	b.f64(ColLatency, c.LatencySeconds, has)
	b.str(ColServer, c.Server, has)
	b.i32(ColAttempts, c.Attempts, has)
	b.str(ColSystemPrompt, c.SystemPrompt, has)
	req := c.Request
	model, okModel := req["model"].(string)
	b.str(ColModel, model, okModel)
	api, okAPI := req["api"].(string)
	b.str(ColAPI, api, okAPI)
	for _, k := range []string{ColTemperature, ColTopP, ColMinP} {
		v, ok := number(req[k])
		b.f64(k, v, ok)
	}
	for _, k := range []string{ColTopK, ColMaxNewTokens} {
		v, ok := number(req[k])
		b.i32(k, int(v), ok)
	}
	think, okThink := req["enable_thinking"].(bool)
	bb := b.b.Field(b.col[ColEnableThinking]).(*array.BooleanBuilder)
	if okThink {
		bb.Append(think)
	} else {
		bb.AppendNull()
	}
	b.str(ColRequest, request.s, request.valid)
	t := rec.Tokens
	hasT := t != nil
	if t == nil {
		t = &record.Tokens{}
	}
	lb := b.b.Field(b.col[ColInputIDs]).(*array.ListBuilder)
	if hasT {
		lb.Append(true)
		lb.ValueBuilder().(*array.Int32Builder).AppendValues(t.InputIDs, nil)
		b.bytes += 4 * int64(len(t.InputIDs))
	} else {
		lb.AppendNull()
	}
	mb := b.b.Field(b.col[ColLossMask]).(*array.ListBuilder)
	if hasT {
		mb.Append(true)
		mb.ValueBuilder().(*array.Uint8Builder).AppendValues(t.LossMask, nil)
		b.bytes += int64(len(t.LossMask))
	} else {
		mb.AppendNull()
	}
	b.i32(ColNumTokens, t.NumTokens, hasT)
	b.i32(ColNumLossTokens, t.NumLossTokens, hasT)
	b.str(ColTokensSource, t.Source, hasT)
	r := rec.Reject
	hasR := r != nil
	if r == nil {
		r = &record.Rejection{}
	}
	b.str(ColRejectStage, r.Stage, hasR)
	b.str(ColRejectReason, r.Reason, hasR)
	b.str(ColRejectDetail, r.Detail, hasR)
	b.str(ColMeta, meta.s, meta.valid)
	b.rows++
	return nil
}

// number reads a JSON-ish number (float64, int, json.Number) from settings.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case *float64:
		if x != nil {
			return *x, true
		}
	case *int:
		if x != nil {
			return float64(*x), true
		}
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
