package chat

import (
	"encoding/json"
	"fmt"
	"github.com/pipe-dev/pipe/internal/termsafe"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Turn is where one assistant message lies in a rendered conversation, as
// byte offsets into the text Render gives for the whole conversation:
// Start <= Body <= ContentEnd <= End.
//
// The offsets come from rendering the conversation message by message,
// never from searching marker strings in it: text a user wrote (say
// "<|im_end|>\n<|im_start|>assistant\n…") lies before Start of every turn
// and so can never fall inside one, whatever tokens it contains.
type Turn struct {
	// Message is the index of the assistant message in the messages given.
	Message int
	// Start is where the turn's rendering begins: the length of the
	// messages before it, rendered alone.
	Start int
	// Body is where the reply begins: after the generation prompt (the
	// messages before it rendered with add_generation_prompt), or, for a
	// turn rendered without the whole of it, after the assistant header
	// (the part every generation prompt of the template begins with,
	// thinking on, off or unset: "<|im_start|>assistant\n" for Qwen).
	Body int
	// Prompted says the turn is rendered with its whole generation prompt,
	// as a turn the model generated is. A template that drops the thinking
	// of earlier turns renders them without the "<think>\n" a
	// forced-thinking generation prompt ends with: they are not Prompted.
	Prompted bool
	// ContentEnd is where the turn's own text ends (its content and the
	// tool calls the template writes after it, all of which the model
	// wrote) and the template's end of turn (its first token the
	// end-of-sequence the model sampled) begins.
	ContentEnd int
	// End is where the template's end of turn ends ("<|im_end|>\n" for
	// Qwen): where the next message begins.
	End int
}

// sentinel is appended to a message's content to find where the content
// ends in the rendering: no template writes a NUL of its own.
const sentinel = "\x00"

// AssistantTurns renders messages (AddGenerationPrompt is ignored: the
// conversation is rendered without it) and returns the text and every
// assistant turn in it. With lastOnly, only the last assistant turn is
// found, which saves three renders per earlier turn. Tool calls and tool
// results are rendered as the template renders them; a tool result is
// never inside a turn. An error says which message's boundaries cannot be
// found by message: a template that changes a content's end as it renders
// it (strips trailing whitespace) where no neighbour gives the boundary,
// or that renders the messages before a turn differently once the turn
// follows them where neither the end of the message before it nor the
// turn's own header can be found.
func (t *Template) AssistantTurns(messages []Message, opts Options, lastOnly bool) (string, []Turn, error) {
	opts.AddGenerationPrompt = false
	shift := 0
	if opts.SystemPrompt != "" && (len(messages) == 0 || messages[0].Role() != "system") {
		messages = append([]Message{NewMessage("system", opts.SystemPrompt)}, messages...)
		shift = 1
	}
	opts.SystemPrompt = ""
	// Every render below is of a prefix of the same messages: convert them
	// once.
	items, err := values(messages, opts)
	if err != nil {
		return "", nil, err
	}
	full, err := t.render(items, opts)
	if err != nil {
		return "", nil, err
	}
	first := 0
	if lastOnly {
		first = len(messages)
		for first > 0 && role(items[first-1]) != "assistant" {
			first--
		}
		first = max(first-1, 0)
	}
	var turns []Turn
	for k := first; k < len(messages); k++ {
		if role(items[k]) != "assistant" {
			continue
		}
		turn, err := t.turn(messages, items, k, opts, full)
		if err != nil {
			return "", nil, fmt.Errorf("message %d (assistant): %w", k+1-shift, err)
		}
		turn.Message = k - shift
		turns = append(turns, turn)
	}
	for i := 0; i+1 < len(turns); i++ {
		if turns[i].End > turns[i+1].Start {
			return "", nil, fmt.Errorf("message %d (assistant): its end of turn runs past the next turn's start", turns[i].Message+1)
		}
	}
	return full, turns, nil
}

// turn finds message k's boundaries in full. Its end is its content's end
// plus what the template writes after the content (tool calls, the end of
// turn), found by rendering the conversation through message k alone: a
// template may render a last message's header differently (Qwen3 gives it
// an empty think block), never what follows its content.
func (t *Template) turn(messages []Message, items []jinja.Value, k int, opts Options, full string) (Turn, error) {
	if k == 0 {
		return Turn{}, fmt.Errorf("an assistant message needs a message before it")
	}
	c := conversation{t: t, messages: messages, items: items, opts: opts, full: full}
	before, err := t.render(items[:k], opts)
	if err != nil {
		return Turn{}, err
	}
	start, err := c.turnStart(k, before)
	if err != nil {
		return Turn{}, err
	}
	gen, err := c.generationPrompt(k, before)
	if err != nil {
		return Turn{}, err
	}
	end, turnEnd, err := c.contentEnd(k)
	if err != nil {
		return Turn{}, err
	}
	body, prompted, err := c.replyStart(start, gen)
	if err != nil {
		return Turn{}, err
	}
	if body > end {
		return Turn{}, fmt.Errorf("the content starts before the end of the generation prompt")
	}
	turn := Turn{Start: start, Body: body, Prompted: prompted, ContentEnd: end, End: turnEnd}
	if turnEnd < 0 {
		if turn.End, err = c.turnEnd(k, end); err != nil {
			return Turn{}, err
		}
	}
	if hasToolCalls(items[k]) {
		if err := c.splitToolCalls(k, &turn); err != nil {
			return Turn{}, err
		}
	}
	return turn, nil
}

// conversation is the rendering full of messages (items as the template
// sees them, rendered with opts) whose turns are being found.
type conversation struct {
	t        *Template
	messages []Message
	items    []jinja.Value
	opts     Options
	full     string
}

// turnStart is where message k's turn starts in full: after before, the
// messages before it rendered alone, when full begins with that.
func (c *conversation) turnStart(k int, before string) (int, error) {
	if strings.HasPrefix(c.full, before) {
		return len(before), nil
	}
	// The template renders the messages before it differently once
	// later ones follow: Qwen3 drops the thinking of the turns before
	// the last user query, and a conversation with tool calls has
	// assistant turns before that query that keep it on their own.
	// The turn starts where the message before it ends, or, when that
	// message's end cannot be probed (a user turn holding a
	// <tool_response>, which a probe would make a query), where its
	// own header begins.
	start, err := c.t.messageEnd(c.messages, c.items, k-1, c.opts, c.full)
	if err == nil {
		return start, nil
	}
	start, serr := c.t.nextStart(c.messages, c.items, k, c.opts, c.full)
	if serr != nil {
		return 0, fmt.Errorf("the messages before it render differently on their own (at byte %d), and neither the end of the message before it (%v) nor its own start (%v) can be found", commonPrefix(c.full, before), err, serr)
	}
	return start, nil
}

// generationPrompt is what the template adds after before, the messages
// before message k, with add_generation_prompt.
func (c *conversation) generationPrompt(k int, before string) (string, error) {
	gopts := c.opts
	gopts.AddGenerationPrompt = true
	prompt, err := c.t.render(c.items[:k], gopts)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(prompt, before) {
		return "", fmt.Errorf("the generation prompt changes the messages before it instead of following them")
	}
	return prompt[len(before):], nil
}

// contentEnd is where message k's content ends in full. A content whose
// end cannot be probed (a tool-call turn with empty content, which a
// probe would make non-empty) ends with its turn: where the next
// message's rendering begins, or where the conversation ends; turnEnd
// is then that end, else -1.
func (c *conversation) contentEnd(k int) (end, turnEnd int, err error) {
	end, err = c.t.contentEnd(c.messages, c.items, k, c.opts, c.full)
	if err == nil {
		return end, -1, nil
	}
	if k == len(c.messages)-1 {
		return len(c.full), len(c.full), nil
	}
	turnEnd, nerr := c.t.nextStart(c.messages, c.items, k+1, c.opts, c.full)
	if nerr != nil {
		return 0, 0, err
	}
	return turnEnd, turnEnd, nil
}

// replyStart is where the reply of the turn starting at start begins:
// after the generation prompt gen (prompted), or, for a turn rendered
// without the whole of it (an earlier turn whose thinking the template
// drops), after the header every generation prompt of the template
// begins with.
func (c *conversation) replyStart(start int, gen string) (body int, prompted bool, err error) {
	rest := c.full[start:]
	if strings.HasPrefix(rest, gen) {
		return start + len(gen), true, nil
	}
	header, err := c.t.assistantHeader()
	if err != nil {
		return 0, false, err
	}
	if header == "" || !strings.HasPrefix(rest, header) {
		return 0, false, fmt.Errorf("the turn begins with %q, neither the generation prompt %q nor the header %q every generation prompt begins with", termsafe.Cut(rest, 40), gen, header)
	}
	return start + len(header), false, nil
}

// turnEnd is where message k's turn ends, its content ending at end: the
// conversation's end for the last message, else after the tail the
// template writes after its content as the last message, which full must
// hold there.
func (c *conversation) turnEnd(k, end int) (int, error) {
	if k == len(c.messages)-1 {
		return len(c.full), nil
	}
	tail, err := c.t.tail(c.messages, c.items, k, c.opts)
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(c.full[end:], tail) {
		return 0, fmt.Errorf("the template ends this turn with %q inside the conversation but with %q as its last message", termsafe.Cut(c.full[end:], 40), termsafe.Cut(tail, 40))
	}
	return end + len(tail), nil
}

// splitToolCalls moves turn's ContentEnd past the tool calls the model
// wrote after the content: the turn's own text ends where the template's
// end of turn begins.
func (c *conversation) splitToolCalls(k int, turn *Turn) error {
	eot, err := c.t.endOfTurn(c.items, k, c.opts)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(c.full[:turn.End], eot) || turn.End-len(eot) < turn.Body {
		return fmt.Errorf("the template ends this turn with %q, not with %q as a turn without tool calls", termsafe.Cut(c.full[turn.Start:turn.End], 40), eot)
	}
	turn.ContentEnd = turn.End - len(eot)
	return nil
}

// tail is what the template writes after message k's content when k is
// the last message: the rendering of messages through k less its content's
// end.
func (t *Template) tail(messages []Message, items []jinja.Value, k int, opts Options) (string, error) {
	r, err := t.render(items[:k+1], opts)
	if err != nil {
		return "", err
	}
	e, err := t.contentEnd(messages[:k+1], items[:k+1], k, opts, r)
	if err != nil {
		return "", err
	}
	return r[e:], nil
}

// messageEnd finds where message j's rendering ends in full, the rendering
// of messages: its content's end there plus the tail the template writes
// after it as the last message, which full must hold there.
func (t *Template) messageEnd(messages []Message, items []jinja.Value, j int, opts Options, full string) (int, error) {
	end, err := t.contentEnd(messages, items, j, opts, full)
	if err != nil {
		return 0, fmt.Errorf("message %d: %w", j+1, err)
	}
	tail, err := t.tail(messages, items, j, opts)
	if err != nil {
		return 0, fmt.Errorf("message %d: %w", j+1, err)
	}
	if !strings.HasPrefix(full[end:], tail) {
		return 0, fmt.Errorf("message %d ends with %q inside the conversation but with %q as the last message", j+1, termsafe.Cut(full[end:], 40), termsafe.Cut(tail, 40))
	}
	return end + len(tail), nil
}

// endOfTurn is what the template writes after the content of an assistant
// message without tool calls in message k's place, as the last message:
// the end of turn ("<|im_end|>\n" for Qwen), which a turn with tool calls
// writes after them.
func (t *Template) endOfTurn(items []jinja.Value, k int, opts Options) (string, error) {
	plain := jinja.NewDict()
	plain.AsDict().Set("role", jinja.NewString("assistant"))
	plain.AsDict().Set("content", jinja.NewString(sentinel))
	probe := append(append([]jinja.Value(nil), items[:k]...), plain)
	r, err := t.render(probe, opts)
	if err != nil {
		return "", err
	}
	i := strings.LastIndex(r, sentinel)
	if i < 0 {
		return "", fmt.Errorf("the template does not write an assistant turn's content")
	}
	return r[i+len(sentinel):], nil
}

// hasToolCalls says whether a converted message has a non-empty
// "tool_calls" list.
func hasToolCalls(item jinja.Value) bool {
	if !item.IsDict() {
		return false
	}
	c, ok := item.AsDict().Get("tool_calls")
	return ok && c.IsList() && c.AsList().Len() > 0
}

// contentEnd finds where message k's content ends in full, the rendering
// of messages: the one place where rendering with the sentinel appended to
// that content differs, and differs by exactly the sentinel.
func (t *Template) contentEnd(messages []Message, items []jinja.Value, k int, opts Options, full string) (int, error) {
	v, ok := withContentSuffix(items[k], sentinel)
	if !ok {
		return 0, fmt.Errorf("content must be a string to find the turn's end")
	}
	probe := append([]jinja.Value(nil), items...)
	probe[k] = v
	r, err := t.render(probe, opts)
	if err != nil {
		return 0, err
	}
	d := commonPrefix(full, r)
	if !strings.HasPrefix(r[d:], sentinel) || r[d+len(sentinel):] != full[d:] {
		return 0, fmt.Errorf("the template changes the end of the content as it renders it, so the turn's end cannot be found by message")
	}
	return d, nil
}

// role is a converted message's "role" string ("" if absent or not a
// string), as Message.Role gives it without parsing the message again.
func role(item jinja.Value) string {
	if item.IsDict() {
		if r, ok := item.AsDict().Get("role"); ok && r.IsString() {
			return r.AsString()
		}
	}
	return ""
}

// withContentSuffix is message item (a converted Message) with suffix
// appended to its content, a missing or null content taken as "" (a key
// added last): the value Message.With("content", content+suffix) converts
// to, built without encoding the message to JSON and parsing it back,
// which cost more than the renders of a long reply's turn. ok is false
// when the content is neither a string nor null.
func withContentSuffix(item jinja.Value, suffix string) (v jinja.Value, ok bool) {
	if !item.IsDict() {
		return item, false
	}
	d := item.AsDict()
	content := ""
	if c, has := d.Get("content"); has && !c.IsNone() {
		if !c.IsString() {
			return item, false
		}
		content = c.AsString()
	}
	// A shallow copy: the other values are shared with item, and rendering
	// never changes a value it is given.
	v = jinja.NewDict()
	cp := v.AsDict()
	cp.Keys = append(cp.Keys, d.Keys...)
	for key, val := range d.Data {
		cp.Data[key] = val
	}
	cp.Set("content", jinja.NewString(content+suffix))
	return v, true
}

// nextStart finds where message j's rendering begins in full, the
// rendering of messages: where its content begins (probed with the
// sentinel put before it) less the header the template writes before that
// content when j is rendered alone, which full must hold there.
func (t *Template) nextStart(messages []Message, items []jinja.Value, j int, opts Options, full string) (int, error) {
	if j >= len(messages) {
		return 0, fmt.Errorf("no message follows")
	}
	var content string
	if err := json.Unmarshal(messages[j].Get("content"), &content); err != nil || content == "" {
		return 0, fmt.Errorf("message %d has no content to find its start by", j+1)
	}
	v, err := fromJSON(messages[j].With("content", sentinel+content).object())
	if err != nil {
		return 0, err
	}
	if opts.ParseToolArguments {
		if err := parseArguments(v); err != nil {
			return 0, err
		}
	}
	at := func(items []jinja.Value, i int, opts Options, text string) (int, error) {
		probe := append([]jinja.Value(nil), items...)
		probe[i] = v
		r, err := t.render(probe, opts)
		if err != nil {
			return 0, err
		}
		d := commonPrefix(text, r)
		if !strings.HasPrefix(r[d:], sentinel) || r[d+len(sentinel):] != text[d:] {
			return 0, fmt.Errorf("message %d's content is changed as it renders", j+1)
		}
		return d, nil
	}
	contentAt, err := at(items, j, opts, full)
	if err != nil {
		return 0, err
	}
	// Alone and without tools: tool schemas go into a preamble before the
	// first message (Qwen3), which is not message j's header.
	aopts := opts
	aopts.Tools = nil
	alone, err := t.render(items[j:j+1], aopts)
	if err != nil {
		return 0, err
	}
	header, err := at(items[j:j+1], 0, aopts, alone)
	if err != nil {
		return 0, err
	}
	start := contentAt - header
	if start < 0 || full[start:contentAt] != alone[:header] {
		return 0, fmt.Errorf("message %d's header differs inside the conversation", j+1)
	}
	return start, nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// GenerationPrompt is what add_generation_prompt appends to a one-message
// user conversation, rendered with opts' other settings.
func (t *Template) GenerationPrompt(opts Options) (string, error) {
	msgs := []Message{NewMessage("user", "x")}
	opts.AddGenerationPrompt = false
	before, err := t.Render(msgs, opts)
	if err != nil {
		return "", err
	}
	opts.AddGenerationPrompt = true
	prompt, err := t.Render(msgs, opts)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(prompt, before) {
		return "", fmt.Errorf("the generation prompt changes the conversation instead of following it")
	}
	return prompt[len(before):], nil
}

// ThinkingForced says whether the template forces thinking: its
// generation prompt, rendered with thinking on, ends inside a think block
// (after an open marker with no close marker after it), so the model's
// output starts inside its reasoning and never opens it itself (Qwen3.5,
// Qwen3.6, Qwen3-Thinking-2507: "<|im_start|>assistant\n<think>\n"). It
// returns the generation prompt too, for saying what was detected.
func (t *Template) ThinkingForced(open, close string) (forced bool, genPrompt string, err error) {
	on := true
	g, err := t.GenerationPrompt(Options{EnableThinking: &on})
	if err != nil {
		return false, "", err
	}
	i := strings.LastIndex(g, open)
	return i >= 0 && !strings.Contains(g[i:], close), g, nil
}

// assistantHeader is the part of the generation prompt common to thinking
// on, off and unset, for a one-message conversation: the template's
// assistant header. It is rendered once per Template.
func (t *Template) assistantHeader() (string, error) {
	t.headerOnce.Do(func() {
		on, off := true, false
		var gens []string
		for _, e := range []*bool{&on, &off, nil} {
			g, err := t.GenerationPrompt(Options{EnableThinking: e})
			if err != nil {
				t.headerErr = err
				return
			}
			gens = append(gens, g)
		}
		// An earlier turn's header too: a template that forces thinking
		// writes "<think>\n" in every generation prompt but not before an
		// earlier turn without thinking.
		if g, ok := t.earlierHeader(); ok {
			gens = append(gens, g)
		}
		h := gens[0]
		for _, g := range gens[1:] {
			h = h[:commonPrefix(h, g)]
		}
		t.header = h
	})
	return t.header, t.headerErr
}

// earlierHeader is what the template writes before the content of an
// assistant turn that a user turn follows: [user, assistant, user]
// rendered, less the user turn rendered alone, up to the content. ok is
// false when the template renders it otherwise (it drops the turn, or
// changes the first message once others follow).
func (t *Template) earlierHeader() (string, bool) {
	msgs := []Message{NewMessage("user", "x"), NewMessage("assistant", sentinel+"y"), NewMessage("user", "z")}
	before, err := t.Render(msgs[:1], Options{})
	if err != nil {
		return "", false
	}
	r, err := t.Render(msgs, Options{})
	if err != nil || !strings.HasPrefix(r, before) {
		return "", false
	}
	i := strings.Index(r[len(before):], sentinel)
	if i < 0 {
		return "", false
	}
	return r[len(before) : len(before)+i], true
}
