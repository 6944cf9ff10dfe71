package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// serversTokenizer is the model directory pipe init uses when --model-dir
// is not given: the tokenizer_path an SGLang server reports in
// /get_model_info (or /model_info; SGLang's native API docs,
// docs.sglang.ai/basic_usage/native_api.html "Get Model Info"), if that
// directory is on this machine with a tokenizer.json. It may be a Hugging
// Face id (Qwen/Qwen3-32B) or a path on the GPU host only. A fleet serves one model, so the
// first server that answers decides. from names the server and endpoint.
// The error says why none could be used: a path that is not here, or
// servers that could not be asked.
func serversTokenizer(ctx context.Context, servers []string) (dir, from string, err error) {
	var why []string
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, s := range servers {
		if strings.HasPrefix(s, "sim:") {
			why = append(why, s+" is simulated and has no model files")
			continue
		}
		path, ep, err := reportedTokenizer(ctx, hc, strings.TrimRight(s, "/"))
		switch {
		case err != nil:
			why = append(why, err.Error())
			continue
		case path == "":
			why = append(why, ep+" reports no tokenizer_path")
			continue
		}
		if _, err := os.Stat(filepath.Join(path, "tokenizer.json")); err != nil {
			return "", "", fmt.Errorf("%s reports tokenizer_path %s, which is not on this machine (no %s; a Hugging Face id, or a path on the servers' host only?); give --model-dir DIR with a copy of it", ep, path, filepath.Join(path, "tokenizer.json"))
		}
		return path, ep, nil
	}
	return "", "", fmt.Errorf("the servers could not tell theirs: %s", strings.Join(why, "; "))
}

// reportedTokenizer asks one server for its tokenizer_path.
func reportedTokenizer(ctx context.Context, hc *http.Client, base string) (path, endpoint string, err error) {
	var last error
	for _, p := range []string{"/get_model_info", "/model_info"} {
		endpoint = base + p
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return "", endpoint, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = fmt.Errorf("%s: %v", endpoint, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		var info struct {
			TokenizerPath string `json:"tokenizer_path"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil {
			last = fmt.Errorf("%s answers HTTP %d", endpoint, resp.StatusCode)
			continue
		}
		return info.TokenizerPath, endpoint, nil
	}
	return "", "", last
}
