package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// tokenizeCmd is pipe tokenize and its flags.
type tokenizeCmd struct {
	dir          string
	template     string
	genPrompt    bool
	thinking     optBool
	systemPrompt string
	maskMode     string
	renderOnly   bool
}

func init() {
	register(&command{
		Name:      "tokenize",
		UsageLine: "pipe tokenize --tokenizer DIR [flags] < rows.jsonl",
		Short:     "tokenize text or render and tokenize chats, JSONL in and out",
		Long: `Reads JSONL on stdin. A row is {"text": "..."} or {"messages": [...]}
with optional "add_generation_prompt", "enable_thinking" and "tools", as
Hugging Face's apply_chat_template takes them; the flags give the defaults.
Writes one JSONL row per input row: {"input_ids": [...]} for text (no special
tokens added), {"input_ids", "loss_mask", "rendered"} for messages. The mask
is 1 on assistant replies (through <|im_end|> and its newline), 0 elsewhere,
found by rendering the conversation message by message (as
tokenize-and-mask's mask modes), never by searching marker strings.
With --render-only, writes only {"rendered": "..."}.`,
		New: func() runner { return &tokenizeCmd{} },
	})
}

func (c *tokenizeCmd) setFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "tokenizer", "", "model directory with tokenizer.json and tokenizer_config.json (required)")
	fs.StringVar(&c.template, "template", "", `chat template: empty for the model's own, or "chatml"`)
	fs.BoolVar(&c.genPrompt, "add-generation-prompt", false, "default add_generation_prompt for message rows")
	fs.Var(&c.thinking, "enable-thinking", "default enable_thinking for message rows (true or false; unset leaves it to the template)")
	fs.StringVar(&c.systemPrompt, "system-prompt", "", "system prompt prepended to conversations that have none (default none)")
	fs.StringVar(&c.maskMode, "mask", "assistant", `loss mask: "assistant" (every assistant turn), "last_turn", "generated" or "specforge" (as tokenize-and-mask)`)
	fs.BoolVar(&c.renderOnly, "render-only", false, `write only {"rendered": ...} for message rows`)
}

func (c *tokenizeCmd) run(ctx context.Context, std *stdio, fs *flag.FlagSet) error {
	if c.dir == "" {
		return usageErrorf("pipe tokenize: --tokenizer DIR is required")
	}
	if fs.NArg() > 0 {
		return usageErrorf("pipe tokenize: unexpected argument %q (rows come on stdin)", fs.Arg(0))
	}
	mode, err := tokenize.ParseMaskMode(c.maskMode)
	if err != nil {
		return usageErrorf("pipe tokenize: --mask: %v", err)
	}
	tok, err := tokenize.Load(c.dir)
	if err != nil {
		return err
	}
	t := &rowTokenizer{tok: tok, templateName: c.template, mode: mode, renderOnly: c.renderOnly,
		defaults: chat.Options{AddGenerationPrompt: c.genPrompt, EnableThinking: c.thinking.ptr(), SystemPrompt: c.systemPrompt}}
	return t.run(ctx, std.In, std.Out)
}

// optBool is a bool flag that remembers whether it was given.
type optBool struct{ set, val bool }

func (b *optBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.val)
}
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.val = true, v
	return nil
}
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) ptr() *bool {
	if !b.set {
		return nil
	}
	v := b.val
	return &v
}

// rowTokenizer writes the JSONL rows of pipe tokenize, its flags resolved.
type rowTokenizer struct {
	tok          *tokenize.Tokenizer
	templateName string
	tmpl         *chat.Template // compiled on the first message row
	forced       bool           // tmpl forces thinking
	mode         tokenize.MaskMode
	renderOnly   bool
	defaults     chat.Options
}

type tokenizeRow struct {
	Text                *string         `json:"text"`
	Messages            []chat.Message  `json:"messages"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	EnableThinking      *bool           `json:"enable_thinking"`
	Tools               json.RawMessage `json:"tools"`
}

func (c *rowTokenizer) run(ctx context.Context, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<20)
	w := bufio.NewWriterSize(out, 1<<20)
	defer w.Flush()
	for line := 1; ; line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(data)) > 0 {
			if rerr := c.row(w, data); rerr != nil {
				return fmt.Errorf("stdin:%d: %w", line, rerr)
			}
		}
		if err == io.EOF {
			return w.Flush()
		}
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
	}
}

// loadTemplate loads the chat template at the first messages row, and
// whether it forces thinking.
func (c *rowTokenizer) loadTemplate() error {
	if c.tmpl != nil {
		return nil
	}
	tmpl, err := c.tok.Chat(c.templateName)
	if err != nil {
		return err
	}
	forced, _, err := tmpl.ThinkingForced("<think>", "</think>")
	if err != nil {
		return err
	}
	c.tmpl, c.forced = tmpl, forced
	return nil
}

// rowOptions are the render options for row: the flags', with the row's
// own add_generation_prompt, enable_thinking and tools where it has them.
func (c *rowTokenizer) rowOptions(row *tokenizeRow) chat.Options {
	opts := c.defaults
	if row.AddGenerationPrompt != nil {
		opts.AddGenerationPrompt = *row.AddGenerationPrompt
	}
	if row.EnableThinking != nil {
		opts.EnableThinking = row.EnableThinking
	}
	if len(row.Tools) > 0 && string(row.Tools) != "null" {
		opts.Tools = row.Tools
	}
	return opts
}

func (c *rowTokenizer) row(w *bufio.Writer, data []byte) error {
	var row tokenizeRow
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&row); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	switch {
	case row.Text != nil && row.Messages != nil:
		return errors.New(`a row has "text" or "messages", not both`)
	case row.Text != nil:
		if c.renderOnly {
			return errors.New(`--render-only needs "messages" rows, this one has "text"`)
		}
		w.WriteString(`{"input_ids":`)
		writeInts(w, c.tok.Encode(*row.Text))
		w.WriteString("}\n")
		return nil
	case row.Messages == nil:
		return errors.New(`a row needs "text" (a string) or "messages" (a list)`)
	}
	if err := c.loadTemplate(); err != nil {
		return err
	}
	opts := c.rowOptions(&row)
	if c.renderOnly {
		rendered, err := c.tmpl.Render(row.Messages, opts)
		if err != nil {
			return err
		}
		w.WriteString(`{"rendered":`)
		w.Write(jsonString(rendered))
		w.WriteString("}\n")
		return nil
	}
	rendered, turns, err := c.tmpl.AssistantTurns(row.Messages, opts, c.mode.LastOnly(c.forced))
	if err != nil {
		return err
	}
	if opts.AddGenerationPrompt {
		// The generation prompt follows the conversation; nothing of it
		// carries loss.
		withPrompt, err := c.tmpl.Render(row.Messages, opts)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(withPrompt, rendered) {
			return errors.New("the generation prompt changes the conversation instead of following it")
		}
		rendered = withPrompt
	}
	ids, mask := c.tok.EncodeMasked(rendered, tokenize.MaskSpans(turns, c.mode, c.forced))
	text := jsonString(rendered)
	w.WriteString(`{"input_ids":`)
	writeInts(w, ids)
	w.WriteString(`,"loss_mask":`)
	writeInts(w, mask)
	w.WriteString(`,"rendered":`)
	w.Write(text)
	w.WriteString("}\n")
	return nil
}

func writeInts(w *bufio.Writer, xs []int) {
	var buf [20]byte
	w.WriteByte('[')
	for i, x := range xs {
		if i > 0 {
			w.WriteByte(',')
		}
		w.Write(strconv.AppendInt(buf[:0], int64(x), 10))
	}
	w.WriteByte(']')
}

// jsonString encodes s without HTML escaping, so that "<|im_start|>" stays
// readable in rendered templates.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
