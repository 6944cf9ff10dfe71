package stages

import (
	"regexp"
	"slices"
	"strings"
)

// sfTemplate is what SpecForge's labelling of a raw conversation reads of
// one of its chat templates (specforge/data/template.py ChatTemplate, at
// a6b6b023): the loss covers every match of assistant_header through
// end_of_turn_token (specforge/data/parse.py GeneralParser.parse), minus
// each ignore_token; a "thinking" parser (ThinkingParser) keeps each
// message's reasoning_content and renders with enable_thinking=True, the
// general one keeps only role, content and tool_calls
// (Parser.standard_keys), so the model's template never sees the
// reasoning.
type sfTemplate struct {
	Name            string
	AssistantHeader string
	EndOfTurn       string
	IgnoreTokens    []string
	Thinking        bool
	// Other is a template of another format (not ChatML: Llama's headers,
	// harmony, GLM): tokenize-and-mask's rows never match it.
	Other bool
}

// sfTemplates are SpecForge's registered templates (template.py
// TEMPLATE_REGISTRY.register calls, a6b6b023), the usual name of a family
// first (qwen3.5 before qwen3-next-thinking). The ChatML ones are whole;
// the others are named, so a name from another family is told apart from
// a misspelling.
var sfTemplates = []sfTemplate{
	{Name: "qwen", AssistantHeader: "<|im_start|>assistant\n", EndOfTurn: "<|im_end|>\n"},
	{Name: "lfm", AssistantHeader: "<|im_start|>assistant\n", EndOfTurn: "<|im_end|>\n"},
	{Name: "qwen3-thinking", AssistantHeader: "<|im_start|>assistant\n", EndOfTurn: "<|im_end|>\n", Thinking: true},
	{Name: "qwen3-instruct", AssistantHeader: "<|im_start|>assistant\n", EndOfTurn: "<|im_end|>\n", IgnoreTokens: []string{"<think>\n\n</think>\n\n"}},
	{Name: "qwen3.5", AssistantHeader: "<|im_start|>assistant\n<think>\n", EndOfTurn: "<|im_end|>\n", Thinking: true},
	{Name: "qwen3-next-thinking", AssistantHeader: "<|im_start|>assistant\n<think>\n", EndOfTurn: "<|im_end|>\n", Thinking: true},
	{Name: "llama3", Other: true}, {Name: "llama4", Other: true}, {Name: "phi3", Other: true},
	{Name: "phi4", Other: true}, {Name: "phi4-mini", Other: true}, {Name: "gpt-oss-naive", Other: true},
	{Name: "gpt-oss", Other: true}, {Name: "deepseek-r1-distill", Other: true}, {Name: "kimi-k2-thinking", Other: true},
	{Name: "kimi-k2-instruct", Other: true}, {Name: "kimi-k3-thinking", Other: true}, {Name: "deepseek-v3", Other: true},
	{Name: "deepseek-v2", Other: true}, {Name: "ling-flash-2.0", Other: true}, {Name: "deepseek-v32", Other: true},
	{Name: "glm-5.2", Other: true}, {Name: "gemma", Other: true}, {Name: "longcat", Other: true},
	{Name: "longcat_xml", Other: true}, {Name: "inkling-thinking", Other: true},
}

// sfTemplateNamed is SpecForge's template of that name.
func sfTemplateNamed(name string) (sfTemplate, bool) {
	i := slices.IndexFunc(sfTemplates, func(t sfTemplate) bool { return t.Name == name })
	if i < 0 {
		return sfTemplate{}, false
	}
	return sfTemplates[i], true
}

// sfTemplateNames lists the names, for messages.
func sfTemplateNames() []string {
	names := make([]string, len(sfTemplates))
	for i, t := range sfTemplates {
		names[i] = t.Name
	}
	return names
}

// Covered returns, for each byte of conv, whether SpecForge's labelling
// with t puts loss on it: the regex re.escape(assistant_header) +
// r"([\s\S]*?(?:" + re.escape(end_of_turn) + "|$))" (group 1 of every
// match), less every occurrence of an ignore token.
func (t sfTemplate) Covered(conv string) []bool {
	on := make([]bool, len(conv))
	if t.Other || t.AssistantHeader == "" {
		return on
	}
	re := regexp.MustCompile(regexp.QuoteMeta(t.AssistantHeader) + `((?s).*?(?:` + regexp.QuoteMeta(t.EndOfTurn) + `|$))`)
	for _, m := range re.FindAllStringSubmatchIndex(conv, -1) {
		for i := m[2]; i < m[3]; i++ {
			on[i] = true
		}
	}
	for _, tok := range t.IgnoreTokens {
		for start := 0; ; {
			i := strings.Index(conv[start:], tok)
			if i < 0 {
				break
			}
			for j := start + i; j < start+i+len(tok); j++ {
				on[j] = false
			}
			start += i + len(tok)
		}
	}
	return on
}
