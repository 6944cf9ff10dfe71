package sglang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pipe-dev/pipe/stages/sglang/sim/simtest"
)

// On the chat API the client asks for the output ids and gets them into
// Result.OutputIDs: the sampled ids, which decode to the reasoning and the
// answer; the prompt's ids go to Result.PromptIDs.
func TestChatOutputIDs(t *testing.T) {
	tok := simtest.ByteTokenizer{}
	for _, forced := range []bool{false, true} {
		t.Run(fmt.Sprintf("forced=%v", forced), func(t *testing.T) {
			cfg := fastSim(1)
			cfg.Tokenizer, cfg.ForcedThinking = tok, forced
			f := startSim(t, cfg)
			opts := testOptions(APIChat)
			opts.ThinkingForced = forced
			c := startClient(t, specsOf(f.URLs(), 4), opts)
			s := c.Session()
			defer s.Close()
			for i := range 5 {
				r, err := s.Generate(context.Background(), &Request{Messages: []Message{{Role: "user", Content: fmt.Sprintf("question %d", i)}}})
				if err != nil {
					t.Fatal(err)
				}
				ids := r.OutputIDs
				if len(ids) != r.CompletionTokens || ids[len(ids)-1] != 151645 || r.Reasoning == "" || r.Answer == "" {
					t.Fatalf("%d ids for %d completion tokens, last %v; result %+v", len(ids), r.CompletionTokens, ids[len(ids)-1:], r)
				}
				text := tok.Decode(ids[:len(ids)-1])
				want := "<think>\n" + r.Reasoning + "\n</think>\n\n" + r.Answer
				if forced {
					want = r.Reasoning + "\n</think>\n\n" + r.Answer
					if slices.Contains(ids, 151667) {
						t.Errorf("forced output ids hold <think>: %q", text)
					}
				}
				if text != want {
					t.Errorf("output ids decode to\n%q\nwant\n%q", text, want)
				}
				wantPrompt := fmt.Sprintf("<|im_start|>user\nquestion %d<|im_end|>\n<|im_start|>assistant\n", i)
				if forced {
					wantPrompt += "<think>\n"
				}
				if got := tok.Decode(r.PromptIDs); got != wantPrompt || len(r.PromptIDs) != r.PromptTokens {
					t.Errorf("prompt ids decode to %q (%d ids, prompt_tokens %d)", got, len(r.PromptIDs), r.PromptTokens)
				}
			}
		})
	}
}

// A chat answer without ids (an older server) leaves them empty; a list
// with ids of the wrong kind is dropped, never a failure or a panic.
func TestChatOutputIDsLenient(t *testing.T) {
	head := `{"choices":[{"message":{"content":"4","reasoning_content":"2+2"},"finish_reason":"stop"`
	for _, tc := range []struct {
		extra           string
		output, prompts []int
	}{
		{``, nil, nil},
		{`,"token_ids":null,"prompt_token_ids":null`, nil, nil},
		{`,"token_ids":"151645","prompt_token_ids":{"a":1}`, nil, nil},
		{`,"token_ids":[],"prompt_token_ids":[]`, nil, nil},
		// A list with an element that is no token id is dropped whole: a
		// list with holes would misplace every token after the first.
		{`,"token_ids":[1,"2",null,[3],{"x":4},5.7,-6,1e400,99999999999999999999]`, nil, nil},
		{`,"token_ids":[1,5.7]`, nil, nil},
		{`,"token_ids":[1,-6]`, nil, nil},
		{`,"token_ids":[1,1e3]`, nil, nil},
		{`,"token_ids":[1,99999999999999999999]`, nil, nil},
		{`,"token_ids":[0,151645,248069]`, []int{0, 151645, 248069}, nil},
		{`,"token_ids":[7],"response_token_ids":[8]`, []int{7}, nil},
		{`,"response_token_ids":[8],"prompt_token_ids":[1,2]`, []int{8}, []int{1, 2}},
	} {
		var r Result
		if err := parseResult(APIChat, []byte(head+tc.extra+`}]}`), ThinkOn, &r); err != nil {
			t.Errorf("%s: %v", tc.extra, err)
			continue
		}
		if !slices.Equal(r.OutputIDs, tc.output) || !slices.Equal(r.PromptIDs, tc.prompts) || r.Answer != "4" {
			t.Errorf("%s: output %v prompt %v answer %q", tc.extra, r.OutputIDs, r.PromptIDs, r.Answer)
		}
	}
	// A deep or torn id list is an error, not a panic.
	for _, body := range []string{
		head + `,"token_ids":[1,2` + `}]}`,
		head + `,"token_ids":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}]}`,
	} {
		var r Result
		if err := parseResult(APIChat, []byte(body), ThinkOn, &r); err == nil && len(body) < 1000 {
			t.Errorf("%.80s…: parsed", body)
		}
	}
}
