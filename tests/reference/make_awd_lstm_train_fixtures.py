"""Writes tests/fixtures/train/awd-lstm/: 20 AdamW steps of a tiny AWD-LSTM language model
trained by fastai itself (fastai 2.7.18's `get_language_model(AWD_LSTM, …)`, the reference
implementation of ULMFiT's language model), in the layout of make_train_fixtures.py:

  init/        config.json, model.safetensors (fastai's parameter names, as `sesame
               convert-ulmfit` writes them: without the embedding dropout's and the tied
               decoder's copies of the table), tokenizer.json
  batches.safetensors
               input_ids, attention_mask, labels [20, 4, 16]: Zipf-distributed words; row 3
               of every step right-padded over its last 4 positions with xxpad (labels -100)
  grads.safetensors
               the step-0 gradient of every parameter (named_parameters() names)
  trajectory.json, final/
               the optimizer's settings, each step's loss, lr and gradient norm; the weights
               after the 20 steps

Model: vocabulary 30 (fastai's special tokens and 21 words), emb_sz 8, n_hid 12, 3 layers,
tied decoder with a bias, every dropout 0.2: embed_p (whole words out of the table), input_p,
hidden_p and output_p (RNNDropout: one mask per sequence and feature), weight_p (WeightDropout
on weight_hh_l0_raw). fastai draws its masks from torch's generator; here its `dropout_mask`
and torch.nn.functional.dropout are replaced by Sesame's counter-based masks
(common.SesameMasks: the n-th mask drawn in a forward is site n; a mask of shape sz is hashed
at its row-major indices), so both sides drop the same entries. The LSTM state is reset
before every batch (Sesame's language model starts each batch from zero state). Loss:
position t predicting labels[t + 1], mean over labels != -100
(make_train_fixtures.causal_lm_loss). Weights are redrawn wider than fastai's init (std 0.4)
so the gradients are not near zero.

Made with fastai 2.7.18 (installed with --no-deps beside torch 2.15.0; see
make_awd_lstm_fastai_fixtures.py), tokenizers 0.23.3.
Run from the repository root:  python tests/reference/make_awd_lstm_train_fixtures.py
"""

import json
import os
import warnings

import torch
from safetensors.torch import save_file

warnings.filterwarnings("ignore")
import fastai.text.models.awdlstm as awdlstm  # noqa: E402
from fastai.text.all import AWD_LSTM, get_language_model  # noqa: E402
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors  # noqa: E402

from common import SesameMasks  # noqa: E402
from make_awd_lstm_fastai_fixtures import ENCODER, PAD, widen  # noqa: E402
from make_awd_lstm_fixtures import SPECIAL, VOCAB  # noqa: E402
from make_train_fixtures import BATCH, DROPOUT_SEED, OPTIMIZER, SEQ, STEPS, learning_rate  # noqa: E402

OUT = os.path.join("tests", "fixtures", "train", "awd-lstm")
P = 0.2
CONFIG = dict(ENCODER, embed_p=P, input_p=P, weight_p=P, hidden_p=P, output_p=P, tie_weights=True, out_bias=True)


def batches(seed):
    """Zipf-distributed words (ids 9..29: never a special token); row 3 padded over its last
    4 positions."""
    g = torch.Generator().manual_seed(seed)
    words = len(VOCAB) - len(SPECIAL)
    ranking = torch.randperm(words, generator=torch.Generator().manual_seed(3))
    probs = 1.0 / torch.arange(1, words + 1, dtype=torch.float64)
    draws = torch.multinomial(probs, STEPS * BATCH * SEQ, replacement=True, generator=g)
    input_ids = (len(SPECIAL) + ranking[draws]).reshape(STEPS, BATCH, SEQ)
    attention_mask = torch.ones(STEPS, BATCH, SEQ, dtype=torch.long)
    attention_mask[:, 3, SEQ - 4:] = 0
    input_ids[attention_mask == 0] = PAD
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def lm_loss(model, batch):
    model[0].reset()
    logits = model(batch["input_ids"])[0]
    targets = batch["labels"][:, 1:]
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, len(VOCAB)), targets.reshape(-1), ignore_index=-100)


def save_folder(model, path):
    """config.json and model.safetensors as `sesame convert-ulmfit` writes them."""
    os.makedirs(path, exist_ok=True)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if k not in ("0.encoder_dp.emb.weight", "1.decoder.weight")}
    save_file(state, os.path.join(path, "model.safetensors"))
    config = {"model_type": "awd_lstm", "architectures": ["AwdLstmForLanguageModeling"], "vocab_size": len(VOCAB),
              **{k: v for k, v in CONFIG.items() if k != "bidir"}}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


def write_tokenizer(path):
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="xxunk"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="xxbos $A", pair="xxbos $A $B:1", special_tokens=[("xxbos", 2)])
    tok.add_special_tokens(SPECIAL)
    tok.save(os.path.join(path, "tokenizer.json"))


def main():
    torch.use_deterministic_algorithms(True)
    masks = SesameMasks(DROPOUT_SEED)
    awdlstm.dropout_mask = masks.dropout_mask
    torch.nn.functional.dropout = masks.dropout
    torch.manual_seed(0)
    model = get_language_model(AWD_LSTM, len(VOCAB), config=dict(CONFIG))
    widen(model, 3)
    save_folder(model, os.path.join(OUT, "init"))
    write_tokenizer(os.path.join(OUT, "init"))
    data = batches(seed=4)
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(OUT, "batches.safetensors"))

    opt = OPTIMIZER
    params = dict(model.named_parameters())
    decay = [n for n, p in params.items() if p.dim() >= 2]
    no_decay = [n for n, p in params.items() if p.dim() < 2]
    groups = [{"params": [params[n] for n in decay], "weight_decay": opt["weight_decay"]},
              {"params": [params[n] for n in no_decay], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    model.train()
    steps = []
    for s in range(opt["steps"]):
        lr = learning_rate(s, opt["lr"], opt["warmup"], opt["steps"], opt["schedule"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = {k: v[s] for k, v in data.items()}
        optimizer.zero_grad(set_to_none=True)
        masks.begin(batch_index=s)
        loss = lm_loss(model, batch)
        # embed, input, then weight and hidden drops per layer (no hidden after the last), output.
        assert masks.site == 2 * CONFIG["n_layers"] + 2, masks.site
        loss.backward()
        if s == 0:
            save_file({n: p.grad.detach().clone().contiguous() for n, p in params.items()}, os.path.join(OUT, "grads.safetensors"))
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip_grad_norm"])
        optimizer.step()
        steps.append({"step": s, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()})
        print(f"  step {s:2d}  loss {loss.item():.6f}  lr {lr:.6g}  grad_norm {grad_norm.item():.6f}")
    with open(os.path.join(OUT, "trajectory.json"), "w") as f:
        json.dump({"optimizer": opt, "dropout_seed": DROPOUT_SEED, "param_groups": {"decay": decay, "no_decay": no_decay}, "steps": steps}, f, indent=1)
    save_folder(model, os.path.join(OUT, "final"))


if __name__ == "__main__":
    main()
