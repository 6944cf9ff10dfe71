package sim

// What the simulator speaks and how it behaves, in detail. This is not the
// package comment (doc.go keeps that short, for go doc); it is the contract
// the handlers (handlers.go, chat.go, stream.go, info.go), the servers'
// timing (life.go) and the outputs (output.go, forced.go) keep.
//
// # Endpoints
//
// POST /generate (text or input_ids, sampling_params.max_new_tokens default
// 128, skip_special_tokens, rid, stream), POST /v1/chat/completions
// (messages, max_tokens / max_completion_tokens, chat_template_kwargs.
// enable_thinking, separate_reasoning, stream, stream_options.include_usage,
// return_meta_info; return_token_ids adds choices[i].token_ids, the output
// ids as /generate's output_ids, and prompt_token_ids,
// return_prompt_token_ids the latter only, both refused with 400 on a
// stream, as SGLang 2026-07's; the prompt ids are Qwen3's template over
// the messages' text, and usage.prompt_tokens is then their count),
// GET /health, /health_generate, /get_model_info and /model_info,
// /get_server_info and /server_info, /v1/models, /metrics. /health and
// /health_generate are one handler, as in SGLang 2026: a 1-token
// generation, 200 as soon as the server progresses (that generation done,
// or any running request producing a token), 503 after HealthCheckTimeout
// (20 simulated seconds) without progress, and during warm-up. Errors use
// SGLang's bodies: {"error":{"message"}} for a refused /generate (400),
// {"object":"error","message","type":"<status>","param":null,"code"} for
// its 5xx (HTTPException), {"object":"error","message","type","param",
// "code"} on /v1, {"detail"} for unknown routes.
// With Config.APIKey every request but OPTIONS, /health… and /metrics…
// needs "Authorization: Bearer KEY" (the scheme in any case) or
// "x-api-key: KEY", else 401 {"error":"Unauthorized"}, as SGLang's
// --api-key (utils/auth.py).
//
// # Time
//
// Each server runs at most MaxRunning requests; more wait in a FIFO queue of
// MaxQueued, beyond which a request gets 503 "The request queue is full.".
// With KVTokens set, the head of the queue is admitted only when its prompt
// and max_new_tokens also fit in the KV cache beside what the running
// requests reserve for their decoding, as SGLang's PrefillAdder admits
// (life.go).
// A running request waits out prefill (PrefillLatency + prompt tokens /
// PrefillTokensPerSec), then decodes at DecodeTokensPerSec / (1 +
// (running-1)/BatchHalfSpeed) tokens/s, re-read as the batch changes, so a
// server's throughput rises with the batch and saturates. When the running
// requests' tokens exceed KVTokens, one request at a time (of any kind:
// /generate or chat, streamed or not) is retracted: it leaves the batch,
// queues again, re-prefills its prompt and output so far and decodes on (a
// stream's frames pause; meta_info num_retractions counts it, chat's with
// return_meta_info too). Speed divides all
// of it; latencies in responses stay in simulated seconds. A client that
// closes its connection aborts its request and frees its slot.
//
// # Outputs
//
// A request's output is a function of its content (prompt text, input_ids or
// messages) and Config.Seed: with thinking, "<think>\n" + thinking +
// "\n</think>\n\n" + answer + EOS (<|im_end|>, 151645); without (chat
// enable_thinking=false, or a prompt ending in Qwen3's empty think block),
// answer + EOS. A prompt that ends inside an open think block ("<think>\n",
// a forced-thinking template's generation prompt), or any chat request with
// Config.ForcedThinking, gets the output without its opening "<think>\n",
// and the chat reasoning split takes everything before </think> as
// reasoning (forced.go). Lengths are log-normal around ThinkTokensMean and
// AnswerTokensMean, rounded up to a sentence end; Config.UseLengths takes a
// preset shape ("reasoning": a reasoning model's heavy tail, lengths.go).
// max_new_tokens (chat: max_completion_tokens, else max_tokens) cuts the
// output at exactly that many tokens (finish_reason length, no EOS), always
// as a prefix of the full one.
// The text is prose cut from precomputed corpora, so a response costs a few
// copies of ready-made bytes.
//
// # Tools
//
// A prompt with tools (chat: the "tools" member; /generate: Qwen3's
// "<tools>\n…\n</tools>" block in the rendered prompt, read from input_ids
// only with Config.Tokenizer) gets, with probability Config.ToolCalls
// (default 0.5; sim URL tool_calls=), an answer that ends in Qwen3's
// "<tool_call>\n{\"name\": NAME, \"arguments\": {…}}\n</tool_call>" before
// EOS, NAME one of the declared tools, drawn from the prompt's content and
// the seed. The fault bad-tool-call makes that call malformed (not JSON, or
// an undeclared name). With Config.ToolCallParser "qwen25" (SGLang's
// --tool-call-parser; URL tool_call_parser=qwen25) a chat answer's calls
// are parsed into message.tool_calls ("call_" + 24 hex ids) and
// finish_reason "stop" becomes "tool_calls", as SGLang 2026 does; a
// malformed call is dropped from the list and the content keeps only the
// text before the first call (tools.go). The chat prompt counts and
// prompt_token_ids include the system turn's tools block as Qwen3's
// template renders it; messages' tool_calls and tool results count as
// their content only.
//
// # Not simulated
//
// stop strings and stop_token_ids, ignore_eos, min_new_tokens, n > 1,
// logprobs, tool_choice other than "none" (required or a named function
// are answered as "auto"), tool calls in a streamed chat answer (they stay
// in the content deltas), batch requests (a list in text or input_ids is refused
// with 400), prefix caching (cached_tokens is 0), and any effect of temperature
// or other sampling parameters on the output.
