package sim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/pipe-dev/pipe/stages/sglang/sim"
)

func ExampleStart() {
	f, err := sim.Start(context.Background(), sim.Config{Count: 2, Speed: 1e6})
	if err != nil {
		panic(err)
	}
	defer f.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(f.URLs()[1]+"/generate", "application/json",
		strings.NewReader(`{"text":"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n","sampling_params":{"max_new_tokens":16}}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var out struct {
		Text      string `json:"text"`
		OutputIDs []int  `json:"output_ids"`
		MetaInfo  struct {
			FinishReason struct {
				Type string `json:"type"`
			} `json:"finish_reason"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"meta_info"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, out.MetaInfo.FinishReason.Type, out.MetaInfo.CompletionTokens, out.OutputIDs[0], strings.HasPrefix(out.Text, "<think>\n"))
	// Output: 200 length 16 151667 true
}
