"""Writes the biLM training fixtures under tests/fixtures/bilm/: ELMo's pretraining objective
(bilm-tf / AllenNLP LanguageModel) on a tiny random-weight model, its loss and the gradient
of every parameter.

Files: options.json (relu CNN, two highways, two layers with skip connections, clips 3/3);
vocab.txt (bilm-tf order: <S>, </S>, <UNK>, then words, one per line); model.safetensors (the
weights, float32, AllenNLP Elmo names plus softmax.weight [V, proj] and softmax.bias [V]);
inputs.json (a ragged batch of 3 sentences, lengths 5, 2, 4, two words outside the
vocabulary, and each wrapped sentence's word ids, <S> = 0 first and </S> = 1 last); and
reference.safetensors, float32: loss, forward_loss, backward_loss [1]; top_forward and
top_backward [B, T+2, proj] (the two halves of the last biLSTM layer, boundaries in, 0 at
padding); token_embedding [B, T+2, proj] (the char encoder on the wrapped batch; positions
past a sentence's </S> hold what the encoder gives for an all-zero character row, which
nothing downstream reads); grad.<name> for every tensor of model.safetensors.

The objective: with L = n + 2 positions for <S> w1 .. wn </S>, the forward top layer at
t < L-1 predicts token t+1 and the backward one at t >= 1 predicts token t-1, through one
softmax shared by both directions; N = sum (L - 1) targets per direction and
loss = 0.5 * (sum forward CE + sum backward CE) / N; forward_loss and backward_loss are each
sum / N. Computed in float64 from the float32 weights exactly (elmo_reference.py's modules,
in eval mode: no dropout), then loss.backward(). The weights are make_elmo_fixtures.py's
randomize, scaled so that both the cell and the projection clip are hit (their gradient is 0
there); the char embedding's padding row 0 stays 0 and gets no gradient (no real token has
a character id 0).

Checks before writing: the loss equals F.cross_entropy(reduction="sum") over the gathered
rows; two scalar parameters' gradients match a central finite difference (rel 1e-6).

Made with: torch 2.15.0, numpy, safetensors (requirements.txt beside this); no AllenNLP.
Run from the repository root:  python tests/reference/make_bilm_fixtures.py
"""

import json
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from common import check_finite_difference
from elmo_reference import BiLm, add_boundaries, batch_char_ids
from make_elmo_fixtures import randomize

OUT = os.path.join("tests", "fixtures", "bilm")

OPTIONS = {"lstm": {"use_skip_connections": True, "projection_dim": 8, "cell_clip": 3, "proj_clip": 3, "dim": 12, "n_layers": 2},
           "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 6], [3, 8]], "n_highway": 2,
                        "embedding": {"dim": 6}, "n_characters": 262, "max_characters_per_token": 50}}
VOCAB = ["<S>", "</S>", "<UNK>", "the", "a", "cat", "dog", "sat", "on", "mat", "ran", "to", "river",
         "bank", "of", "and", "fish", "swim", "in", "red"]
# Unsorted lengths 5, 2, 4; "swam" and "zebra" are not in the vocabulary (<UNK>).
SENTENCES = [["the", "dog", "sat", "on", "the"], ["fish", "swam"], ["a", "zebra", "ran", "to"]]
SEED = 4
SCALES = {"char_embed": 1.0, "char_conv": 0.4, "_highways": 0.3, "_projection": 0.5, "input_linearity": 0.4,
          "state_linearity": 0.5, "state_projection": 1.0, "softmax": 0.3}


class BiLmWithSoftmax(nn.Module):
    """AllenNLP's Elmo names (the BiLm under _elmo_lstm) plus the LM softmax."""

    def __init__(self, options, vocab_size):
        super().__init__()
        self.options = options  # read by randomize
        self._elmo_lstm = BiLm(options)
        self.softmax = nn.Linear(options["lstm"]["projection_dim"], vocab_size)

    def forward(self, char_ids):
        """char_ids [B, T, 50] without boundaries -> token layer and the forward / backward
        halves of the top layer, [B, T+2, proj] each, and the wrapped lengths [B]."""
        lengths = (char_ids > 0).any(dim=-1).sum(dim=1)
        token = self._elmo_lstm._token_embedder(add_boundaries(char_ids, lengths))
        top = self._elmo_lstm._elmo_lstm(token, lengths + 2)[-1]
        proj = top.shape[-1] // 2
        return token, top[..., :proj], top[..., proj:], lengths + 2


def bilm_losses(top_f, top_b, targets, softmax):
    """Sums of forward and backward cross-entropies (explicit log-softmax, per sentence) and N."""
    fwd = bwd = 0.0
    n = 0
    for i, ids in enumerate(targets):
        ids = torch.tensor(ids)
        length = len(ids)
        for top, at, predicts in ((top_f, slice(0, length - 1), ids[1:]), (top_b, slice(1, length), ids[:-1])):
            logits = top[i, at] @ softmax.weight.T + softmax.bias
            log_p = logits - logits.logsumexp(dim=-1, keepdim=True)
            ce = -log_p[torch.arange(length - 1), predicts].sum()
            if top is top_f:
                fwd = fwd + ce
            else:
                bwd = bwd + ce
        n += length - 1
    return fwd, bwd, n


def loss_by_gather(top_f, top_b, targets, softmax):
    """The same loss, a second way: gather all 2N rows, one F.cross_entropy(sum)."""
    rows, labels = [], []
    for i, ids in enumerate(targets):
        rows += [top_f[i, t] for t in range(len(ids) - 1)] + [top_b[i, t] for t in range(1, len(ids))]
        labels += ids[1:] + ids[:-1]
    logits = softmax(torch.stack(rows))
    return F.cross_entropy(logits, torch.tensor(labels), reduction="sum") / len(labels)


def compute(model, char_ids, targets):
    token, top_f, top_b, lengths = model(char_ids)
    fwd, bwd, n = bilm_losses(top_f, top_b, targets, model.softmax)
    return dict(loss=0.5 * (fwd + bwd) / n, forward_loss=fwd / n, backward_loss=bwd / n,
                token_embedding=token, top_forward=top_f, top_backward=top_b), lengths


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    model = BiLmWithSoftmax(OPTIONS, len(VOCAB))
    randomize(model, SEED, SCALES)  # float32 parameters: these are the values saved
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}

    index = {w: i for i, w in enumerate(VOCAB)}
    targets = [[0] + [index.get(w, index["<UNK>"]) for w in s] + [1] for s in SENTENCES]
    char_ids = torch.tensor(batch_char_ids(SENTENCES))

    model64 = BiLmWithSoftmax(OPTIONS, len(VOCAB)).double().eval()
    model64.load_state_dict(state)
    out, lengths = compute(model64, char_ids, targets)
    hits = {n: dict(m.clip_hits) for n, m in model64.named_modules() if hasattr(m, "clip_hits")}
    out["loss"].backward()
    out = {k: v.detach() for k, v in out.items()}

    with torch.no_grad():
        by_gather = loss_by_gather(out["top_forward"], out["top_backward"], targets, model64.softmax)
    assert abs(float(by_gather - out["loss"])) < 1e-12, f"loss two ways: {float(out['loss'])} vs {float(by_gather)}"
    t2 = torch.arange(char_ids.shape[1] + 2)
    padding = t2.unsqueeze(0) >= lengths.unsqueeze(1)
    for key in ("top_forward", "top_backward"):
        assert not out[key][padding].any(), f"{key} must be 0 at padding"
    assert not model64._elmo_lstm._token_embedder._char_embedding_weights.grad[0].any(), "padding char row has a gradient"
    fd = [check_finite_difference(model64, name, lambda: float(compute(model64, char_ids, targets)[0]["loss"])) for name in
          ("_elmo_lstm._elmo_lstm.backward_layer_0.state_linearity.weight", "_elmo_lstm._token_embedder.char_conv_1.weight")]

    with open(os.path.join(OUT, "options.json"), "w") as f:
        json.dump(OPTIONS, f)
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("".join(w + "\n" for w in VOCAB))
    with open(os.path.join(OUT, "inputs.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "targets": targets}, f)
    save_file(state, os.path.join(OUT, "model.safetensors"))
    ref = {k: (v.reshape(1) if v.dim() == 0 else v) for k, v in out.items()}
    grads = dict(model64.named_parameters())
    ref.update({f"grad.{k}": grads[k].grad for k in state})
    ref = {k: v.float().contiguous() for k, v in ref.items()}
    save_file(ref, os.path.join(OUT, "reference.safetensors"))

    print(f"params {sum(v.numel() for v in state.values())} in {len(state)} tensors, vocab {len(VOCAB)}, "
          f"lengths with boundaries {lengths.tolist()}")
    print(f"loss {float(out['loss']):.6f}  forward {float(out['forward_loss']):.6f}  "
          f"backward {float(out['backward_loss']):.6f}  (log V = {torch.log(torch.tensor(len(VOCAB))):.6f})")
    print("clip hits", hits)
    print("finite differences:", "; ".join(fd))
    for k in state:
        print(f"  grad.{k} {list(state[k].shape)} max|g| {ref['grad.' + k].abs().max():.3e}")


if __name__ == "__main__":
    main()
