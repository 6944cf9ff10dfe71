package sim

import "strings"

// Forced thinking: templates such as Qwen3.5/3.6 and Qwen3-Thinking-2507
// end the generation prompt with "<|im_start|>assistant\n<think>\n", so the
// model's output starts inside its reasoning and never has <think>. On
// /generate the simulator sees it in the prompt; on the chat API, which
// renders no template here, Config.ForcedThinking says the served template
// is one (as SGLang's template_manager.force_reasoning does), and the
// reasoning parser then takes everything before </think> as reasoning.

// forcedSuffix ends a forced-thinking generation prompt.
const forcedSuffix = "<think>\n"

var forcedIDs = []int{idThinkStart, idNewline}

// textOpensThink says whether a /generate text prompt ends inside an open
// think block.
func textOpensThink(text string) bool { return strings.HasSuffix(text, forcedSuffix) }

// idsOpenThink says the same of input_ids.
func idsOpenThink(ids []int) bool {
	return len(ids) >= len(forcedIDs) && equalInts(ids[len(ids)-len(forcedIDs):], forcedIDs)
}

// splitForced is the qwen3 reasoning parser with force_reasoning: the text
// starts inside the reasoning; with no </think> it is all reasoning.
func splitForced(text string) (reasoning, content string) {
	r, c, _ := strings.Cut(text, "</think>")
	return strings.TrimSpace(r), strings.TrimSpace(c)
}
