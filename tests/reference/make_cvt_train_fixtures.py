"""Writes tests/fixtures/train/cvt/ and cvt-dropout/: 20 steps of cross-view training of the
tiny CVT tagger (tests/fixtures/cvt/tiny) by the reference written from the paper
(cvt_reference.py), float64, under torch's AdamW with the other training fixtures' settings;
cvt/ without dropout, cvt-dropout/ with cvt_text's (and Sesame's default) dropout, 0.5 on
labelled batches and 0.2 on unlabelled ones. Each holds:

  init/                   the tagger (config.json with those dropouts and label smoothing 0.1;
                          model.safetensors; tokenizer.json),
  batches.safetensors     input_ids, attention_mask, char_ids and labels [20, 3, T(, width)]:
                          even steps labelled (a tag per word, -100 elsewhere), odd steps
                          unlabelled (every label -100), as Sesame's --unlabeled-data
                          alternates them (the same batches in both folders),
  trajectory.json         the optimizer, the dropout seed, and each step's loss, learning rate
                          and gradient norm (before clipping at 1.0),
  final/model.safetensors the weights after the 20 steps,

and cvt-dropout/ also, at the initial weights, the labelled batch 0 and the unlabelled batch 1
with step 0's and step 1's masks:

  losses.json             each one's loss, and its loss without dropout,
  grads-labeled.safetensors, grads-unlabeled.safetensors
                          each one's gradient of every parameter (under its name).

A labelled step minimises the primary module's smoothed cross entropy; an unlabelled one
first runs the primary module without dropout (the teacher, no gradient; it draws no mask),
then the auxiliary views' KL to it on one pass under dropout. The masks are Sesame's
(common.SesameMasks, seeded DROPOUT_SEED, begun at batch index s for step s as Sesame's
Trainer does): the reference draws them in cvt_text's order, so the word embeddings are site
0, the character CNN's output 1, and layer l's forward and backward outputs 2 + 2l and 3 + 2l,
Sesame's numbering in CvtTraining::encode.
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
from common import SesameMasks
from make_cvt_fixtures import LABELS, OPTIONS, VOCAB, gradients
from make_cove_translation_fixtures import train_adamw
from make_train_fixtures import DROPOUT_SEED, OPTIMIZER

TINY = os.path.join("tests", "fixtures", "cvt", "tiny")
OUT = os.path.join("tests", "fixtures", "train")
BATCH = 3
SMOOTHING = 0.1
# (labelled, unlabelled) dropout of each run: none, and cvt_text's keep_prob 0.5 and 0.8.
RUNS = {"cvt": (0.0, 0.0), "cvt-dropout": (0.5, 0.2)}
# The masks one forward draws: the embeddings, the CNN, two layers of two directions.
SITES = 6
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


def step_loss(params, data, s, dropout, masks):
    """Step s's loss: the labelled loss under dropout[0], or CVT's loss under dropout[1], with
    the masks of batch index s."""
    ids, chars, labels = data["input_ids"][s], data["char_ids"][s], data["labels"][s]
    lengths = data["attention_mask"][s].sum(1).tolist()
    labeled = bool((labels != -100).any())
    if not labeled:
        with torch.no_grad():
            teacher = torch.softmax(cvt.forward(params, ids, chars, lengths)[0]["primary"], dim=-1)
    p = dropout[0] if labeled else dropout[1]
    masks.begin(batch_index=s)
    logits = cvt.forward(params, ids, chars, lengths, p, masks)[0]
    assert masks.site == (SITES if p > 0 else 0), masks.site
    if labeled:
        return cvt.labeled_loss(logits, labels.clamp(min=0), lengths, len(LABELS), SMOOTHING)
    return cvt.unlabeled_loss(logits, teacher, lengths)


def write_step_gradients(out, sd, data, dropout):
    """losses.json and grads-{labeled,unlabeled}.safetensors: batch 0 (labelled) and batch 1
    (unlabelled) at the initial weights `sd`, with their steps' masks, and each loss without
    dropout."""
    losses = {}
    masks = SesameMasks(DROPOUT_SEED)
    for name, s in (("labeled", 0), ("unlabeled", 1)):
        loss, grads = gradients(sd, lambda p: step_loss(p, data, s, dropout, masks))
        with torch.no_grad():
            without = step_loss(sd, data, s, (0.0, 0.0), masks)
        losses[name] = {"batch": s, "loss": loss.item(), "loss_without_dropout": without.item()}
        save_file({k: v.float().contiguous() for k, v in grads.items()}, os.path.join(out, f"grads-{name}.safetensors"))
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump(losses, f, indent=1)
    print(f"{out}: {losses}")


def train(run, data):
    dropout = RUNS[run]
    out = os.path.join(OUT, run)
    os.makedirs(os.path.join(out, "init"), exist_ok=True)
    os.makedirs(os.path.join(out, "final"), exist_ok=True)
    with open(os.path.join(TINY, "config.json")) as f:
        config = json.load(f)
    config.update({"labeled_dropout": dropout[0], "unlabeled_dropout": dropout[1], "label_smoothing": SMOOTHING})
    with open(os.path.join(out, "init", "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    shutil.copy(os.path.join(TINY, "model.safetensors"), os.path.join(out, "init", "model.safetensors"))
    shutil.copy(os.path.join(TINY, "tokenizer.json"), os.path.join(out, "init", "tokenizer.json"))
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(out, "batches.safetensors"))

    initial = {k: v.double() for k, v in load_file(os.path.join(TINY, "model.safetensors")).items()}
    if dropout != (0.0, 0.0):
        write_step_gradients(out, initial, data, dropout)
    params = {k: torch.nn.Parameter(v.clone()) for k, v in initial.items()}
    masks = SesameMasks(DROPOUT_SEED)
    print(run)
    train_adamw(params, lambda s: step_loss(params, data, s, dropout, masks), out)


def main():
    data = batches()
    for run in RUNS:
        train(run, data)


if __name__ == "__main__":
    main()
