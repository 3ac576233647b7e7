"""Writes the ELMo classification fixtures under tests/fixtures/elmo-classify/: ELMo features
with a learned scalar mix feeding a small classifier (Peters et al. 2018, section 3.3: the
biLM is frozen, only the task's scalar mix and the classifier train), on the tiny biLM of
tests/fixtures/bilm/; its loss, the gradient of every trainable parameter and a short AdamW
trajectory.

The model: elmo_reference.py's Elmo (eval mode, no dropout) gives L+1 layers per word with
the boundaries removed and 0 at padding, [B, T, 2*proj] each: layer 0 the token layer
(char CNN, highways, projection) doubled as [token, token], layers 1..L the biLSTM outputs
[forward | backward]. Each layer is mean-pooled over the sentence's words (padding out):
pooled[b, j] = sum_{t < len_b} layer_j[b, t] / len_b. Then AllenNLP's ScalarMix without
layer norm, mixed[b] = gamma * sum_j softmax(s)_j * pooled[b, j] (pooling first is the same
as mixing first, checked below), logits = mixed @ W^T + b and loss = F.cross_entropy (the
mean over the batch).

Files: options.json (a copy of tests/fixtures/bilm/options.json: two layers, proj 8, so
L+1 = 3 layers of width 16); model.safetensors (float32: every tensor of
tests/fixtures/bilm/model.safetensors but softmax.*, plus scalar_mix_0.gamma [1] = 1.3,
scalar_mix_0.scalar_parameters.0 .. .L [1] each ~ N(0, 0.5), classifier.weight
[3, 2*proj] ~ N(0, 0.3) and classifier.bias [3] ~ N(0, 0.1), from a seeded generator);
inputs.json ({"sentences": a ragged batch of 4, lengths 5, 2, 7, 1, "labels": 3 classes,
all used}); and reference.safetensors, float32: loss [1]; logits [B, 3]; pooled
[B, L+1, 2*proj]; grad.<name> for every trainable parameter (of the mean loss); and five
steps of torch.optim.AdamW(lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01) on the
same batch, weight decay on classifier.weight only (rank >= 2; gamma, the scalar parameters
and the bias are in a group with weight_decay 0): steps.loss [5] (the loss before each
update, steps 0..4) and final.<name> (every trainable parameter after the 5 updates).

Computed in float64 from the float32 weights exactly, stored float32. Checks before writing:
layer 0 is [token, token] of the token embedder with boundaries removed; every layer is 0 at
padding; the pooled mix equals Elmo's own scalar_mix_0 (mix over all positions) then pooled
(1e-12); the loss equals an explicit log-softmax; the biLM gets no gradient; the gradients
of gamma and of the scalar parameter with the largest |grad| match a central finite
difference (rel 1e-6); steps.loss[0] is the loss.

Made with: torch 2.15.0, numpy, safetensors (requirements.txt beside this); no AllenNLP.
Run from the repository root:  python tests/reference/make_elmo_classify_fixtures.py
"""

import json
import os
import shutil

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from common import check_finite_difference
from elmo_reference import Elmo, add_boundaries, batch_char_ids, load_options, remove_boundaries

SRC = os.path.join("tests", "fixtures", "bilm")
OUT = os.path.join("tests", "fixtures", "elmo-classify")

NUM_LABELS = 3
# Unsorted lengths 5, 2, 7, 1; mixed case, punctuation and a 13-letter word.
SENTENCES = [["The", "film", "was", "wonderful", "!"],
             ["Not", "good"],
             ["A", "slow", ",", "predictable", "and", "forgettable", "story"],
             ["Fine"]]
LABELS = [2, 0, 0, 1]
SEED = 7
GAMMA = 1.3
SCALES = {"scalar": 0.5, "weight": 0.3, "bias": 0.1}
ADAMW = dict(lr=0.05, betas=(0.9, 0.999), eps=1e-8)
WEIGHT_DECAY = 0.01
STEPS = 5


class ElmoClassifier(Elmo):
    """AllenNLP's Elmo with one scalar mix (scalar_mix_0.*) plus classifier.*, the biLM
    (_elmo_lstm.*) frozen."""

    def __init__(self, options, num_labels):
        super().__init__(options, 1)
        proj = options["lstm"]["projection_dim"]
        self.classifier = nn.Linear(2 * proj, num_labels)
        self._elmo_lstm.requires_grad_(False)

    def forward(self, char_ids):
        """char_ids [B, T, 50] without boundaries -> dict of logits [B, num_labels], pooled
        [B, L+1, 2*proj], and Elmo's outputs (layers, mask, mixes, token_embedding)."""
        out = super().forward(char_ids)
        mask = out["mask"]  # [B, T]
        count = mask.sum(dim=1, keepdim=True)  # [B, 1]
        pooled = torch.stack([(x * mask.unsqueeze(-1)).sum(dim=1) / count for x in out["layers"]], dim=1)
        mixed = self.scalar_mix_0(list(pooled.unbind(dim=1)))
        return dict(out, pooled=pooled, mixed=mixed, logits=self.classifier(mixed))


def trainable(model):
    return {k: p for k, p in model.named_parameters() if p.requires_grad}


def initial_state(options):
    """The biLM's float32 tensors (softmax.* dropped) and the seeded mix and classifier."""
    bilm = {k: v for k, v in load_file(os.path.join(SRC, "model.safetensors")).items() if not k.startswith("softmax.")}
    g = torch.Generator().manual_seed(SEED)
    n = options["lstm"]["n_layers"] + 1
    width = 2 * options["lstm"]["projection_dim"]
    head = {f"scalar_mix_0.scalar_parameters.{j}": torch.randn(1, generator=g) * SCALES["scalar"] for j in range(n)}
    head["scalar_mix_0.gamma"] = torch.tensor([GAMMA])
    head["classifier.weight"] = torch.randn(NUM_LABELS, width, generator=g) * SCALES["weight"]
    head["classifier.bias"] = torch.randn(NUM_LABELS, generator=g) * SCALES["bias"]
    return {k: v.float().contiguous() for k, v in {**bilm, **head}.items()}


def build(options, state):
    model = ElmoClassifier(options, NUM_LABELS).double().eval()
    model.load_state_dict(state, strict=True)
    return model


def compute(model, char_ids, labels):
    out = model(char_ids)
    return F.cross_entropy(out["logits"], labels), out


def check_layers(model, char_ids, out):
    """Layer 0 is the token layer doubled (boundaries out); every layer is 0 at padding; the
    mix of the pooled layers equals Elmo's scalar_mix_0 over all positions, then pooled."""
    lengths = out["mask"].sum(dim=1).long()
    token = model._elmo_lstm._token_embedder(add_boundaries(char_ids, lengths))
    token = remove_boundaries(token, lengths)
    assert torch.equal(out["layers"][0], torch.cat([token, token], dim=-1)), "layer 0 is not [token, token]"
    padding = out["mask"] == 0
    for j, x in enumerate(out["layers"]):
        assert not x[padding].any(), f"layer {j} is not 0 at padding"
    mix = out["mixes"][0]
    mix_pooled = (mix * out["mask"].unsqueeze(-1)).sum(dim=1) / out["mask"].sum(dim=1, keepdim=True)
    diff = float((mix_pooled - out["mixed"]).abs().max())
    assert diff < 1e-12, f"pool-then-mix vs mix-then-pool: {diff:.1e}"
    return diff


def adamw_trajectory(options, state, char_ids, labels):
    """STEPS AdamW updates from the initial values; the loss before each and the final values."""
    model = build(options, state)
    params = trainable(model)
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    assert [k for k, p in params.items() if p.dim() >= 2] == ["classifier.weight"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}], **ADAMW)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = compute(model, char_ids, labels)[0]
        losses.append(loss.detach())
        loss.backward()
        opt.step()
    return torch.stack(losses), {k: p.detach().clone() for k, p in params.items()}


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    options = load_options(os.path.join(SRC, "options.json"))
    state = initial_state(options)
    char_ids = torch.tensor(batch_char_ids(SENTENCES))
    labels = torch.tensor(LABELS)
    assert sorted(set(LABELS)) == list(range(NUM_LABELS))

    model64 = build(options, state)
    loss, out = compute(model64, char_ids, labels)
    loss.backward()
    loss = loss.detach()
    params = trainable(model64)
    assert sorted(params) == sorted(k for k in state if not k.startswith("_elmo_lstm.")), sorted(params)
    assert all(p.grad is None for p in model64._elmo_lstm.parameters()), "the biLM got a gradient"

    with torch.no_grad():
        mix_diff = check_layers(model64, char_ids, out)
        logits = out["logits"]
        log_p = logits - logits.logsumexp(dim=-1, keepdim=True)
        by_hand = -log_p[torch.arange(len(LABELS)), labels].mean()
    assert abs(float(by_hand - loss)) < 1e-12, f"loss two ways: {float(loss)} vs {float(by_hand)}"
    scalars = [k for k in params if k.startswith("scalar_mix_0.scalar_parameters.")]
    largest = max(scalars, key=lambda k: float(params[k].grad.abs()))
    fd = [check_finite_difference(model64, name, lambda: float(compute(model64, char_ids, labels)[0])) for name in ("scalar_mix_0.gamma", largest)]

    step_losses, final = adamw_trajectory(options, state, char_ids, labels)
    assert abs(float(step_losses[0] - loss)) < 1e-12, "steps.loss[0] is not the loss"

    shutil.copyfile(os.path.join(SRC, "options.json"), os.path.join(OUT, "options.json"))
    with open(os.path.join(OUT, "inputs.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "labels": LABELS}, f)
    save_file(state, os.path.join(OUT, "model.safetensors"))
    ref = {"loss": loss.reshape(1), "logits": out["logits"].detach(), "pooled": out["pooled"].detach(),
           "steps.loss": step_losses}
    ref.update({f"grad.{k}": p.grad for k, p in params.items()})
    ref.update({f"final.{k}": v for k, v in final.items()})
    ref = {k: v.float().contiguous() for k, v in ref.items()}
    save_file(ref, os.path.join(OUT, "reference.safetensors"))

    n_layers = options["lstm"]["n_layers"]
    print(f"L = {n_layers} biLSTM layers, {n_layers + 1} mixed layers of width 2*proj = "
          f"{2 * options['lstm']['projection_dim']}; lengths {[len(s) for s in SENTENCES]}, labels {LABELS}")
    print(f"mix weights {torch.softmax(torch.cat([params[k] for k in scalars]), 0).tolist()}")
    print(f"loss {float(loss):.8f}  (log {NUM_LABELS} = {torch.log(torch.tensor(float(NUM_LABELS))):.6f})")
    print("logits", out["logits"].detach().tolist())
    print(f"pool-then-mix vs mix-then-pool max diff {mix_diff:.1e}")
    print("finite differences:", "; ".join(fd))
    for k, p in params.items():
        print(f"  grad.{k} {list(p.shape)} {p.grad.flatten().tolist()}")
    print("steps.loss", step_losses.tolist())
    for k, v in final.items():
        print(f"  final.{k} {list(v.shape)} max|final - initial| {(v - state[k].double()).abs().max():.3e}")


if __name__ == "__main__":
    main()
