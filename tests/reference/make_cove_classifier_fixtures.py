"""Writes tests/fixtures/train/cove-classify/: the pooled classifier over CoVe's features
(cove_reference.py) on the tiny MT-LSTM of tests/fixtures/cove/tiny, with a random head
(classifier_hidden_size 8, 3 labels), float64:

  init/                   config.json (CoveForSequenceClassification, [GloVe; CoVe], dropout
                          0: Sesame draws its own masks), model.safetensors, tokenizer.json
  batches.safetensors     input_ids, attention_mask [20, 3, T] (padded with <pad>) and labels
                          [20, 3]
  gradients.safetensors   step 0's logits, loss and the head's gradients (the encoder is fixed)
  trajectory.json         20 AdamW steps: each step's loss, learning rate and gradient norm
  final/model.safetensors the head after them

Run from the repository root:  PYTHONPATH=tests/reference python3 tests/reference/make_cove_classifier_fixtures.py
"""

import json
import os
import random
import shutil

import torch
from safetensors.torch import load_file, save_file

import cove_reference as ref
from make_cove_translation_fixtures import train_adamw
from make_train_fixtures import OPTIMIZER

TINY = os.path.join("tests", "fixtures", "cove", "tiny")
OUT = os.path.join("tests", "fixtures", "train", "cove-classify")
BATCH, LABELS, HIDDEN = 3, 3, 8


def batches(vocab_size, pad):
    rng = random.Random(13)
    rows = [[[rng.randrange(2, vocab_size) for _ in range(rng.randint(1, 7))] for _ in range(BATCH)] for _ in range(OPTIMIZER["steps"])]
    seq = max(len(r) for step in rows for r in step)
    return {
        "input_ids": torch.tensor([[r + [pad] * (seq - len(r)) for r in step] for step in rows]),
        "attention_mask": torch.tensor([[[1] * len(r) + [0] * (seq - len(r)) for r in step] for step in rows]),
        "labels": torch.tensor([[rng.randrange(LABELS) for _ in range(BATCH)] for _ in range(OPTIMIZER["steps"])]),
    }


def step_loss(params, data, s):
    lengths = data["attention_mask"][s].sum(1).tolist()
    return ref.classifier_loss(params, data["input_ids"][s], lengths, data["labels"][s])


def main():
    for sub in ("init", "final"):
        os.makedirs(os.path.join(OUT, sub), exist_ok=True)
    with open(os.path.join(TINY, "config.json")) as f:
        config = json.load(f)
    e, h = config["embedding_dim"], config["hidden_size"]
    config.update({"architectures": ["CoveForSequenceClassification"], "residual_embeddings": True, "classifier_hidden_size": HIDDEN,
                   "classifier_dropout": 0.0, "pad_token_id": 1,
                   "id2label": {str(i): f"LABEL_{i}" for i in range(LABELS)}, "label2id": {f"LABEL_{i}": i for i in range(LABELS)}})
    with open(os.path.join(OUT, "init", "config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    shutil.copy(os.path.join(TINY, "tokenizer.json"), os.path.join(OUT, "init", "tokenizer.json"))
    g = torch.Generator().manual_seed(23)
    encoder = {k: v.double() for k, v in load_file(os.path.join(TINY, "model.safetensors")).items()}
    features = 3 * (e + 2 * h)
    head = {"pre_classifier.weight": (HIDDEN, features), "pre_classifier.bias": (HIDDEN,), "classifier.weight": (LABELS, HIDDEN), "classifier.bias": (LABELS,)}
    head = {n: (0.3 * torch.randn(s, generator=g, dtype=torch.float64)).float().double() for n, s in head.items()}
    save_file({k: v.float().contiguous() for k, v in {**encoder, **head}.items()}, os.path.join(OUT, "init", "model.safetensors"))
    data = batches(config["vocab_size"], 1)
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(OUT, "batches.safetensors"))

    leaves = {k: torch.nn.Parameter(v.clone()) for k, v in head.items()}
    loss = step_loss({**encoder, **leaves}, data, 0)
    loss.backward()
    with torch.no_grad():
        lengths = data["attention_mask"][0].sum(1).tolist()
        logits = ref.classifier_logits({**encoder, **head}, data["input_ids"][0], lengths)
    gradients = {"loss": loss.detach().reshape(1), "logits": logits, **{f"grad.{k}": p.grad for k, p in leaves.items()}}
    save_file({k: v.float().contiguous() for k, v in gradients.items()}, os.path.join(OUT, "gradients.safetensors"))

    trained = {k: torch.nn.Parameter(v.clone()) for k, v in head.items()}
    train_adamw(trained, lambda s: step_loss({**encoder, **trained}, data, s), OUT)

if __name__ == "__main__":
    main()
