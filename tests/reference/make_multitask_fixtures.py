"""Writes the multi-task fine-tuning fixture tests/fixtures/train/mtdnn-bert/: MT-DNN's recipe
(Liu et al. 2019, "Multi-Task Deep Neural Networks for Natural Language Understanding", §3-4):
one shared BERT encoder, one head per task, each step's batch drawn from one task in a shuffled
mixture of the tasks' batches, the step's loss that task's loss.

The model is make_train_fixtures.py's bert-classify encoder (2 layers, 32 wide, 4 heads, a
64-wide feed-forward, 48 positions, dropout 0.2 with Sesame's masks, the pooler kept) with two
tasks:
  sentiment   BertForSequenceClassification's head, 3 labels: dropout, then classifier
              Linear(32, 3) on the pooler's output; loss: cross entropy, mean over the batch.
  tags        BertForTokenClassification's head, 5 labels: dropout, then classifier
              Linear(32, 5) on every position; loss: cross entropy over the labels != -100.
The two transformers models share one BertModel (the token classifier's own, pooler-less one is
replaced), so a step's gradient reaches the encoder and its task's head only.

Sesame's multi-task folder layout, which init/ and final/ use:
  config.json        the shared encoder's config (architectures ["BertModel"])
  tasks.json         [{"name", "objective", "config"}]: each task's name, its objective
                     (classify, token-classify) and the config.json of its transformers model
                     (architecture, num_labels)
  model.safetensors  the encoder under BertModel's names with the "bert." prefix, each task's
                     head under "tasks.<name>." + its name in its own model
                     (tasks.sentiment.classifier.weight)
  vocab.txt, tokenizer files as the other BERT fixtures'

batches.safetensors: task_order [20] (the task of each step, an index into tasks.json: 12
sentiment and 8 tags steps, shuffled), and per task its batches in the order they are used,
named "<task>.<input>": sentiment.{input_ids, token_type_ids, attention_mask} [12, 4, 16] and
sentiment.labels [12, 4] (make_train_fixtures.py's classify_batches), tags.* [8, 4, 16]
(token_classify_batches). The dropout masks of step s are keyed by batch index s.

Training: make_train_fixtures.py's 20 AdamW steps (lr 1e-3, warmup 4 then cosine, weight decay
0.1 on the parameters of rank >= 2, clipping at 1.0), over every parameter every step: each
gradient starts as zeros and is zeroed (not freed) between steps, so the head whose task sat a
step out takes an AdamW step with a zero gradient (its moments decay, weight decay applies) —
as Sesame's trainer steps every parameter. grads.safetensors holds step 0's gradient of every
parameter (the other task's head's is zero); trajectory.json the 20 losses.

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_multitask_fixtures.py
"""

import json
import os

import torch
import transformers
from safetensors.torch import save_file

from common import randomize, write_bert_vocab
from make_train_fixtures import (DROPOUT_P, DROPOUT_SEED, OPTIMIZER, OUT, TOKEN_LABELS, VOCAB, SesameDropout, classify_batches,
                                 learning_rate, token_classify_batches)

TASKS = [("sentiment", "classify", "BertForSequenceClassification", 3, 12),
         ("tags", "token-classify", "BertForTokenClassification", TOKEN_LABELS, 8)]
STEPS = sum(steps for *_, steps in TASKS)


def task_config(architecture, num_labels):
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=48, type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=DROPOUT_P,
        attention_probs_dropout_prob=DROPOUT_P, architectures=[architecture], num_labels=num_labels)
    config._attn_implementation = "eager"
    return config


class MultiTask(torch.nn.Module):
    """The shared encoder and the tasks' heads, named as Sesame's multi-task checkpoint names
    them; `models[name]` is the task's transformers model over the shared encoder."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.models = {name: getattr(transformers, architecture)(task_config(architecture, labels))
                       for name, _, architecture, labels, _ in TASKS}
        first = self.models[TASKS[0][0]]
        self.bert = first.bert
        for model in self.models.values():
            model.bert = self.bert
        self.tasks = torch.nn.ModuleDict({name: torch.nn.ModuleDict({"classifier": model.classifier})
                                          for name, model in self.models.items()})
        randomize(self, seed=1, bias_std=0.02, weight_std=None)


def save(model, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    encoder = task_config("BertModel", 2).to_dict()
    for key in ("id2label", "label2id"):
        encoder.pop(key, None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(encoder, f, indent=1)
    tasks = [{"name": name, "objective": objective, "config": model.models[name].config.to_dict()}
             for name, objective, *_ in TASKS]
    with open(os.path.join(out_dir, "tasks.json"), "w") as f:
        json.dump(tasks, f, indent=1)
    save_file({n: p.detach().contiguous() for n, p in model.named_parameters()}, os.path.join(out_dir, "model.safetensors"))
    write_bert_vocab(out_dir)


def batches():
    order = torch.cat([torch.full((steps,), i, dtype=torch.long) for i, (*_, steps) in enumerate(TASKS)])
    order = order[torch.randperm(STEPS, generator=torch.Generator().manual_seed(5))]
    made = {"task_order": order}
    for (name, _, _, _, steps), make, seed in zip(TASKS, [classify_batches, token_classify_batches], [2, 3]):
        made.update({f"{name}.{k}": v[:steps].contiguous() for k, v in make(seed).items()})
    return made


def train(model, names, data, out_dir, task_ids=False):
    """The 20 AdamW steps over every parameter of `model`, step s on task data["task_order"][s]
    (an index into `names`) with that task's next batch; with `task_ids`, the task's index as
    every token's task_type_ids. Writes grads.safetensors (step 0's), trajectory.json and final/."""
    torch.use_deterministic_algorithms(True)
    dropout = SesameDropout(DROPOUT_SEED)
    torch.nn.functional.dropout = dropout
    decay = [n for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [n for n, p in model.named_parameters() if p.dim() < 2]
    params = dict(model.named_parameters())
    opt = OPTIMIZER
    optimizer = torch.optim.AdamW([{"params": [params[n] for n in decay], "weight_decay": opt["weight_decay"]},
                                   {"params": [params[n] for n in no_decay], "weight_decay": 0.0}],
                                  lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    used = [0] * len(names)
    steps = []
    total = len(data["task_order"])
    model.train()
    for s in range(total):
        lr = learning_rate(s, opt["lr"], opt["warmup"], total, opt["schedule"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        task = int(data["task_order"][s])
        name = names[task]
        batch = {k[len(name) + 1:]: v[used[task]] for k, v in data.items() if k.startswith(name + ".")}
        if task_ids:
            batch["task_type_ids"] = torch.full_like(batch["input_ids"], task)
        used[task] += 1
        optimizer.zero_grad(set_to_none=False)
        dropout.begin(batch_index=s)
        loss = model.models[name](**batch).loss
        loss.backward()
        if s == 0:
            save_file({n: p.grad.detach().clone().contiguous() for n, p in model.named_parameters()},
                      os.path.join(out_dir, "grads.safetensors"))
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip_grad_norm"])
        optimizer.step()
        steps.append({"step": s, "task": name, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()})
        print(f"  step {s:2d}  {name:9s}  loss {loss.item():.6f}  grad_norm {grad_norm.item():.6f}")
    trajectory = {"optimizer": dict(opt, steps=total), "dropout_seed": DROPOUT_SEED,
                  "param_groups": {"decay": decay, "no_decay": no_decay}, "steps": steps}
    with open(os.path.join(out_dir, "trajectory.json"), "w") as f:
        json.dump(trajectory, f, indent=1)


def main():
    torch.use_deterministic_algorithms(True)
    torch.nn.functional.dropout = SesameDropout(DROPOUT_SEED)
    model = MultiTask()
    out_dir = os.path.join(OUT, "mtdnn-bert")
    save(model, os.path.join(out_dir, "init"))
    data = batches()
    save_file(data, os.path.join(out_dir, "batches.safetensors"))
    train(model, [name for name, *_ in TASKS], data, out_dir)
    save(model, os.path.join(out_dir, "final"))


if __name__ == "__main__":
    main()
