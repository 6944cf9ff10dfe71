package main

import (
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"
)

// pipelines/regenerate.toml writes what SpecForge's Qwen3.6 DFlash recipe
// reads (SpecForge examples/configs/qwen3.6-27b-dflash-online.yaml:
// data.train_data_path, a raw-conversation JSONL file; data.max_length
// 4096; training.strategy dflash): a write-jsonl output in the
// conversations layout judged by DFlash's rules at that max_length, from
// the tokenized rows (so lengths and loss tokens can be judged). Its
// chat_template is SpecForge's name for the demo's model, Qwen3's hybrid
// template ("qwen3-thinking"; the recipe's Qwen3.6 is "qwen3.5"): pipe
// check refuses one that labels the rows otherwise.
func TestRegenerateWritesSpecForgeQwen36DFlash(t *testing.T) {
	var file struct {
		Trainer map[string]any   `toml:"trainer"`
		Stage   []map[string]any `toml:"stage"`
	}
	if _, err := toml.DecodeFile(filepath.Join("..", "..", "pipelines", "regenerate.toml"), &file); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, s := range file.Stage {
		kinds[s["id"].(string)] = s["kind"].(string)
	}
	for _, s := range file.Stage {
		if s["kind"] != "write-jsonl" || s["layout"] != "conversations" {
			continue
		}
		tr := file.Trainer
		if tr["method"] != "dflash" || tr["max_length"] != int64(4096) || tr["chat_template"] != "qwen3-thinking" {
			t.Fatalf("[trainer] has method %v, max_length %v, chat_template %v; the recipe trains DFlash at max_length 4096, and Qwen3's template is qwen3-thinking", tr["method"], tr["max_length"], tr["chat_template"])
		}
		if _, set := s["max_length"]; set {
			t.Fatal("the conversations output sets max_length itself: it is read from [trainer]")
		}
		if in, _ := s["input"].(string); kinds[in] != "tokenize-and-mask" {
			t.Fatalf("the conversations output reads %v (%s), not tokenized rows", s["input"], kinds[in])
		}
		return
	}
	t.Fatal(`no write-jsonl output with layout = "conversations"`)
}
