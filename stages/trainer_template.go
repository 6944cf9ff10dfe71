package stages

import (
	"fmt"
	"strings"

	"github.com/pipe-dev/pipe/internal/suggest"
	"github.com/pipe-dev/pipe/stages/tokenize"
	"github.com/pipe-dev/pipe/stages/tokenize/chat"
)

// templateProbe is a conversation of the shape pipe's rows have: a system
// prompt, an earlier exchange from the prompt, and the generated reply
// with its reasoning (thinking on).
func templateProbe(withReasoning bool) []chat.Message {
	reply := chat.NewReply("assistant", "The answer is 4.", "Two and two make four.")
	if !withReasoning {
		reply = chat.NewMessage("assistant", "The answer is 4.")
	}
	return []chat.Message{
		chat.NewMessage("system", "You answer briefly."),
		chat.NewMessage("user", "Say hello."),
		chat.NewMessage("assistant", "Hello."),
		chat.NewMessage("user", "What is 2+2?"),
		reply,
	}
}

// trainerTemplateAgrees says whether SpecForge, rendering and labelling a
// conversation with its template sf over the model's template tmpl (its
// raw-conversation route), gets the text and the loss of the rows
// tokenize-and-mask builds with mask specforge (forced: tmpl forces
// thinking). why says how they differ.
func trainerTemplateAgrees(tmpl *chat.Template, forced bool, sf sfTemplate) (ok bool, why string, err error) {
	if sf.Other {
		return false, "it is another family's template (not ChatML)", nil
	}
	on := true
	text, turns, err := tmpl.AssistantTurns(templateProbe(true), chat.Options{EnableThinking: &on}, false)
	if err != nil {
		return false, "", err
	}
	opts := chat.Options{}
	if sf.Thinking {
		opts.EnableThinking = &on
	}
	theirs, err := tmpl.Render(templateProbe(sf.Thinking), opts)
	if err != nil {
		return false, "", err
	}
	if theirs != text {
		return false, "its parser drops each turn's reasoning_content (specforge/data/parse.py Parser.standard_keys), so the trainer renders another text than the rows hold", nil
	}
	ours := make([]bool, len(text))
	for _, sp := range tokenize.MaskSpans(turns, tokenize.MaskSpecForge, forced) {
		for i := sp[0]; i < sp[1]; i++ {
			ours[i] = true
		}
	}
	their := sf.Covered(text)
	for i := range ours {
		if ours[i] != their[i] {
			what := "trains %q (line %d of a probe conversation), which the rows leave untrained"
			if ours[i] {
				what = "leaves %q untrained (line %d of a probe conversation), which the rows train"
			}
			line := strings.Count(text[:i], "\n") + 1
			return false, fmt.Sprintf("it "+what+": its assistant_header is %q", lineAt(text, i), line, sf.AssistantHeader), nil
		}
	}
	return true, "", nil
}

// lineAt is the line of text holding byte i, bounded.
func lineAt(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text)
	} else {
		end += i
	}
	if end-start > 80 {
		end = start + 80
	}
	return text[start:end]
}

// modelChat is the chat template tokenize-and-mask renders with from the
// model directory dir (template "" is the model's own, or "chatml"), and
// whether it forces thinking; nil when it cannot be read (the run's own
// load then says why).
func modelChat(dir, template string) (*chat.Template, bool) {
	tok, err := tokenize.LoadChat(dir)
	if err != nil {
		return nil, false
	}
	tmpl, err := tok.Chat(template)
	if err != nil {
		return nil, false
	}
	forced, _, err := tmpl.ThinkingForced("<think>", "</think>")
	if err != nil {
		return nil, false
	}
	return tmpl, forced
}

// agreeingTemplates are SpecForge's names under which it labels tmpl's
// conversations as tokenize-and-mask's rows are.
func agreeingTemplates(tmpl *chat.Template, forced bool) []string {
	var agree []string
	for _, t := range sfTemplates {
		if a, _, _ := trainerTemplateAgrees(tmpl, forced, t); a {
			agree = append(agree, t.Name)
		}
	}
	return agree
}

// TrainerTemplateFor is SpecForge's name for the chat template of the
// model in dir (its data.chat_template): the first that labels the model's
// conversations as tokenize-and-mask's rows are; "" when none does or the
// directory has no readable template.
func TrainerTemplateFor(dir string) string {
	tmpl, forced := modelChat(dir, "")
	if tmpl == nil {
		return ""
	}
	if agree := agreeingTemplates(tmpl, forced); len(agree) > 0 {
		return agree[0]
	}
	return ""
}

// checkTrainerTemplate refuses a [trainer] chat_template under which
// SpecForge would label the model's conversations otherwise than the rows
// tokenize-and-mask builds from the model directory dir (its template, or
// ChatML): the trainer's labelling and pipe's must agree token for token.
// A name SpecForge does not have is refused with the ones it has.
func checkTrainerTemplate(dir, template, name string) error {
	sf, known := sfTemplateNamed(name)
	if !known {
		return fmt.Errorf("= %q is not one of SpecForge's templates (specforge/data/template.py): %s%s", name, strings.Join(sfTemplateNames(), ", "), suggest.DidYouMean(name, sfTemplateNames()))
	}
	tmpl, forced := modelChat(dir, template)
	if tmpl == nil {
		return nil
	}
	ok, why, err := trainerTemplateAgrees(tmpl, forced, sf)
	if err != nil || ok {
		return nil
	}
	var agree []string
	for _, n := range agreeingTemplates(tmpl, forced) {
		agree = append(agree, fmt.Sprintf("%q", n))
	}
	family := "does not force thinking (a hybrid template)"
	if forced {
		family = "forces thinking (its generation prompt ends in \"<think>\\n\")"
	}
	fix := "no SpecForge template labels it as the rows are: leave chat_template out of [trainer] and train the pre-tokenized rows (layout = \"specforge\"), which carry their own mask"
	if len(agree) > 0 {
		fix = "SpecForge's name for it: " + strings.Join(agree, " or ")
	}
	return fmt.Errorf("= %q does not label the rows as tokenize-and-mask builds them: the model's chat template (%s) %s, and under SpecForge's %q %s; %s", name, dir, family, name, why, fix)
}
