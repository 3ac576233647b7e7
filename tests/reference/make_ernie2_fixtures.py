"""Writes the ERNIE 2.0 continual multi-task pretraining fixture tests/fixtures/train/ernie2/:
ERNIE 2.0's framework (Sun et al. 2020, "ERNIE 2.0: A Continual Pre-training Framework for
Language Understanding", §3-4): one shared ERNIE encoder with task embeddings, a head per
pretraining task, each task's batches reading its task id in task_type_ids, tasks added in
stages and trained beside the earlier ones.

The encoder: 2 layers, 32 wide, 4 heads, a 64-wide feed-forward, 48 positions, 4 task types
(use_task_id), dropout 0.2 with Sesame's masks (make_train_fixtures.py's), the pooler kept.
The tasks, in tasks.json's order (the index is the task id):
  mlm       ErnieForMaskedLM: knowledge-masked LM; the decoder is the shared word embeddings
            (tied), its bias cls.predictions.bias; loss: cross entropy over labels != -100.
  caps      ErnieForTokenClassification, 2 labels: capitalization prediction.
  order     ErnieForSequenceClassification, 9 labels: sentence reordering (1-3 segments).
  distance  ErnieForSequenceClassification, 3 labels: sentence distance, on sentence pairs.
The transformers models share one ErnieModel (the pooler-less ones of the masked LM and the
token classifier are replaced), and the masked LM's decoder is re-tied to the shared word
embeddings, so a step's gradient reaches the encoder and its task's head only.

The layout is make_multitask_fixtures.py's (config.json, tasks.json with each task's
"task_type_id", model.safetensors with heads under "tasks.<name>."). batches.safetensors:
task_order [20], the stage schedule — stage 1 (steps 0-5) mlm alone, stage 2 (6-11) mlm and
caps, stage 3 (12-19) all four, each stage in rounds of a shuffled order of its tasks — and
each task's batches "<task>.<input>": mlm.{input_ids, token_type_ids, attention_mask, labels}
(make_train_fixtures.py's bert_batches without next_sentence_label), caps.* (its
token_classify_batches, labels mod 2), order.* (classify_batches with labels 0-8) and
distance.* (bert_batches' pairs with labels 0-2). No batch holds task_type_ids: Sesame fills
them from tasks.json, as PyTorch's run passes them here. Training: make_multitask_fixtures.py's train, 20
AdamW steps over every parameter every step (a head whose task sat out takes a zero-gradient
step). grads.safetensors: step 0's gradient (an mlm step); trajectory.json the 20 losses.

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_ernie2_fixtures.py
"""

import json
import os

import torch
import transformers
from safetensors.torch import save_file

from common import randomize, write_bert_vocab
from make_multitask_fixtures import train
from make_train_fixtures import DROPOUT_P, DROPOUT_SEED, OUT, VOCAB, SesameDropout, bert_batches, classify_batches, token_classify_batches

# name, objective, class, labels
TASKS = [("mlm", "mlm", "ErnieForMaskedLM", 2),
         ("caps", "token-classify", "ErnieForTokenClassification", 2),
         ("order", "classify", "ErnieForSequenceClassification", 9),
         ("distance", "classify", "ErnieForSequenceClassification", 3)]
# The steps of each stage and the tasks it trains (indices into TASKS).
STAGES = [(6, [0]), (6, [0, 1]), (8, [0, 1, 2, 3])]
STEPS = sum(steps for steps, _ in STAGES)


def task_config(architecture, num_labels):
    config = transformers.ErnieConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=48, type_vocab_size=2, use_task_id=True, task_type_vocab_size=4, hidden_act="gelu",
        hidden_dropout_prob=DROPOUT_P, attention_probs_dropout_prob=DROPOUT_P, architectures=[architecture],
        num_labels=num_labels, pad_token_id=0)
    config._attn_implementation = "eager"
    return config


class ContinualMultiTask(torch.nn.Module):
    """The shared encoder and the tasks' heads, named as Sesame's multi-task checkpoint names
    them; `models[name]` is the task's transformers model over the shared encoder."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.models = {name: getattr(transformers, architecture)(task_config(architecture, labels))
                       for name, _, architecture, labels in TASKS}
        self.ernie = self.models["order"].ernie  # with the pooler
        for model in self.models.values():
            model.ernie = self.ernie
        mlm = self.models["mlm"]
        mlm.cls.predictions.decoder.weight = self.ernie.embeddings.word_embeddings.weight
        heads = {"mlm": {"cls": mlm.cls}}
        heads.update({name: {"classifier": self.models[name].classifier} for name, *_ in TASKS[1:]})
        self.tasks = torch.nn.ModuleDict({name: torch.nn.ModuleDict(head) for name, head in heads.items()})
        randomize(self, seed=1, bias_std=0.02, weight_std=None)


def save(model, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    encoder = task_config("ErnieModel", 2).to_dict()
    for key in ("id2label", "label2id"):
        encoder.pop(key, None)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(encoder, f, indent=1)
    tasks = [{"name": name, "objective": objective, "config": model.models[name].config.to_dict(), "task_type_id": i}
             for i, (name, objective, *_) in enumerate(TASKS)]
    with open(os.path.join(out_dir, "tasks.json"), "w") as f:
        json.dump(tasks, f, indent=1)
    save_file({n: p.detach().contiguous() for n, p in model.named_parameters()}, os.path.join(out_dir, "model.safetensors"))
    write_bert_vocab(out_dir)


def batches():
    g = torch.Generator().manual_seed(5)
    order = []
    for steps, tasks in STAGES:
        while steps > 0:
            round_ = [tasks[i] for i in torch.randperm(len(tasks), generator=g).tolist()][:steps]
            order += round_
            steps -= len(round_)
    order = torch.tensor(order, dtype=torch.long)
    counts = [int((order == i).sum()) for i in range(len(TASKS))]
    mlm = {k: v for k, v in bert_batches(2).items() if k != "next_sentence_label"}
    caps = token_classify_batches(3)
    caps["labels"] = torch.where(caps["labels"] == -100, caps["labels"], caps["labels"] % 2)
    reorder = classify_batches(4)
    reorder["labels"] = torch.randint(0, 9, reorder["labels"].shape, generator=g)
    pairs = bert_batches(6)
    distance = {"input_ids": pairs["input_ids"], "token_type_ids": pairs["token_type_ids"], "attention_mask": pairs["attention_mask"],
                "labels": torch.randint(0, 3, pairs["next_sentence_label"].shape, generator=g)}
    made = {"task_order": order}
    for (name, *_), data, steps in zip(TASKS, [mlm, caps, reorder, distance], counts):
        made.update({f"{name}.{k}": v[:steps].contiguous() for k, v in data.items()})
    return made


def main():
    torch.use_deterministic_algorithms(True)
    torch.nn.functional.dropout = SesameDropout(DROPOUT_SEED)
    model = ContinualMultiTask()
    out_dir = os.path.join(OUT, "ernie2")
    save(model, os.path.join(out_dir, "init"))
    data = batches()
    save_file(data, os.path.join(out_dir, "batches.safetensors"))
    train(model, [name for name, *_ in TASKS], data, out_dir, task_ids=True)
    save(model, os.path.join(out_dir, "final"))


if __name__ == "__main__":
    main()
