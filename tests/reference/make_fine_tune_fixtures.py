"""Writes tests/fixtures/fine-tune/bert-classify/: the reference of the package's fineTune
(and `sesame train --objective classify`) from text, as a person fine-tunes in transformers:

  init/             a tiny BertForSequenceClassification whose 2-class head is in the checkpoint
                    (config.json with id2label negative/positive, model.safetensors, vocab.txt,
                    tokenizer.json): the fixtures' 99-word vocabulary, hidden 32, 2 layers,
                    every dropout probability 0
  train.json        40 labelled sentences, [{"text", "label"}]
  trajectory.json   the settings and the loss of each of the 20 steps (before that step's update)

The run: the examples in order (no shuffle), batches of 4 tokenized by the fast tokenizer and
each padded to its longest ([CLS] text [SEP], attention_mask), two epochs; cross entropy of the
head, mean over the batch; torch.optim.AdamW(lr 1e-3, betas (0.9, 0.999), eps 1e-8) with
Sesame's weight-decay grouping — tensors of two or more dimensions (matrices, embedding tables)
decay by 0.01, the others (biases, LayerNorm gains) not — a constant learning rate without
warmup, the global gradient norm clipped to 1.0 (transformers' Trainer's max_grad_norm).

Float32, CPU, eager attention.
Made with: torch 2.15.0, transformers 5.23.0 (requirements.txt beside this).
Run from the repository root:  python tests/reference/make_fine_tune_fixtures.py
"""

import json
import os

import torch
import transformers

from common import WORDS, randomize, write_bert_vocab

OUT = os.path.join("tests", "fixtures", "fine-tune", "bert-classify")
EXAMPLES, BATCH, EPOCHS = 40, 4, 2
SETTINGS = {"epochs": EPOCHS, "batch_size": BATCH, "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
            "weight_decay": 0.01, "clip_grad_norm": 1.0, "schedule": "constant", "warmup": 0}
LABELS = ["negative", "positive"]
# Sentences with one of these words are positive: a rule the head can learn.
POSITIVE = {"happy", "warm", "sun", "sang", "played", "light", "song", "green"}


def examples(g):
    """EXAMPLES sentences of 3 to 9 words drawn from the vocabulary, labelled by POSITIVE."""
    words = [w for w in WORDS if w.isalpha()]
    out = []
    for i in range(EXAMPLES):
        n = int(torch.randint(3, 10, (1,), generator=g))
        picked = [words[int(j)] for j in torch.randint(0, len(words), (n,), generator=g)]
        if i % 2 == 0:  # half of them positive
            picked[int(torch.randint(0, n, (1,), generator=g))] = sorted(POSITIVE)[i // 2 % len(POSITIVE)]
        else:
            picked = [w for w in picked if w not in POSITIVE] or ["cold"]
        out.append({"text": " ".join(picked), "label": LABELS[int(any(w in POSITIVE for w in picked))]})
    return out


def main():
    torch.manual_seed(0)
    init_dir = os.path.join(OUT, "init")
    os.makedirs(init_dir, exist_ok=True)
    config = transformers.BertConfig(
        vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=40, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_labels=2, id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)}, pad_token_id=0,
        attn_implementation="eager")
    model = transformers.BertForSequenceClassification(config)
    randomize(model, seed=11, weight_std=0.1)
    model.save_pretrained(init_dir, safe_serialization=True)
    write_bert_vocab(init_dir)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(init_dir)

    data = examples(torch.Generator().manual_seed(5))
    with open(os.path.join(OUT, "train.json"), "w") as f:
        json.dump(data, f, indent=1)

    s = SETTINGS
    params = dict(model.named_parameters())
    decay = [n for n, p in params.items() if p.dim() >= 2]
    no_decay = [n for n, p in params.items() if p.dim() < 2]
    groups = [{"params": [params[n] for n in decay], "weight_decay": s["weight_decay"]},
              {"params": [params[n] for n in no_decay], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=s["lr"], betas=(s["beta1"], s["beta2"]), eps=s["eps"], foreach=False)
    model.train()
    losses = []
    for epoch in range(EPOCHS):
        for start in range(0, EXAMPLES, BATCH):
            rows = data[start:start + BATCH]
            batch = tokenizer([r["text"] for r in rows], padding="longest", return_tensors="pt")
            labels = torch.tensor([LABELS.index(r["label"]) for r in rows])
            optimizer.zero_grad(set_to_none=True)
            loss = model(**batch, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), s["clip_grad_norm"])
            optimizer.step()
            losses.append(loss.item())
    with open(os.path.join(OUT, "trajectory.json"), "w") as f:
        json.dump({"settings": s, "losses": losses}, f, indent=1)
    print(f"{len(losses)} steps: loss {losses[0]:.4f} → {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
