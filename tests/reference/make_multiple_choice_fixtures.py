"""Writes the multiple-choice fixture tests/fixtures/train/bert-multiple-choice/:
transformers' BertForMultipleChoice (the head SWAG fine-tunes, Devlin et al. 2019 §4.4) trained
20 steps as make_train_fixtures.py trains its other runs.

The model: make_train_fixtures.py's bert-classify sizes (2 layers, 32 wide, 4 heads, a 64-wide
feed-forward, 48 positions, dropout 0.2 with Sesame's masks, the pooler kept) with
BertForMultipleChoice's head: each choice's sequence through the encoder and pooler, dropout,
then classifier Linear(32, 1): one score per choice, the scores of an example's choices its
logits [batch, choices]; loss: cross entropy with the right choice, mean over the examples.

batches.safetensors: make_train_fixtures.py's classify_batches(seed 2) rows regrouped as 2
examples of 2 choices: input_ids, token_type_ids, attention_mask [20, 2, 2, 16] (each
example's choices consecutive rows) and labels [20, 2], the right choice, 0 or 1 at random.

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_multiple_choice_fixtures.py
"""

import torch
import transformers

from common import randomize, write_bert_vocab
from make_train_fixtures import DROPOUT_P, DROPOUT_SEED, STEPS, VOCAB, SesameDropout, classify_batches, write_run

FAMILY = "bert-multiple-choice"
CHOICES = 2


def build():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=48, type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=DROPOUT_P,
        attention_probs_dropout_prob=DROPOUT_P, architectures=["BertForMultipleChoice"])
    config._attn_implementation = "eager"
    model = transformers.BertForMultipleChoice(config)
    randomize(model, seed=1, bias_std=0.02, weight_std=None)
    return model


def batches():
    rows = classify_batches(seed=2)
    steps, batch, seq = rows["input_ids"].shape
    made = {k: rows[k].reshape(steps, batch // CHOICES, CHOICES, seq) for k in ("input_ids", "token_type_ids", "attention_mask")}
    made["labels"] = torch.randint(0, CHOICES, (STEPS, batch // CHOICES), generator=torch.Generator().manual_seed(3))
    return made


def check_loss(family, model, batch, loss):
    """The loss recomputed from the logits [batch, choices]."""
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        expected = torch.nn.functional.cross_entropy(logits, batch["labels"])
    assert torch.allclose(expected, loss, rtol=1e-6, atol=1e-6), (family, expected.item(), loss.item())


def main():
    torch.use_deterministic_algorithms(True)
    dropout = SesameDropout(DROPOUT_SEED)
    torch.nn.functional.dropout = dropout
    write_run(FAMILY, build(), write_bert_vocab, batches(), dropout, check=check_loss)


if __name__ == "__main__":
    main()
