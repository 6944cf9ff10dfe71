#!/usr/bin/env python3
"""Writes testdata/tokenizers/qwen3-tiny from the real Qwen3 tokenizer files
(.cache/qwen3, from scripts/fetch-qwen3.sh): the same pre-tokenizer, added
tokens (<think>, <|im_start|>, ...) and chat template, and the first K
merges of its BPE with the vocabulary they make. Qwen3's ids follow its
merge order (id = 256 + rank), so every token of the tiny tokenizer keeps
its real Qwen3 id; a text splits into more, shorter tokens than with the
full vocabulary. The unit tests use it so that `go test ./...` needs no
download; tests that compare with Qwen3's real ids use the real files.

  scripts/make-tiny-tokenizer.py [SRC_DIR [K]]
"""
import json, os, shutil, sys

src = sys.argv[1] if len(sys.argv) > 1 else ".cache/qwen3"
k = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
dst = os.path.join(os.path.dirname(__file__), "..", "testdata", "tokenizers", "qwen3-tiny")
t = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
m = t["model"]
merges = m["merges"][:k]
limit = 256 + k
for rank, mg in enumerate(merges):
    a, b = mg if isinstance(mg, list) else mg.split(" ")
    if m["vocab"][a + b] != 256 + rank:
        sys.exit(f"merge {rank} ({a!r} {b!r}) does not make id {256 + rank}: not a Qwen3-like vocabulary")
m["vocab"] = {tok: i for tok, i in m["vocab"].items() if i < limit}
# The added tokens keep their real ids only from the vocabulary: an added
# token the model's vocabulary lacks gets the next free id (HF's
# AddedVocabulary::add_tokens), which would be 3256, not 151667.
for a in t["added_tokens"]:
    m["vocab"][a["content"]] = a["id"]
m["merges"] = merges
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(t, f, ensure_ascii=False, separators=(",", ":"))
shutil.copy(os.path.join(src, "tokenizer_config.json"), os.path.join(dst, "tokenizer_config.json"))
print(f"{dst}: {len(m['vocab'])} tokens, {len(merges)} merges, {len(t['added_tokens'])} added")
