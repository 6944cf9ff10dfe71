package stages

// Expressions over a record (expr-lang, https://expr-lang.org), as the
// filter and map kinds take them: what an expression sees of a record,
// the functions it may call, compiling, and expr's errors in the record's
// words.

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/pipeline/record"
	"github.com/pipe-dev/pipe/stages/tokenize"
)

// recordExprHelp says what an expression sees and may call, for the
// Descriptions of the kinds that take expressions.
const recordExprHelp = `What an expression sees:

  id                          the record id
  meta                        the input's other fields (meta.source, ...)
  prompt.text                 the last user (or tool) message
  prompt.system               the system message ("" without one)
  prompt.messages             [{role, content, reasoning}], the conversation
                              before the completion
  prompt.turns, prompt.tools  the number of messages, of declared tools
  completion.answer           the answer, completion.reasoning its thinking
  completion.finish_reason    "stop", "length", ...
  completion.prompt_tokens, completion.completion_tokens,
  completion.reasoning_tokens, completion.tool_calls (a count)
  completion.server           the server that made it ("127.0.0.1:30000")
  completion.server_start     which start of a launched server made it
                              (1: its first process; 0: not launched)
  completion.present          false when the record has none
  row.tokens, row.loss_tokens the training row's lengths (after
                              tokenize-and-mask), row.present

Functions besides expr-lang's own (len, lower, trim, hasPrefix, contains,
the matches operator for regular expressions, ...):

  tokens(text)                tokens of text by the run's tokenizer (needs
                              tokenizer)
  script(text)                the Unicode script most of text's letters are
                              in: "Latin", "Han", "Cyrillic", "Arabic", ...,
                              "" with no letters (a language check:
                              script(completion.answer) != script(prompt.text))`

// recordEnv is what an expression sees of a record (see recordExprHelp).
type recordEnv struct {
	ID         string         `expr:"id"`
	Meta       map[string]any `expr:"meta"`
	Prompt     promptEnv      `expr:"prompt"`
	Completion completionEnv  `expr:"completion"`
	Row        rowEnv         `expr:"row"`
}

type promptEnv struct {
	Text     string       `expr:"text"`
	System   string       `expr:"system"`
	Messages []messageEnv `expr:"messages"`
	Turns    int          `expr:"turns"`
	Tools    int          `expr:"tools"`
}

type messageEnv struct {
	Role      string `expr:"role"`
	Content   string `expr:"content"`
	Reasoning string `expr:"reasoning"`
}

type completionEnv struct {
	Present          bool   `expr:"present"`
	Answer           string `expr:"answer"`
	Reasoning        string `expr:"reasoning"`
	FinishReason     string `expr:"finish_reason"`
	PromptTokens     int    `expr:"prompt_tokens"`
	CompletionTokens int    `expr:"completion_tokens"`
	ReasoningTokens  int    `expr:"reasoning_tokens"`
	ToolCalls        int    `expr:"tool_calls"`
	Server           string `expr:"server"`
	ServerStart      int    `expr:"server_start"`
}

type rowEnv struct {
	Present    bool `expr:"present"`
	Tokens     int  `expr:"tokens"`
	LossTokens int  `expr:"loss_tokens"`
}

// envOf is what an expression sees of rec. Its Meta is rec.Meta itself
// (a new empty map when rec has none).
func envOf(rec *record.Record) recordEnv {
	e := recordEnv{ID: rec.ID, Meta: metaValues(rec.Meta)}
	e.Prompt.Turns, e.Prompt.Tools = len(rec.Messages), len(rec.Tools)
	e.Prompt.Messages = make([]messageEnv, len(rec.Messages))
	for i, m := range rec.Messages {
		e.Prompt.Messages[i] = messageEnv{Role: m.Role, Content: m.Content, Reasoning: m.ReasoningContent}
		switch m.Role {
		case "system":
			if e.Prompt.System == "" {
				e.Prompt.System = m.Content
			}
		case "user", "tool":
			e.Prompt.Text = m.Content
		}
	}
	if c := rec.Completion; c != nil {
		e.Completion = completionEnv{Present: true, Answer: c.Answer, Reasoning: c.Reasoning, FinishReason: c.FinishReason,
			PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens, ReasoningTokens: c.ReasoningTokens, ToolCalls: len(c.ToolCalls),
			Server: c.Server, ServerStart: c.ServerStart}
	}
	if t := rec.Tokens; t != nil {
		e.Row = rowEnv{Present: true, Tokens: t.NumTokens, LossTokens: t.NumLossTokens}
	}
	return e
}

// compileExpr compiles an expression over the record, with want's
// options (expr.AsBool(), ...). tok, when not nil, is what tokens() counts
// with; compiled without it (pipe check), tokens() type-checks and is not
// called.
func compileExpr(src string, tok *tokenize.Tokenizer, want ...expr.Option) (*vm.Program, error) {
	count := func(params ...any) (any, error) {
		if tok == nil {
			return nil, fmt.Errorf("tokens() needs the stage's tokenizer")
		}
		return len(tok.Encode(params[0].(string))), nil
	}
	return expr.Compile(src, append([]expr.Option{
		expr.Env(recordEnv{}),
		expr.Function("tokens", count, new(func(string) int)),
		expr.Function("script", func(params ...any) (any, error) { return dominantScript(params[0].(string)), nil }, new(func(string) string)),
	}, want...)...)
}

// callsTokens reports whether prog calls tokens().
func callsTokens(prog *vm.Program) bool {
	v := &callFinder{name: "tokens"}
	node := prog.Node()
	ast.Walk(&node, v)
	return v.found
}

type callFinder struct {
	name  string
	found bool
}

func (v *callFinder) Visit(n *ast.Node) {
	if c, ok := (*n).(*ast.CallNode); ok {
		if id, ok := c.Callee.(*ast.IdentifierNode); ok && id.Value == v.name {
			v.found = true
		}
	}
}

// exprError is expr's message, its caret line kept under the expression,
// in the record's words: "completion has no field anwser (did you mean
// answer?) (1:16)" for expr's "type stages.completionEnv has no field
// anwser", and a did-you-mean for an unknown name.
func exprError(err error) string {
	msg := strings.TrimRight(err.Error(), "\n")
	if m := noField.FindStringSubmatch(msg); m != nil {
		if fields, ok := envFields[m[1]]; ok {
			hint := suggest.DidYouMean(m[2], fields)
			if hint == "" {
				hint = " (its fields: " + strings.Join(fields, ", ") + ")"
			}
			msg = strings.Replace(msg, m[0], envNames[m[1]]+" has no field "+m[2]+hint, 1)
		}
	} else if m := unknownName.FindStringSubmatch(msg); m != nil {
		hint := suggest.DidYouMean(m[1], topNames)
		if hint == "" {
			// A field named without its part: "answer" for completion.answer.
			for _, part := range []string{"completion", "prompt", "row"} {
				if h := suggest.DidYouMean(m[1], envFields[part+"Env"]); h != "" {
					hint = strings.Replace(h, `"`, `"`+part+".", 1)
					break
				}
			}
		}
		msg = strings.Replace(msg, m[0], m[0]+hint, 1)
	}
	return msg
}

var (
	noField     = regexp.MustCompile(`type stages\.(\w+) has no field (\w+)`)
	unknownName = regexp.MustCompile(`unknown name (\w+)`)
	// envNames and envFields are each env struct's name in an expression
	// and its fields; topNames what an expression may name at the top.
	envNames  = map[string]string{"promptEnv": "prompt", "messageEnv": "a message", "completionEnv": "completion", "rowEnv": "row", "recordEnv": "the record"}
	envFields = map[string][]string{}
	topNames  = []string{"tokens", "script"}
)

func init() {
	for _, v := range []any{recordEnv{}, promptEnv{}, messageEnv{}, completionEnv{}, rowEnv{}} {
		t := reflect.TypeOf(v)
		for i := range t.NumField() {
			envFields[t.Name()] = append(envFields[t.Name()], t.Field(i).Tag.Get("expr"))
		}
	}
	topNames = append(topNames, envFields["recordEnv"]...)
}

// scriptsChecked are the scripts dominantScript tells apart, the most
// common first; a letter of another script counts as "Other".
var scriptsChecked = []string{"Latin", "Han", "Cyrillic", "Arabic", "Hiragana", "Katakana", "Hangul", "Devanagari", "Greek", "Hebrew", "Thai", "Other"}

// dominantScript is the Unicode script most of s's letters are in, ""
// when s has none (digits, punctuation and spaces count for no script);
// a tie goes to the script listed first. It is script() in expressions.
func dominantScript(s string) string {
	var counts [12]int
	any := false
	for _, r := range s {
		if i := scriptOf(r); i >= 0 {
			counts[i]++
			any = true
		}
	}
	if !any {
		return ""
	}
	best := 0
	for i, n := range counts {
		if n > counts[best] {
			best = i
		}
	}
	return scriptsChecked[best]
}

// scriptOf is the index in scriptsChecked of a letter's script, -1 for
// what is not a letter.
func scriptOf(r rune) int {
	if r < 0x80 { // ASCII: the common case, without the tables
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return 0
		}
		return -1
	}
	if !unicode.IsLetter(r) {
		return -1
	}
	for i, name := range scriptsChecked[:len(scriptsChecked)-1] {
		if unicode.Is(unicode.Scripts[name], r) {
			return i
		}
	}
	return len(scriptsChecked) - 1
}

// exprTable says how a key whose value is an array of tables of
// expressions (filter's rules, map's set) is written, for its messages.
type exprTable struct {
	item  string   // one table in a message: "rule" → "rule 2"; "" → "#2"
	noun  string   // what a table is: "rule", "assignment"
	shape string   // the table's form: "{reject_if = EXPRESSION, reason = CODE}"
	keys  []string // the keys a table may hold
	want  string   // the keys in words: "reject_if and reason"
	hint  string   // added to "must be a string"
}

// label is table i's name in a message: "rule 2", "#2".
func (e exprTable) label(i int) string {
	if e.item == "" {
		return fmt.Sprintf("#%d", i+1)
	}
	return fmt.Sprintf("%s %d", e.item, i+1)
}

// decode reads raw, the file's value, as an array of at least one table
// whose keys are among e.keys and whose values are strings.
func (e exprTable) decode(raw any) ([]map[string]string, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("must be an array of {%s} tables, got %T", strings.Join(e.keys, ", "), raw)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("must hold at least one %s", e.noun)
	}
	out := make([]map[string]string, len(list))
	for i, el := range list {
		t, ok := el.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: must be a table %s", e.label(i), e.shape)
		}
		out[i] = map[string]string{}
		for k, v := range t {
			s, ok := v.(string)
			switch {
			case !slices.Contains(e.keys, k):
				return nil, fmt.Errorf("%s: unknown key %q (want %s)%s", e.label(i), k, e.want, suggest.DidYouMean(k, e.keys))
			case !ok:
				return nil, fmt.Errorf("%s: %s must be a string%s", e.label(i), k, e.hint)
			}
			out[i][k] = s
		}
	}
	return out, nil
}
