"""Writes the knowledge-distillation fixtures under tests/fixtures/train/{distil-bert-mlm,
distil-gpt2-clm,distil-bert-classify,distil-bert-mlm-masked}/, in the layout make_train_fixtures.py documents (init/ — the student —,
batches.safetensors, grads.safetensors, trajectory.json, final/) plus teacher/, the teacher's
model folder, and trajectory.json's "distillation": the temperature and the three weights.

The loss is DistilBERT's distiller's (Sanh et al. 2019; transformers' research project
examples/research_projects/distillation/distiller.py, with restrict_ce_to_mask off), written
here from its definition:

  rows      every position whose attention_mask is 1
  soft      KLDivLoss(reduction="batchmean")(log_softmax(s / T), softmax(t / T)) * T**2 over
            those rows: the sum over rows of KL(teacher_T || student_T), divided by the rows
            With restrict_ce_to_mask on (distil-bert-mlm-masked), the rows whose label is
            not -100 instead: the masked positions.
            For a sequence classifier (task-specific distillation) s and t are the class
            logits, one row per sequence, and batchmean divides by the sequences.
  hard      the student's own loss against the batch's labels: masked LM (cross entropy
            over the labels != -100) for the encoder, causal LM (logits[:, :-1] predicting
            labels[:, 1:]) for GPT-2, cross entropy over the sequences for the classifier
  cos       CosineEmbeddingLoss(reduction="mean")(s_h, t_h, 1) over those rows: the mean of
            1 - cos between the student's and the teacher's last hidden states
            (hidden_states[-1]: BERT's last layer output, GPT-2's after ln_f)
  loss      ALPHA_SOFT * soft + ALPHA_HARD * hard + ALPHA_COS * cos

The teacher runs in eval mode under no_grad, before the student, and its dropout calls are
not counted (the student draws Sesame's masks from site 0, as Sesame's student does).
The student is the teacher's config with half the layers, its layer i the teacher's layer 2i,
everything else (embeddings, heads, final LayerNorm) copied — what `sesame distill
--student-layers` makes.

  distil-bert-mlm   teacher BertForMaskedLM: 4 layers, 32 wide, 4 heads, a 64-wide
                    feed-forward, 48 positions; weights N(0, 0.1) (so the teacher's
                    distributions are far from uniform), LayerNorm gains and biases nudged as
                    make_train_fixtures.py does. Student: 2 layers (teacher layers 0 and 2), every
                    dropout probability 0.2 with Sesame's masks. Batches: make_family_train_
                    fixtures.py's distilbert-mlm ones ([CLS] words [SEP], one row per step right-
                    padded, about 15% of the words predicted).
  distil-gpt2-clm   teacher GPT2LMHeadModel: 4 layers, 32 wide, 4 heads, a 64-wide feed-forward,
                    48 positions, weights N(0, 0.1); student 2 layers (teacher layers 0 and 2),
                    dropout 0.2. Batches: make_train_fixtures.py's gpt2 ones (row 3 right-padded).

  distil-bert-mlm-masked
                    distil-bert-mlm's teacher, student and batches, the soft loss restricted
                    to the masked positions (`sesame distill --restrict-to-mask`).
  distil-bert-classify
                    teacher BertForSequenceClassification with 3 labels, distil-bert-mlm's
                    sizes and weights (the pooler and classifier as well); student 2 layers, its
                    classifier's dropout hidden_dropout_prob (0.2). Batches: make_family_train_
                    fixtures.py's electra-classify ones ([CLS] words [SEP], one row per step
                    right-padded, labels 0 to 2).

All: T = 2, ALPHA_SOFT 5, ALPHA_HARD 2, ALPHA_COS 1 (DistilBERT's), 20 AdamW steps with
make_train_fixtures.py's OPTIMIZER; float32, CPU, eager attention.

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_distill_fixtures.py
"""

import json
import os
import re
from types import SimpleNamespace

import torch
import transformers

from common import randomize, write_bert_vocab, write_gpt_tokenizer
from make_family_train_fixtures import bert_classify_batches, distilbert_batches
from make_train_fixtures import DROPOUT_P, DROPOUT_SEED, OUT, VOCAB, SesameDropout, gpt_batches, write_run

TEMPERATURE, ALPHA_SOFT, ALPHA_HARD, ALPHA_COS = 2.0, 5.0, 2.0, 1.0
TEACHER_LAYERS, STUDENT_LAYERS = 4, 2


def teacher_config(family, dropout):
    if family == "distil-bert-mlm-masked":
        return teacher_config("distil-bert-mlm", dropout)
    if family == "distil-bert-classify":
        config = teacher_config("distil-bert-mlm", dropout)
        config.architectures, config.num_labels = ["BertForSequenceClassification"], 3
        return config
    if family == "distil-bert-mlm":
        return transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=TEACHER_LAYERS, num_attention_heads=4,
                                       intermediate_size=64, max_position_embeddings=48, hidden_dropout_prob=dropout,
                                       attention_probs_dropout_prob=dropout, architectures=["BertForMaskedLM"])
    return transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=TEACHER_LAYERS, n_head=4, n_inner=64, n_positions=48,
                                   activation_function="gelu_new", resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                                   bos_token_id=None, eos_token_id=None, architectures=["GPT2LMHeadModel"])


def build(config):
    config._attn_implementation = "eager"
    return getattr(transformers, config.architectures[0])(config)


def student_state(teacher):
    """The teacher's tensors with layer 2i renamed layer i and the odd layers dropped."""
    state = {}
    for name, tensor in teacher.state_dict().items():
        match = re.search(r"\.(layer|h)\.(\d+)\.", name)
        if match is None:
            state[name] = tensor.clone()
        elif int(match.group(2)) % 2 == 0:
            renamed = name[:match.start(2)] + str(int(match.group(2)) // 2) + name[match.end(2):]
            state[renamed] = tensor.clone()
    return state


class Distiller(torch.nn.Module):
    """The student (the only module trained; parameters and checkpoints are its) and the
    teacher it learns from, which is kept out of the module tree so it stays in eval mode."""

    def __init__(self, student, teacher, dropout, family):
        super().__init__()
        self.student = student
        object.__setattr__(self, "teacher", teacher)
        self.dropout, self.family = dropout, family

    def named_parameters(self, *args, **kwargs):
        return self.student.named_parameters(*args, **kwargs)

    def parameters(self, *args, **kwargs):
        return self.student.parameters(*args, **kwargs)

    def save_pretrained(self, *args, **kwargs):
        return self.student.save_pretrained(*args, **kwargs)

    def outputs(self, batch):
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        site = self.dropout.site
        with torch.no_grad():
            t = self.teacher(**inputs, output_hidden_states=True)
        self.dropout.site = site
        s = self.student(**inputs, output_hidden_states=True)
        return s, t

    def forward(self, **batch):
        s, t = self.outputs(batch)
        rows = batch["attention_mask"].bool()
        per_sequence = self.family == "distil-bert-classify"
        if self.family.endswith("-masked"):
            soft_rows = batch["labels"] != -100
            s_logits, t_logits = s.logits[soft_rows], t.logits[soft_rows]
        else:
            s_logits, t_logits = (s.logits, t.logits) if per_sequence else (s.logits[rows], t.logits[rows])
        soft = torch.nn.KLDivLoss(reduction="batchmean")(
            torch.log_softmax(s_logits / TEMPERATURE, -1), torch.softmax(t_logits / TEMPERATURE, -1)) * TEMPERATURE ** 2
        labels = batch["labels"]
        if per_sequence:
            hard = torch.nn.functional.cross_entropy(s.logits, labels)
        elif self.family.startswith("distil-bert-mlm"):
            hard = torch.nn.functional.cross_entropy(s.logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
        else:
            hard = torch.nn.functional.cross_entropy(s.logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
        s_h, t_h = s.hidden_states[-1][rows], t.hidden_states[-1][rows]
        cos = torch.nn.CosineEmbeddingLoss(reduction="mean")(s_h, t_h, torch.ones(s_h.shape[0]))
        return SimpleNamespace(loss=ALPHA_SOFT * soft + ALPHA_HARD * hard + ALPHA_COS * cos)


def check_loss(family, model, batch, loss):
    """The loss recomputed from the definitions in the docstring, in float64 sums."""
    with torch.no_grad():
        s, t = model.outputs(batch)
        rows = batch["attention_mask"].bool()
        per_sequence = family == "distil-bert-classify"
        soft_rows = batch["labels"] != -100 if family.endswith("-masked") else rows
        s_logits, t_logits = (s.logits, t.logits) if per_sequence else (s.logits[soft_rows], t.logits[soft_rows])
        log_q = torch.log_softmax(s_logits.double() / TEMPERATURE, -1)
        log_p = torch.log_softmax(t_logits.double() / TEMPERATURE, -1)
        soft = (log_p.exp() * (log_p - log_q)).sum() / s_logits.shape[0] * TEMPERATURE ** 2
        labels = batch["labels"]
        logits = s.logits[:, :-1] if family == "distil-gpt2-clm" else s.logits
        targets = labels[:, 1:] if family == "distil-gpt2-clm" else labels
        scored = targets != -100
        log_probs = torch.log_softmax(logits[scored].double(), -1)
        hard = -log_probs.gather(1, targets[scored].unsqueeze(1)).mean()
        s_h, t_h = s.hidden_states[-1][rows].double(), t.hidden_states[-1][rows].double()
        cos = 1 - (s_h * t_h).sum(-1) / ((s_h.square().sum(-1) + 1e-12) * (t_h.square().sum(-1) + 1e-12)).sqrt()
        expected = ALPHA_SOFT * soft + ALPHA_HARD * hard + ALPHA_COS * cos.mean()
    assert abs(expected.item() - loss.item()) <= 1e-5 * abs(expected.item()), (family, expected.item(), loss.item())


def main():
    torch.use_deterministic_algorithms(True)
    dropout = SesameDropout(DROPOUT_SEED)
    torch.nn.functional.dropout = dropout
    for family, make_batches, write_tokenizer in [("distil-bert-mlm", distilbert_batches, write_bert_vocab),
                                                  ("distil-gpt2-clm", gpt_batches, write_gpt_tokenizer),
                                                  ("distil-bert-classify", bert_classify_batches, write_bert_vocab),
                                                  ("distil-bert-mlm-masked", distilbert_batches, write_bert_vocab)]:
        torch.manual_seed(0)
        teacher = build(teacher_config(family, 0.0))
        randomize(teacher, seed=1, bias_std=0.02, weight_std=0.1)
        teacher.eval()
        config = teacher_config(family, DROPOUT_P)
        setattr(config, "n_layer" if family == "distil-gpt2-clm" else "num_hidden_layers", STUDENT_LAYERS)
        student = build(config)
        student.load_state_dict(student_state(teacher), strict=True)
        teacher_dir = os.path.join(OUT, family, "teacher")
        teacher.save_pretrained(teacher_dir, safe_serialization=True)
        write_tokenizer(teacher_dir)
        write_run(family, Distiller(student, teacher, dropout, family), write_tokenizer, make_batches(seed=2), dropout, check=check_loss)
        path = os.path.join(OUT, family, "trajectory.json")
        with open(path) as f:
            trajectory = json.load(f)
        trajectory["distillation"] = {"temperature": TEMPERATURE, "alpha_soft": ALPHA_SOFT, "alpha_hard": ALPHA_HARD, "alpha_cos": ALPHA_COS}
        with open(path, "w") as f:
            json.dump(trajectory, f, indent=1)


if __name__ == "__main__":
    main()
