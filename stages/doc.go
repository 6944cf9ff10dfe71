// Package stages holds the stage kinds. Each kind lives in its own file, named
// after the kind (read-prompts in read_prompts.go), and registers its Spec
// with pipeline.Register from init(). Heavy helpers live in sub-packages
// (sglang for the server client and simulator, tokenize for BPE and chat
// templates).
package stages
