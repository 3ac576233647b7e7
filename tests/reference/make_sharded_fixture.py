"""Writes tests/fixtures/gpt2/GPT2LMHeadModel-sharded/: the tiny GPT-2 LM fixture saved by
transformers as a sharded checkpoint (model.safetensors.index.json and its shards, 40 KB
each at most) with the tokenizer, the inputs and transformers' outputs (reference.safetensors,
as write_fixture writes them), checked against the model read back from the shards.

Made with: torch 2.15.0, transformers 5.23.0 (requirements.txt beside this).
Run from the repository root, after make_gpt_fixtures.py:
    python tests/reference/make_sharded_fixture.py
"""

import json
import os
import shutil

import torch
import transformers
from safetensors.torch import load_file

from common import write_fixture

SOURCE = "tests/fixtures/gpt2/GPT2LMHeadModel"
OUT = "tests/fixtures/gpt2/GPT2LMHeadModel-sharded"


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    model = transformers.GPT2LMHeadModel.from_pretrained(SOURCE).eval()
    with open(os.path.join(SOURCE, "inputs.json")) as f:
        inputs = json.load(f)
    write_fixture(model, OUT, inputs, max_shard_size="40KB")
    shards = sorted(f for f in os.listdir(OUT) if f.startswith("model-"))
    assert len(shards) > 1 and not os.path.exists(os.path.join(OUT, "model.safetensors")), shards
    shutil.copy(os.path.join(SOURCE, "tokenizer.json"), OUT)
    # transformers reads the shards back to the same model.
    reloaded = transformers.GPT2LMHeadModel.from_pretrained(OUT).eval()
    with torch.no_grad():
        logits = reloaded(**{k: torch.tensor(v) for k, v in inputs.items()}).logits
    assert torch.equal(logits, load_file(os.path.join(OUT, "reference.safetensors"))["logits"])
    print(f"{OUT}: {len(shards)} shards")


if __name__ == "__main__":
    main()
