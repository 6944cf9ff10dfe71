// Package arrowrow maps pipe records to Arrow record batches and back: the
// one schema of write-arrow's Parquet and Arrow IPC shards (documented in
// docs/training-data.md), and the readers read-completions and pipe inspect use.
package arrowrow

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// Version is written into each shard's metadata ("pipe.schema").
// pipe-row-3: a message has tool_calls, tool_call_id and name; the row has
// tools and the completion's tool_calls. pipe-row-2: messages is
// list<struct<role, content, reasoning_content>> (pipe-row-1 held it as
// JSON text). Records reads them all.
const Version = "pipe-row-3"

// Column names, in schema order.
const (
	ColID               = "id"
	ColMessages         = "messages"
	ColTools            = "tools"
	ColReasoning        = "reasoning"
	ColAnswer           = "answer"
	ColFinishReason     = "finish_reason"
	ColMatchedStop      = "matched_stop"
	ColToolCalls        = "tool_calls"
	ColPromptTokens     = "prompt_tokens"
	ColCompletionTokens = "completion_tokens"
	ColCachedTokens     = "cached_tokens"
	ColReasoningTokens  = "reasoning_tokens"
	ColPromptIDs        = "prompt_ids"
	ColOutputIDs        = "output_ids"
	ColSpecVerifyCt     = "spec_verify_ct"
	ColSpecAcceptLength = "spec_accept_length"
	ColLatency          = "latency_s"
	ColServer           = "server"
	ColAttempts         = "attempts"
	ColSystemPrompt     = "system_prompt"
	ColModel            = "model"
	ColAPI              = "api"
	ColTemperature      = "temperature"
	ColTopP             = "top_p"
	ColTopK             = "top_k"
	ColMinP             = "min_p"
	ColMaxNewTokens     = "max_new_tokens"
	ColEnableThinking   = "enable_thinking"
	ColRequest          = "request"
	ColInputIDs         = "input_ids"
	ColLossMask         = "loss_mask"
	ColNumTokens        = "num_tokens"
	ColNumLossTokens    = "num_loss_tokens"
	ColTokensSource     = "tokens_source"
	ColRejectStage      = "reject_stage"
	ColRejectReason     = "reject_reason"
	ColRejectDetail     = "reject_detail"
	ColMeta             = "meta"
)

func str(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.BinaryTypes.String, Nullable: true}
}
func i32(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32, Nullable: true}
}
func f64(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Float64, Nullable: true}
}
func list(name string, elem arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.ListOf(elem), Nullable: true}
}

// Message field names of the messages column's struct: those of the OpenAI
// chat format, which chat templates and HF datasets' chat trainers take.
const (
	MsgRole             = "role"
	MsgContent          = "content"
	MsgReasoningContent = "reasoning_content"
	MsgToolCalls        = "tool_calls"
	MsgToolCallID       = "tool_call_id"
	MsgName             = "name"
)

// MessageType is one message of the messages column. reasoning_content,
// tool_calls, tool_call_id and name are null for a turn without them.
//
// tool_calls is JSON text (the list of calls as pipe holds them), as the
// row's tools and the completion's tool_calls are: a call's arguments are
// a JSON string or an object as given, and tool schemas differ from tool
// to tool, which no one Arrow type holds as written (HF datasets' type
// inference would merge every row's schemas into one struct, giving each
// tool the others' keys as nulls, and change what a template renders).
// Text reads back exactly, and SpecForge's loader parses both as text
// (preprocessing.py build_eagle3_dataset for tools, parse.py
// _sanitize_message for tool_calls).
var MessageType = arrow.StructOf(
	arrow.Field{Name: MsgRole, Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: MsgContent, Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: MsgReasoningContent, Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: MsgToolCalls, Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: MsgToolCallID, Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: MsgName, Type: arrow.BinaryTypes.String, Nullable: true},
)

// Schema is the shards' schema. Completion columns are null for a record
// without a completion, token columns for one without tokens, and so on;
// messages is a list of MessageType; tools, tool_calls, matched_stop,
// request and meta hold JSON.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: ColID, Type: arrow.BinaryTypes.String},
	list(ColMessages, MessageType), str(ColTools),
	str(ColReasoning), str(ColAnswer), str(ColFinishReason), str(ColMatchedStop), str(ColToolCalls),
	i32(ColPromptTokens), i32(ColCompletionTokens), i32(ColCachedTokens), i32(ColReasoningTokens),
	list(ColPromptIDs, arrow.PrimitiveTypes.Int32), list(ColOutputIDs, arrow.PrimitiveTypes.Int32),
	i32(ColSpecVerifyCt), f64(ColSpecAcceptLength), f64(ColLatency), str(ColServer), i32(ColAttempts),
	str(ColSystemPrompt),
	str(ColModel), str(ColAPI), f64(ColTemperature), f64(ColTopP), i32(ColTopK), f64(ColMinP), i32(ColMaxNewTokens),
	{Name: ColEnableThinking, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	str(ColRequest),
	list(ColInputIDs, arrow.PrimitiveTypes.Int32), list(ColLossMask, arrow.PrimitiveTypes.Uint8),
	i32(ColNumTokens), i32(ColNumLossTokens), str(ColTokensSource),
	str(ColRejectStage), str(ColRejectReason), str(ColRejectDetail),
	str(ColMeta),
}, nil)
