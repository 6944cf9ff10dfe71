package stages

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/pipe-dev/pipe/pipeline/record"
)

// Which turns generate regenerates, and how a regenerated conversation
// with tool calls goes on.
//
// turns = "last" answers the conversation's last user or tool message;
// everything before it (calls, results, earlier answers and their
// reasoning) is sent and kept as given. turns = "all" regenerates every
// assistant turn in order, on one server: the reply after each user
// message, and after each run of tool results. Where a given assistant
// turn called tools, the given results answer the regenerated turn only
// if it makes the same calls (names and arguments, in order): then the
// regenerated turn takes the given calls' ids, the results follow it as
// given, and the conversation goes on. Otherwise the conversation ends at
// the regenerated turn (it becomes the completion; the rest of the given
// conversation is not sent or kept), with the reason in the record's meta
// (record.MetaConversationEnded) and counted (figure
// "conversations_ended", by reason).

// Reasons a regenerated conversation ends before its given end.
const (
	// EndedNoCall: the given turn called tools, the regenerated one did not.
	EndedNoCall = "no_call"
	// EndedNewCall: the regenerated turn called tools where the given
	// one did not, so no result answers it.
	EndedNewCall = "new_call"
	// EndedCallDiffers: both called, with other names, arguments or
	// number of calls.
	EndedCallDiffers = "call_differs"
	// EndedBadCall: the regenerated turn's calls are malformed
	// (validate-thinking rejects the completion as bad_tool_call).
	EndedBadCall = "bad_call"
)

var endedReasons = [...]string{EndedNoCall, EndedNewCall, EndedCallDiffers, EndedBadCall}

// turnPlan is what generate does with a conversation: the messages it
// sends, after which of them it generates a reply (replyAt, ascending),
// and for each reply the calls of the given assistant turn it replaces
// (nil where that turn called none, or there was none).
type turnPlan struct {
	msgs    []record.Message
	replyAt []int
	given   [][]record.ToolCall
}

// conversation plans the generation of a record's messages: the system
// prompt prepended when configured and missing; with turns = "last"
// everything up to the conversation's last user or tool message, whose
// reply is generated (a trailing assistant reply is what is being
// regenerated); with turns = "all" the system, user and tool messages,
// a reply generated after each user message and each run of tool
// results (every given assistant turn is regenerated).
func (g *generate) conversation(in []record.Message) (turnPlan, error) {
	var p turnPlan
	if g.cfg.SystemPrompt != "" && (len(in) == 0 || in[0].Role != "system") {
		p.msgs = append(p.msgs, record.Message{Role: "system", Content: g.cfg.SystemPrompt})
	}
	last := lastAsked(in)
	if last < 0 {
		return p, errors.New("the conversation has no user turn")
	}
	all := g.cfg.Turns == "all"
	for i, m := range in[:last+1] {
		keep, err := keepInPlan(in, i, all)
		if err != nil {
			return p, err
		}
		if !keep {
			continue
		}
		if repliesAfter(in, i, last, all) {
			p.addReply(in, i, all)
		}
		p.msgs = append(p.msgs, m)
	}
	return p, nil
}

// lastAsked is the index of the conversation's last user or tool message;
// -1 when it has none.
func lastAsked(in []record.Message) int {
	last := -1
	for i, m := range in {
		if m.Role == "user" || m.Role == "tool" {
			last = i
		}
	}
	return last
}

// keepInPlan checks the message at i of a conversation being planned and
// says whether the plan keeps it: with all (turns = "all") a given
// assistant turn is regenerated instead.
func keepInPlan(in []record.Message, i int, all bool) (bool, error) {
	m := in[i]
	switch {
	case m.Role == "system" && i > 0:
		return false, fmt.Errorf("message %d: a system message must come first", i+1)
	case m.Role == "assistant" && all:
		return false, nil
	case m.Role == "tool" && all && !answersCall(in, i):
		return false, fmt.Errorf(`message %d: a tool result that answers no assistant turn's call; turns = "all" regenerates the calls and cannot tell which one it answers`, i+1)
	}
	return true, nil
}

// repliesAfter says whether a reply is generated after the message at i:
// after the last user or tool message, and with all after every user
// message and every run of tool results.
func repliesAfter(in []record.Message, i, last int, all bool) bool {
	if i == last {
		return true
	}
	return all && (in[i].Role == "user" || in[i].Role == "tool" && in[i+1].Role != "tool")
}

// addReply plans a reply after the messages planned so far. With all, it
// keeps the calls of the given assistant turn after i, which the reply
// replaces, to compare the reply's calls with.
func (p *turnPlan) addReply(in []record.Message, i int, all bool) {
	p.replyAt = append(p.replyAt, len(p.msgs))
	var given []record.ToolCall
	if all && i+1 < len(in) && in[i+1].Role == "assistant" {
		given = in[i+1].ToolCalls
	}
	p.given = append(p.given, given)
}

// answersCall reports whether the tool message at i follows an assistant
// turn with calls, with only tool messages between.
func answersCall(in []record.Message, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch in[j].Role {
		case "tool":
			continue
		case "assistant":
			return len(in[j].ToolCalls) > 0
		}
		return false
	}
	return false
}

// nextTurn is how a regenerated conversation goes on after the reply c
// that replaces a given turn with the calls given: the reply as a history
// message, or why the conversation ends at it.
func nextTurn(c *record.Completion, given []record.ToolCall) (reply record.Message, ended string) {
	content, calls, ok := replyCalls(c)
	switch {
	case !ok:
		return reply, EndedBadCall
	case len(given) == 0 && len(calls) > 0:
		return reply, EndedNewCall
	case len(given) > 0 && len(calls) == 0:
		return reply, EndedNoCall
	case !sameCalls(given, calls):
		return reply, EndedCallDiffers
	}
	for k := range calls {
		// The given results answer these ids.
		calls[k].ID, calls[k].Type = given[k].ID, given[k].Type
	}
	return record.Message{Role: "assistant", Content: content, ReasoningContent: c.Reasoning, ToolCalls: calls}, ""
}

// replyCalls splits a reply into its content and its calls: the server's
// parsed calls (the chat API with a tool-call parser; the answer is the
// content), or else Qwen3's <tool_call> blocks in the answer, the content
// the text before them, stripped as SGLang's parser strips it. ok is
// false when the blocks are malformed.
func replyCalls(c *record.Completion) (content string, calls []record.ToolCall, ok bool) {
	if len(c.ToolCalls) > 0 {
		return c.Answer, append([]record.ToolCall(nil), c.ToolCalls...), true
	}
	if !mentionsToolCall(c.Answer) {
		return c.Answer, nil, true
	}
	content, blocks, problem := splitTextToolCalls(c.Answer, false)
	if problem != nil {
		return "", nil, false
	}
	calls = make([]record.ToolCall, len(blocks))
	for k, b := range blocks {
		calls[k] = record.ToolCall{Type: "function", Function: record.FunctionCall{Name: b.Name, Arguments: b.Arguments}}
	}
	return strings.TrimSpace(content), calls, true
}

// sameCalls reports whether two turns make the same calls: as many, in
// order, with the same names and arguments (compared as JSON values; an
// arguments string, OpenAI's form, stands for the JSON it holds).
func sameCalls(a, b []record.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k].Function.Name != b[k].Function.Name {
			return false
		}
		x, okx := argumentsValue(a[k].Function.Arguments)
		y, oky := argumentsValue(b[k].Function.Arguments)
		if !okx || !oky || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// argumentsValue is the JSON value of a call's arguments; a JSON string
// is read as the JSON it holds.
func argumentsValue(raw json.RawMessage) (any, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, false
	}
	return v, true
}
