package stages

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipe-dev/pipe/internal/testrig/testenv"
	"github.com/pipe-dev/pipe/pipeline/engine"
)

// modelDirWith is the tiny Qwen3 tokenizer with a generation_config.json
// of the given text: a model directory as the Hub ships it.
func modelDirWith(t *testing.T, genConfig string) string {
	t.Helper()
	src, dir := testenv.TinyQwen3Dir(t), t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if genConfig != "" {
		os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(genConfig), 0o644)
	}
	return dir
}

// Every request carries every sampling field: the stage's values, the
// model's generation_config.json for the rest (Qwen3's: temperature 0.6,
// top_p 0.95, top_k 20), the server's neutral default where neither says;
// each completion records them. Without generation_config.json nothing is
// invented: the unset fields stay unsent.
func TestGenerateSendsSamplingWhole(t *testing.T) {
	f := startTestFleet(t, quickSim(1))
	model := modelDirWith(t, `{"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "bos_token_id": 151643}`)
	dir, _, err := runGenPipeline(t, context.Background(),
		genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"temperature = 0.7\ntokenizer = \""+model+"\"\napi = \"generate\"\n"), genPrompts(5), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) != 5 {
		t.Fatalf("%d completions, want 5", len(recs))
	}
	for _, r := range recs {
		req := r.Completion.Request
		want := map[string]any{"temperature": 0.7, "top_p": 0.95, "top_k": float64(20), "min_p": float64(0), "repetition_penalty": float64(1), "presence_penalty": float64(0), "frequency_penalty": float64(0)}
		for k, v := range want {
			if req[k] != v {
				t.Fatalf("%s: %s = %v (%T), want %v; request %v", r.ID, k, req[k], req[k], v, req)
			}
		}
	}
	cfg := &generateConfig{Tokenizer: model}
	rs := cfg.ResolvedSampling()
	if got := rs["top_k"].(map[string]any); got["value"] != float64(20) || got["from"] != GenerationConfigFile {
		t.Errorf("resolved top_k %v", got)
	}
	if got := rs["min_p"].(map[string]any); got["from"] != "the server's default" {
		t.Errorf("resolved min_p %v", got)
	}

	bare := modelDirWith(t, "")
	dir, _, err = runGenPipeline(t, context.Background(),
		genPipeline(serversKey(f.URLs())+fastGenKeys+readyKey+"tokenizer = \""+bare+"\"\napi = \"generate\"\n"), genPrompts(3), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs = readRecords(t, filepath.Join(dir, "out/completions.jsonl"))
	if len(recs) != 3 {
		t.Fatalf("%d completions, want 3", len(recs))
	}
	for _, r := range recs {
		if _, sent := r.Completion.Request["top_k"]; sent {
			t.Fatalf("%s: top_k sent without a generation_config.json: %v", r.ID, r.Completion.Request)
		}
	}
	if (&generateConfig{Tokenizer: bare}).ResolvedSampling() != nil {
		t.Error("resolved sampling without generation_config.json")
	}
}
