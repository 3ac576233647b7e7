"""Writes tests/fixtures/train/cvt/: 20 steps of cross-view training of the tiny CVT tagger
(tests/fixtures/cvt/tiny) by the reference written from the paper (cvt_reference.py),
float64, under torch's AdamW with the other training fixtures' settings:

  init/                   the tagger (config.json without dropout — its masks are Sesame's own
                          — and label smoothing 0.1; model.safetensors; tokenizer.json),
  batches.safetensors     input_ids, attention_mask, char_ids and labels [20, 3, T(, width)]:
                          even steps labelled (a tag per word, -100 elsewhere), odd steps
                          unlabelled (every label -100), as Sesame's --unlabeled-data
                          alternates them,
  trajectory.json         the optimizer, and each step's loss, learning rate and gradient norm
                          (before clipping at 1.0),
  final/model.safetensors the weights after the 20 steps.

A labelled step minimises the primary module's smoothed cross entropy; an unlabelled one
first runs the primary module (the teacher, no gradient), then the auxiliary views' KL to it.
Weight decay skips the vectors (biases, emb_scale), as Sesame's does.

Run from the repository root:  python tests/reference/make_cvt_train_fixtures.py
"""

import json
import os
import random
import shutil

import torch
from safetensors.torch import load_file, save_file

import cvt_reference as cvt
from make_cvt_fixtures import LABELS, OPTIONS, VOCAB
from make_train_fixtures import DROPOUT_SEED, OPTIMIZER, learning_rate

TINY = os.path.join("tests", "fixtures", "cvt", "tiny")
OUT = os.path.join("tests", "fixtures", "train", "cvt")
BATCH = 3
SMOOTHING = 0.1
TAGS = {"the": "DET", "a": "DET", "cat": "NOUN", "dog": "NOUN", "mat": "NOUN", "park": "NOUN"}


def sentences(rng, count):
    words = VOCAB[5:] + ["Zebra", "café", "1999"]
    return [[rng.choice(words) for _ in range(rng.randint(2, 6))] for _ in range(count)]


def batches():
    """Every step's batch, padded to one length."""
    rng = random.Random(5)
    steps = [sentences(rng, BATCH) for _ in range(OPTIMIZER["steps"])]
    seq = max(len(s) for batch in steps for s in batch) + 2
    data = {"input_ids": [], "attention_mask": [], "char_ids": [], "labels": []}
    for step, batch in enumerate(steps):
        ids, chars, lengths = cvt.encode(batch, VOCAB, OPTIONS["max_word_length"])
        pad = seq - ids.shape[1]
        data["input_ids"].append(torch.nn.functional.pad(ids, (0, pad)))
        padding_row = torch.tensor(cvt.char_row(None, OPTIONS["max_word_length"]))
        data["char_ids"].append(torch.cat([chars, padding_row.expand(BATCH, pad, -1)], dim=1))
        data["attention_mask"].append(torch.tensor([[1] * n + [0] * (seq - n) for n in lengths]))
        labels = torch.full((BATCH, seq), -100)
        if step % 2 == 0:
            for n, s in enumerate(batch):
                for t, w in enumerate(s):
                    labels[n, t + 1] = LABELS.index(TAGS.get(w.lower(), "OTHER"))
        data["labels"].append(labels)
    return {k: torch.stack(v).to(torch.int64) for k, v in data.items()}


def main():
    os.makedirs(os.path.join(OUT, "init"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "final"), exist_ok=True)
    with open(os.path.join(TINY, "config.json")) as f:
        config = json.load(f)
    config.update({"labeled_dropout": 0.0, "unlabeled_dropout": 0.0, "label_smoothing": SMOOTHING})
    with open(os.path.join(OUT, "init", "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    shutil.copy(os.path.join(TINY, "model.safetensors"), os.path.join(OUT, "init", "model.safetensors"))
    shutil.copy(os.path.join(TINY, "tokenizer.json"), os.path.join(OUT, "init", "tokenizer.json"))
    data = batches()
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(OUT, "batches.safetensors"))

    params = {k: torch.nn.Parameter(v.double()) for k, v in load_file(os.path.join(TINY, "model.safetensors")).items()}
    decay = sorted(n for n, p in params.items() if p.dim() >= 2)
    no_decay = sorted(n for n, p in params.items() if p.dim() < 2)
    opt = OPTIMIZER
    groups = [{"params": [params[n] for n in decay], "weight_decay": opt["weight_decay"]}, {"params": [params[n] for n in no_decay], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    steps = []
    for s in range(opt["steps"]):
        lr = learning_rate(s, opt["lr"], opt["warmup"], opt["steps"], opt["schedule"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        ids, chars, labels = data["input_ids"][s], data["char_ids"][s], data["labels"][s]
        lengths = data["attention_mask"][s].sum(1).tolist()
        optimizer.zero_grad(set_to_none=True)
        if (labels != -100).any():
            loss = cvt.labeled_loss(cvt.forward(params, ids, chars, lengths)[0], labels.clamp(min=0), lengths, len(LABELS), SMOOTHING)
        else:
            with torch.no_grad():
                teacher = torch.softmax(cvt.forward(params, ids, chars, lengths)[0]["primary"], dim=-1)
            loss = cvt.unlabeled_loss(cvt.forward(params, ids, chars, lengths)[0], teacher, lengths)
        loss.backward()
        for p in params.values():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grad_norm = torch.nn.utils.clip_grad_norm_(list(params.values()), opt["clip_grad_norm"])
        optimizer.step()
        steps.append({"step": s, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()})
        print(f"  step {s:2d}  loss {loss.item():.6f}  lr {lr:.6g}  grad_norm {grad_norm.item():.6f}")
    with open(os.path.join(OUT, "trajectory.json"), "w") as f:
        json.dump({"optimizer": opt, "dropout_seed": DROPOUT_SEED, "param_groups": {"decay": decay, "no_decay": no_decay}, "steps": steps}, f, indent=1)
    save_file({k: v.detach().float().contiguous() for k, v in params.items()}, os.path.join(OUT, "final", "model.safetensors"))


if __name__ == "__main__":
    main()
