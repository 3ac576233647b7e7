"""Loads an ELMo checkpoint that `sesame train --objective bilm` wrote into the PyTorch ELMo of
elmo_reference.py (AllenNLP `Elmo` names) and records its outputs and its biLM loss, so that
tests/trained_models.rs can check Sesame gives the same: the proof that a Sesame-trained ELMo
is a real ELMo checkpoint for PyTorch code.

The folder (default models/elmo-wikitext) holds options.json (bilm-tf schema),
model.safetensors (float32: AllenNLP Elmo names plus softmax.weight [V, proj] and softmax.bias
[V], no scalar mix) and vocab.txt (bilm-tf order: <S>, </S>, <UNK>, then the words). It is
loaded into Elmo(options, 1) strictly: every tensor of the module except the scalar mix must
be in model.safetensors with its shape and dtype, the only extra tensors allowed are
softmax.weight and softmax.bias, and the scalar mix gets AllenNLP's initial values (gamma 1,
scalar parameters 0: the plain average of the L+1 layers).

Writes tests/fixtures/roundtrip/elmo-wikitext.safetensors (or --out), float32, named as
make_elmo_fixtures.py's reference.safetensors: elmo_layers [B, L+1, T, 2*proj] (the token
layer, doubled, then each biLSTM layer; boundaries removed, 0 at padding), mask [B, T] and
elmo_representations.0 [B, T, 2*proj] (the scalar mix); and the biLM loss on the same batch:
loss, forward_loss, backward_loss [1]. The metadata key `sentences` holds the batch as JSON
(a list of sentences, each a list of words, used as they are: no further splitting).

How: Elmo in eval mode (no dropout), in float32, on a fresh module (zero LSTM states). The
loss is make_bilm_fixtures.py's: over <S> w1 .. wn </S> (word ids from vocab.txt, a word
outside it -> <UNK> = 2; case-sensitive, as bilm-tf), the forward half of the top biLSTM layer
at t < n+1 predicts token t+1 and the backward half at t >= 1 token t-1, through the one
softmax; loss is the mean cross-entropy over all 2N predictions (N = sum (n+1)),
forward_loss and backward_loss the mean of each direction. The top layer comes from
make_bilm_fixtures.py's BiLmWithSoftmax, loaded with exactly model.safetensors's tensors.

Checks before writing: the strict loads above; the loss module's top layer, boundaries
removed, equals Elmo's last layer bit for bit; the loss equals F.cross_entropy over the
gathered rows (rel 1e-5); padded positions are 0; the mix is the average of the layers; the
same forward in float64 stays within 1e-3 of the float32 one (printed).

Made with: torch 2.15.0, numpy, safetensors (requirements.txt beside this); no AllenNLP.
Run from the repository root:  python tests/reference/check_sesame_elmo.py [FOLDER] [--out FILE]
"""

import argparse
import json
import os

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from elmo_reference import Elmo, batch_char_ids, load_options, remove_boundaries
from make_bilm_fixtures import BiLmWithSoftmax, bilm_losses, loss_by_gather

FOLDER = os.path.join("models", "elmo-wikitext")
OUT = os.path.join("tests", "fixtures", "roundtrip", "elmo-wikitext.safetensors")
SPECIALS = ["<S>", "</S>", "<UNK>"]
SOFTMAX = {"softmax.weight", "softmax.bias"}

# Unsorted lengths 7, 9, 6; "bank" and "the" in two sentences.
SENTENCES = [
    ["The", "bank", "of", "the", "river", "flooded", "."],
    ["She", "paid", "the", "cheque", "in", "at", "the", "bank", "."],
    ["It", "was", "released", "in", "1998", "."],
]


def read_vocab(path):
    with open(path, encoding="utf-8") as f:
        words = f.read().split("\n")
    if words and words[-1] == "":
        words.pop()
    assert words[:3] == SPECIALS, f"vocab.txt must start with {SPECIALS}, not {words[:3]}"
    assert len(set(words)) == len(words), "vocab.txt has duplicate words"
    return words


def load_elmo(folder):
    """Elmo(options, 1) with every tensor of model.safetensors but the softmax, the scalar
    mix at AllenNLP's initial values; and the file's tensors."""
    options = load_options(os.path.join(folder, "options.json"))
    weights = load_file(os.path.join(folder, "model.safetensors"))
    elmo = Elmo(options, 1).eval()
    own = elmo.state_dict()
    mix = {k for k in own if k.startswith("scalar_mix_")}
    expected = set(own) - mix
    missing = sorted(expected - set(weights))
    extra = sorted(set(weights) - expected)
    assert not missing, f"model.safetensors lacks tensors of Elmo: {missing}"
    assert set(extra) <= SOFTMAX, f"model.safetensors has tensors Elmo does not: {sorted(set(extra) - SOFTMAX)}"
    assert set(extra) == SOFTMAX, f"model.safetensors lacks the LM softmax: {sorted(SOFTMAX - set(extra))}"
    for k in expected:
        assert weights[k].dtype == torch.float32, f"{k} is {weights[k].dtype}, not float32"
        assert weights[k].shape == own[k].shape, f"{k}: {list(weights[k].shape)} in the file, {list(own[k].shape)} in Elmo"
    state = {k: weights[k] for k in expected}
    for k in mix:
        state[k] = torch.ones_like(own[k]) if k.endswith("gamma") else torch.zeros_like(own[k])
    elmo.load_state_dict(state, strict=True)
    return elmo, options, weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default=FOLDER, help=f"the checkpoint folder (default {FOLDER})")
    parser.add_argument("--out", default=OUT, help=f"the safetensors file to write (default {OUT})")
    args = parser.parse_args()
    torch.manual_seed(0)

    elmo, options, weights = load_elmo(args.folder)
    vocab = read_vocab(os.path.join(args.folder, "vocab.txt"))
    proj = options["lstm"]["projection_dim"]
    assert weights["softmax.weight"].shape == (len(vocab), proj), \
        f"softmax.weight {list(weights['softmax.weight'].shape)}, vocab.txt has {len(vocab)} words, proj {proj}"
    assert weights["softmax.bias"].shape == (len(vocab),), f"softmax.bias {list(weights['softmax.bias'].shape)}"

    # The LM: the same biLM plus the softmax, loaded with exactly the file's tensors.
    lm = BiLmWithSoftmax(options, len(vocab)).eval()
    lm.load_state_dict(weights, strict=True)

    index = {w: i for i, w in enumerate(vocab)}
    targets = [[0] + [index.get(w, 2) for w in s] + [1] for s in SENTENCES]
    unknown = [w for s in SENTENCES for w in s if w not in index]
    char_ids = torch.tensor(batch_char_ids(SENTENCES))
    lengths = torch.tensor([len(s) for s in SENTENCES])

    with torch.no_grad():
        result = elmo(char_ids)
        _, top_f, top_b, _ = lm(char_ids)
        fwd, bwd, n = bilm_losses(top_f, top_b, targets, lm.softmax)
        loss, forward_loss, backward_loss = 0.5 * (fwd + bwd) / n, fwd / n, bwd / n
        by_gather = loss_by_gather(top_f, top_b, targets, lm.softmax)
    hits = {name: dict(m.clip_hits) for name, m in elmo.named_modules() if hasattr(m, "clip_hits")}

    layers = torch.stack(result["layers"], dim=1)  # [B, L+1, T, 2*proj]
    mix = result["mixes"][0]
    mask = result["mask"]
    assert layers.shape == (len(SENTENCES), options["lstm"]["n_layers"] + 1, int(lengths.max()), 2 * proj), list(layers.shape)
    assert torch.equal(remove_boundaries(torch.cat([top_f, top_b], dim=-1), lengths), result["layers"][-1]), \
        "the loss's top layer differs from Elmo's"
    rel = abs(float(by_gather - loss)) / float(loss)
    assert rel < 1e-5, f"loss two ways: {float(loss)} vs {float(by_gather)} (rel {rel:.1e})"
    assert torch.equal(mask, (torch.arange(mask.shape[1]) < lengths.unsqueeze(1)).float())
    padding = mask == 0
    assert not layers.transpose(1, 2)[padding].any() and not mix[padding].any(), "padded positions must be 0"
    assert torch.allclose(mix, layers.mean(dim=1), atol=1e-6), "the initial mix is the layers' average"

    # The same forward in float64 (the float32 weights exactly): the size of float32 rounding.
    elmo64 = Elmo(options, 1).double().eval()
    elmo64.load_state_dict(elmo.state_dict())
    with torch.no_grad():
        r64 = elmo64(char_ids)
    f32_err = max(float((a.double() - b).abs().max()) for a, b in zip(result["layers"] + result["mixes"], r64["layers"] + r64["mixes"]))
    assert f32_err < 1e-3, f"float32 vs float64: {f32_err}"

    out = {
        "elmo_layers": layers,
        "mask": mask,
        "elmo_representations.0": mix,
        "loss": loss.reshape(1),
        "forward_loss": forward_loss.reshape(1),
        "backward_loss": backward_loss.reshape(1),
    }
    out = {k: v.float().contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    save_file(out, args.out, metadata={"sentences": json.dumps(SENTENCES, ensure_ascii=False)})

    print(f"{args.folder}: {len(weights)} tensors ({sum(v.numel() for v in weights.values())} params), "
          f"vocab {len(vocab)}, options lstm {options['lstm']}")
    print(f"sentence lengths {lengths.tolist()}, unknown words {unknown}, N {n} per direction")
    print(f"loss {float(loss):.6f}  forward {float(forward_loss):.6f}  backward {float(backward_loss):.6f}  "
          f"(log V = {torch.log(torch.tensor(float(len(vocab)))):.6f}); by F.cross_entropy {float(by_gather):.6f}")
    print(f"float32 vs float64 forward: {f32_err:.2e}")
    print("clip hits", hits)
    print(f"wrote {args.out} (metadata: sentences)")
    for k, v in out.items():
        print(f"  {k} {list(v.shape)} |max| {v.abs().max():.4f}")


if __name__ == "__main__":
    main()
