"""The CoVe encoder of a translation run: a `CoveModel` folder (config.json, model.safetensors
with the MT-LSTM's `vectors.*` and `rnn.*` alone, tokenizer.json) from a `CoveForTranslation`
checkpoint, whose decoder the encoder's users do not need (Sesame loads the whole folder as
CoVe too; this one is smaller, for models/).

    python3 scripts/make-cove-encoder.py runs/cove-mt-gettext models/cove-gettext
"""

import json
import os
import shutil
import sys

from safetensors import safe_open
from safetensors.numpy import save_file

# The decoder's keys in a translation model's config.json.
DECODER_KEYS = ["target_vocab_size", "target_embedding_dim", "decoder_layers", "decoder_start_token_id", "eos_token_id", "dropout", "train_vectors"]


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    run, out = sys.argv[1:]
    with open(os.path.join(run, "config.json")) as f:
        config = json.load(f)
    if config.get("architectures") != ["CoveForTranslation"]:
        raise SystemExit(f"{run} is not a CoVe translation model (architectures {config.get('architectures')})")
    for key in DECODER_KEYS:
        config.pop(key, None)
    config["architectures"] = ["CoveModel"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    with safe_open(os.path.join(run, "model.safetensors"), "numpy") as weights:
        encoder = {k: weights.get_tensor(k) for k in weights.keys() if k.startswith(("vectors.", "rnn."))}
    save_file(encoder, os.path.join(out, "model.safetensors"))
    shutil.copy(os.path.join(run, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    print(f"{out}: {len(encoder)} tensors, {sum(v.size for v in encoder.values()):,} parameters")


if __name__ == "__main__":
    main()
