"""Random checkpoints for measuring the memory peak of loading (scripts/load-memory.sh and
load-memory-browser.mjs), saved by transformers under target/load-memory/: a bert-base (110M
parameters, 438 MB of f32) whole and in 100 MB shards, and a GPT-2 of gpt2-large's shape (774M
parameters, 3.1 GB) whole and in 1 GB shards. Models already there are kept."""

import os
import sys

import torch
import transformers

OUT = sys.argv[1] if len(sys.argv) > 1 else "target/load-memory"
MODELS = {
    "bert-base": (lambda: transformers.BertModel(transformers.BertConfig(architectures=["BertModel"])), "100MB"),
    "gpt2-large": (
        lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=1280, n_layer=36, n_head=20, architectures=["GPT2LMHeadModel"])),
        "1GB",
    ),
}

for name, (make, shard_size) in MODELS.items():
    if os.path.exists(os.path.join(OUT, f"{name}-sharded", "model.safetensors.index.json")):
        continue
    torch.manual_seed(0)
    model = make().eval()
    model.save_pretrained(os.path.join(OUT, f"{name}-single"), max_shard_size="10GB")
    model.save_pretrained(os.path.join(OUT, f"{name}-sharded"), max_shard_size=shard_size)
    print(f"wrote {name} to {OUT}", file=sys.stderr)
