"""Writes tests/fixtures/train/ulmfit-classifier/: ULMFiT's classifier fine-tuning (Howard &
Ruder 2018, §3.3) of a tiny AWD-LSTM classifier built by fastai 2.7.18 itself
(`get_text_classifier(AWD_LSTM, 30, 3, seq_len=72, lin_ftrs=[10], ps=[0.2])`), in the layout
of make_train_fixtures.py:

  init/        config.json and model.safetensors as `sesame convert-ulmfit` writes a
               classifier (fastai's names; BatchNorm's num_batches_tracked dropped)
  batches.safetensors
               input_ids, attention_mask [20, 4, 16]: Zipf-distributed words, one row per step
               right-padded with 1 to 6 xxpad; labels [20, 4], 0 to 2
  grads.safetensors
               the gradient of every parameter at the initial weights on batch 0 (all of them
               trainable: the whole backward, before the recipe freezes anything)
  trajectory.json, final/
               20 steps of the recipe — discriminative rates (each of fastai's five layer
               groups, embeddings / LSTM 0 / 1 / 2 / head, learns at the rate of the group
               above / 2.6), gradual unfreezing (the head alone, then every 4 steps the next
               group below joins: requires_grad off before), slanted triangular rates (cut 2,
               lr 5e-3, ratio 32), AdamW (weight decay on matrices), clipping at 1.0 — each
               step's loss, base lr and gradient norm; the weights and running statistics after

Every dropout at 0.2 (embed_p, input_p, weight_p, hidden_p, output_p — the first head block's —
and ps), drawn as Sesame's masks (common.SesameMasks): sites 0 … 6 the
encoder's, 7 and 8 the head blocks'. BatchNorm in training mode (batch statistics; running
ones updated, momentum 0.1). fastai reads each text in chunks of seq_len = 72 tokens, longer
than these texts, so one chunk, from zero state.

Made with fastai 2.7.18 (see make_awd_lstm_fastai_fixtures.py).
Run from the repository root:  python tests/reference/make_ulmfit_classifier_fixtures.py
"""

import json
import os
import warnings

import torch
from safetensors.torch import save_file

warnings.filterwarnings("ignore")
import fastai.text.models.awdlstm as awdlstm  # noqa: E402
from fastai.text.all import AWD_LSTM, get_text_classifier  # noqa: E402

from make_awd_lstm_fastai_fixtures import ENCODER, PAD, widen  # noqa: E402
from make_awd_lstm_fixtures import SPECIAL, VOCAB  # noqa: E402
from common import SesameMasks  # noqa: E402
from make_train_fixtures import BATCH, DROPOUT_SEED, OPTIMIZER, SEQ, STEPS  # noqa: E402

OUT = os.path.join("tests", "fixtures", "train", "ulmfit-classifier")
P = 0.2
CLASSES = 3
CONFIG = dict(ENCODER, embed_p=P, input_p=P, weight_p=P, hidden_p=P, output_p=P)
RECIPE = dict(OPTIMIZER, lr=5e-3, warmup=2, schedule="slanted-triangular", min_lr=5e-3 / 32,
              discriminative_lr=2.6, unfreeze_every=4)


def stlr(step, o):
    """Howard & Ruder's eq. 3: rise from min_lr to lr over `warmup` (cut) steps, then fall back."""
    cut, total = o["warmup"], o["steps"]
    p = step / cut if step < cut else 1.0 - (step - cut) / (total - cut)
    return o["min_lr"] + (o["lr"] - o["min_lr"]) * p


def groups_of(model):
    """fastai's awd_lstm_clas_split: embeddings, each LSTM layer, the head (bottom to top)."""
    encoder = model[0].module
    return [list(encoder.encoder.parameters()), *[list(r.parameters()) for r in encoder.rnns], list(model[1].parameters())]


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    words = len(VOCAB) - len(SPECIAL)
    shape = (STEPS, BATCH, SEQ)
    input_ids = torch.full(shape, PAD, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    for s in range(STEPS):
        padded_row = torch.randint(0, BATCH, (), generator=g).item()
        for b in range(BATCH):
            n = SEQ - (torch.randint(1, 7, (), generator=g).item() if b == padded_row else 0)
            input_ids[s, b, :n] = len(SPECIAL) + torch.randint(0, words, (n,), generator=g)
            attention_mask[s, b, :n] = 1
    labels = torch.randint(0, CLASSES, (STEPS, BATCH), generator=g)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def loss_of(model, batch):
    logits = model(batch["input_ids"])[0]
    return torch.nn.functional.cross_entropy(logits, batch["labels"])


def save_folder(model, path):
    os.makedirs(path, exist_ok=True)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if not k.endswith("num_batches_tracked") and k != "0.module.encoder_dp.emb.weight"}
    save_file(state, os.path.join(path, "model.safetensors"))
    config = {"model_type": "awd_lstm", "architectures": ["AwdLstmForSequenceClassification"], "vocab_size": len(VOCAB),
              **{k: v for k, v in CONFIG.items() if k != "bidir"}, "pad_token_id": PAD, "lin_ftrs": [10], "ps": [P],
              "bptt": 72, "max_len": 72 * 20, "id2label": {str(i): f"LABEL_{i}" for i in range(CLASSES)}}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


def main():
    torch.use_deterministic_algorithms(True)
    masks = SesameMasks(DROPOUT_SEED)
    awdlstm.dropout_mask = masks.dropout_mask
    torch.nn.functional.dropout = masks.dropout
    torch.manual_seed(0)
    model = get_text_classifier(AWD_LSTM, len(VOCAB), CLASSES, seq_len=72, config=dict(CONFIG), lin_ftrs=[10], ps=[P])
    widen(model, 5)
    save_folder(model, os.path.join(OUT, "init"))
    data = batches(seed=6)
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(OUT, "batches.safetensors"))
    model.train()
    params = dict(model.named_parameters())

    # The whole backward at the initial weights (batch 0's masks), every parameter trainable.
    # BatchNorm's running statistics move in this forward: put them back for the run.
    running = {k: v.clone() for k, v in model.state_dict().items() if "running_" in k}
    masks.begin(batch_index=0)
    loss_of(model, {k: v[0] for k, v in data.items()}).backward()
    assert masks.site == 2 * CONFIG["n_layers"] + 1 + 2, masks.site
    save_file({n: p.grad.detach().clone().contiguous() for n, p in params.items()}, os.path.join(OUT, "grads.safetensors"))
    model.load_state_dict(running, strict=False)
    for p in params.values():
        p.grad = None

    o = RECIPE
    groups = groups_of(model)
    top = len(groups) - 1
    param_groups = []
    for g, group in enumerate(groups):
        for decays in (True, False):
            members = [p for p in group if (p.dim() >= 2) == decays]
            param_groups.append({"params": members, "weight_decay": o["weight_decay"] if decays else 0.0, "depth": top - g})
    optimizer = torch.optim.AdamW(param_groups, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], foreach=False)
    steps = []
    for s in range(o["steps"]):
        lr = stlr(s, o)
        for group in optimizer.param_groups:
            group["lr"] = lr / o["discriminative_lr"] ** group["depth"]
            for p in group["params"]:
                p.requires_grad_(s >= group["depth"] * o["unfreeze_every"])
        optimizer.zero_grad(set_to_none=True)
        masks.begin(batch_index=s)
        loss = loss_of(model, {k: v[s] for k, v in data.items()})
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], o["clip_grad_norm"])
        optimizer.step()
        steps.append({"step": s, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()})
        print(f"  step {s:2d}  loss {loss.item():.6f}  lr {lr:.6g}  grad_norm {grad_norm.item():.6f}")
    with open(os.path.join(OUT, "trajectory.json"), "w") as f:
        json.dump({"optimizer": o, "dropout_seed": DROPOUT_SEED, "steps": steps}, f, indent=1)
    save_folder(model, os.path.join(OUT, "final"))


if __name__ == "__main__":
    main()
