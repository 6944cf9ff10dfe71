package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/pipe-dev/pipe/internal/testrig/trainers"
)

// Commands for the scripts (testdata/script/trainer_layouts.txtar) that
// read pipe's outputs as the trainers do, by their own rules
// (internal/testrig/trainers): they print what the trainer would see.

// hfDataFilesMain is `hfdatafiles DIR`: the files HF datasets' load_dataset
// takes from DIR, one "SPLIT FILE" line each (trainers.DataFiles, after
// datasets' src/datasets/data_files.py).
func hfDataFilesMain() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: hfdatafiles DIR")
		return 2
	}
	splits, err := trainers.DataFiles(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "hfdatafiles:", err)
		return 1
	}
	var names []string
	for s := range splits {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		for _, f := range splits[s] {
			fmt.Println(s, f)
		}
	}
	return 0
}

// specForgeLoadMain is `specforgeload [--max-length N] [--dflash] FILE`:
// what SpecForge's loader makes of FILE (trainers.LoadSpecForge, after
// specforge/data/prompt_builder.py prepare_prompt_tasks).
func specForgeLoadMain() int {
	fs := flag.NewFlagSet("specforgeload", flag.ContinueOnError)
	maxLength := fs.Int("max-length", 0, "data.max_length")
	dflash := fs.Bool("dflash", false, "DFlash's rules: 2 loss tokens, two adjacent")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: specforgeload [--max-length N] [--dflash] FILE")
		return 2
	}
	o := trainers.SpecForgeOptions{MaxLength: *maxLength, MinLossTokens: 1}
	if *dflash {
		o.MinLossTokens, o.Adjacent = 2, true
	}
	got, err := trainers.LoadSpecForge(fs.Arg(0), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "specforgeload:", err)
		return 1
	}
	if got.PreTokenized {
		fmt.Printf("pre-tokenized: %d prompts, %d dropped\n", len(got.Prompts), got.Dropped)
		return 0
	}
	kw := "none"
	if len(got.TemplateKwargs) > 0 {
		kw = strings.Join(got.TemplateKwargs, ", ")
	}
	reasoning := 0
	for _, conv := range got.Conversations {
		last := conv[len(conv)-1]
		if r, _ := last["reasoning_content"].(string); last["role"] == "assistant" && r != "" {
			reasoning++
		}
	}
	fmt.Printf("raw: %d conversations, %d ending in an assistant turn with reasoning_content; template kwargs: %s\n", len(got.Conversations), reasoning, kw)
	return 0
}
