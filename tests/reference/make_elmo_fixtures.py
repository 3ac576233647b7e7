"""Writes the ELMo parity fixtures under tests/fixtures/elmo/: two tiny random-weight models
(small/: relu CNN, two highways, skip connections, clips 3/3, two scalar mixes; tanh/: tanh
CNN, one highway, three layers without skip connections or clips, one scalar mix), each as
options.json, model.safetensors (AllenNLP Elmo names), weights.hdf5 (the bilm-tf release
layout of the same weights), inputs.json (a ragged batch: words and character ids) and
reference.safetensors (outputs of elmo_reference.py, computed in float64, stored float32);
and char_ids.json (ELMoCharacterMapper on edge-case words).

Checks before writing: the hdf5 round trip is bit-exact; a bilm-tf-style forward written
separately from the hdf5 datasets (TF gate order, forget bias +1 at run time, carry gate)
matches the reference; the batch equals each sentence run alone (1e-12 in float64, where
only the ragged handling could differ; 2e-5 in float32, where the batch's other matmul
shapes round differently: about 1e-6 seen).

tanh/ exercises what bilm-tf's options allow but AllenNLP's Elmo refuses (it raises on
use_skip_connections false and indexes cell_clip / proj_clip directly), and a third layer.

Made with: torch 2.15.0, numpy, h5py, safetensors (requirements.txt beside this); no AllenNLP.
Run from the repository root:  python tests/reference/make_elmo_fixtures.py
"""

import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

from elmo_reference import (BOS_TOKEN, EOS_TOKEN, Elmo, batch_char_ids, from_bilm_tf, read_hdf5,
                            to_bilm_tf, word_char_ids, write_hdf5)

OUT = os.path.join("tests", "fixtures", "elmo")

# Lengths 7, 1, 4, 5 (unsorted, as AllenNLP sorts internally); punctuation, multi-byte UTF-8
# (2- and 4-byte characters), a 90-byte word (truncated to 48 bytes), "bank" and "the" in
# two sentences.
LONG_WORD = "pneumonoultramicroscopicsilicovolcanoconiosis-antidisestablishmentarianism-supercalifragilistic"
SENTENCES = [
    ["The", "naïve", "clerk", "left", "the", "bank", "."],
    ["🙂"],
    ["A", "river", "bank", "!"],
    [LONG_WORD, "at", "the", "café", "?"],
]

MODELS = {
    "small": dict(
        options={"lstm": {"use_skip_connections": True, "projection_dim": 8, "cell_clip": 3, "proj_clip": 3, "dim": 24, "n_layers": 2},
                 "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 6], [3, 8], [4, 10]], "n_highway": 2,
                              "embedding": {"dim": 6}, "n_characters": 262, "max_characters_per_token": 50}},
        n_mixes=2, seed=1),
    "tanh": dict(
        options={"lstm": {"use_skip_connections": False, "projection_dim": 6, "dim": 16, "n_layers": 3},
                 "char_cnn": {"activation": "tanh", "filters": [[1, 5], [3, 7]], "n_highway": 1,
                              "embedding": {"dim": 4}, "n_characters": 262, "max_characters_per_token": 50}},
        n_mixes=1, seed=2),
}

# Edge cases for the character mapper: ASCII, 2/3/4-byte UTF-8, an emoji sequence with
# joiners, 48 bytes (no truncation), 49 and 60 bytes (truncated), a 2-byte character cut in
# half by the 48-byte limit, the empty string, the boundary strings and near misses.
CHAR_ID_WORDS = ["a", "Hello", ",", "café", "naïve", "日本語", "🙂", "👩‍👩‍👧", "x" * 48, "y" * 49, "z" * 60,
                 "é" * 24, "q" * 47 + "é", "", BOS_TOKEN, EOS_TOKEN, "<s>", "</s>", "<S>x", LONG_WORD]


def randomize(model, seed, scales):
    """Weights of order 1 (default inits leave layers near zero and the comparison weak).
    Forget-gate biases are 1 + 0.1*randn, kept in [0.5, 2] so that the hdf5's b - 1 is exact
    (see to_bilm_tf); the char embedding's padding row stays 0."""
    g = torch.Generator().manual_seed(seed)
    cell = model.options["lstm"]["dim"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if name.endswith("gamma"):
                p.copy_(0.5 + 0.5 * r.abs())
            elif "scalar_parameters" in name:
                p.copy_(r)
            elif name.endswith("_char_embedding_weights"):
                p.copy_(scales["char_embed"] * r)
                p[0] = 0
            elif name.endswith("state_linearity.bias"):
                p.copy_(0.1 * r)
                p[cell : 2 * cell] = (1.0 + 0.1 * r[cell : 2 * cell]).clamp(0.5, 2.0)
            elif name.endswith("bias"):
                p.copy_(0.1 * r)
            else:
                # Longest match first: "_projection" is also in "state_projection".
                kind = max((k for k in scales if k in name), key=len, default=None)
                p.copy_(scales.get(kind, 0.3) * r)


def bilm_tf_forward(ds, options, ids):
    """bilm-tf's computation for one sentence, from the hdf5 datasets, in float64 numpy.
    ids [n, 50] with the boundary tokens. Returns 2L+1 arrays [n, 2*proj]."""
    ds = {k: v.astype(np.float64) for k, v in ds.items()}
    cnn, lstm = options["char_cnn"], options["lstm"]
    sig = lambda v: 1 / (1 + np.exp(-v))
    act = np.tanh if cnn["activation"] == "tanh" else (lambda v: np.maximum(v, 0))
    table = np.concatenate([np.zeros((1, ds["char_embed"].shape[1])), ds["char_embed"]])
    emb = table[ids]  # [n, 50, dim]
    convs = []
    for i, (width, _) in enumerate(cnn["filters"]):
        w, b = ds[f"CNN/W_cnn_{i}"][0], ds[f"CNN/b_cnn_{i}"]  # [width, dim, count]
        pos = [np.einsum("nwd,wdk->nk", emb[:, p : p + width], w) + b for p in range(ids.shape[1] - width + 1)]
        convs.append(act(np.max(pos, axis=0)))
    x = np.concatenate(convs, axis=-1)
    for k in range(cnn.get("n_highway") or 0):
        h = {n: ds[f"CNN_high_{k}/{n}"] for n in ("W_carry", "b_carry", "W_transform", "b_transform")}
        carry = sig(x @ h["W_carry"] + h["b_carry"])
        x = carry * np.maximum(x @ h["W_transform"] + h["b_transform"], 0) + (1 - carry) * x
    x = x @ ds["CNN_proj/W_proj"] + ds["CNN_proj/b_proj"]
    cell, proj = lstm["dim"], lstm["projection_dim"]
    outputs = {}
    for d in (0, 1):
        inp = x if d == 0 else x[::-1]
        outputs[d] = []
        for i in range(lstm.get("n_layers", 1)):
            root = f"RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell/"
            h, c, out = np.zeros(proj), np.zeros(cell), []
            for t in range(len(inp)):
                z = np.concatenate([inp[t], h]) @ ds[root + "W_0"] + ds[root + "B"]
                gi, gj, gf, go = np.split(z, 4)
                c = sig(gf + 1.0) * c + sig(gi) * np.tanh(gj)
                if lstm.get("cell_clip"):
                    c = np.clip(c, -lstm["cell_clip"], lstm["cell_clip"])
                h = (sig(go) * np.tanh(c)) @ ds[root + "W_P_0"]
                if lstm.get("proj_clip"):
                    h = np.clip(h, -lstm["proj_clip"], lstm["proj_clip"])
                out.append(h)
            out = np.array(out)
            if lstm["use_skip_connections"] and i > 0:
                out = out + inp  # ResidualWrapper: the state above stays the cell's own output
            outputs[d].append(out if d == 0 else out[::-1])
            inp = out
    return [np.concatenate([x, x], -1)] + [np.concatenate([f, b], -1) for f, b in zip(outputs[0], outputs[1])]


def max_diff(a, b):
    return float((torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max())


def check_alone(model, char_ids, result, lengths, tol):
    """Each sentence run alone (its own length, no padding) gives the batch's rows, and the
    batch's padded positions are 0."""
    worst = 0.0
    for b, n in enumerate(lengths):
        with torch.no_grad():
            alone = model(char_ids[b : b + 1, :n])
        worst = max(worst, max_diff(alone["token_embedding"][0], result["token_embedding"][b, : n + 2]))
        for key in ("layers", "mixes"):
            for x, y in zip(alone[key], result[key]):
                worst = max(worst, max_diff(x[0], y[b, :n]))
                assert not y[b, n:].any(), "padded positions must be 0"
    assert worst <= tol, f"batch vs alone: {worst}"
    return worst


def make(name, options, n_mixes, seed, scales):
    out_dir = os.path.join(OUT, name)
    os.makedirs(out_dir, exist_ok=True)
    model = Elmo(options, n_mixes).eval()
    randomize(model, seed, scales)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}

    # hdf5: write, read back, convert as AllenNLP does; both directions bit-exact.
    lm_state = {k: v for k, v in state.items() if not k.startswith("scalar_mix_")}
    datasets = to_bilm_tf(lm_state, options)
    write_hdf5(os.path.join(out_dir, "weights.hdf5"), datasets)
    read = read_hdf5(os.path.join(out_dir, "weights.hdf5"))
    assert sorted(read) == sorted(datasets)
    back = from_bilm_tf(read, options)
    assert sorted(back) == sorted(lm_state)
    for k in lm_state:
        assert back[k].dtype == torch.float32 and torch.equal(back[k], lm_state[k]), k
    for k, v in to_bilm_tf(back, options).items():
        assert np.array_equal(v, read[k]) and v.dtype == read[k].dtype, k

    with open(os.path.join(out_dir, "options.json"), "w") as f:
        json.dump(options, f)
    save_file(state, os.path.join(out_dir, "model.safetensors"))

    char_ids = torch.tensor(batch_char_ids(SENTENCES))
    lengths = [len(s) for s in SENTENCES]
    with open(os.path.join(out_dir, "inputs.json"), "w", encoding="utf-8") as f:
        json.dump({"sentences": SENTENCES, "char_ids": char_ids.tolist()}, f, ensure_ascii=False)

    # The reference in float64 (the float32 weights, exactly); float32 alongside to show the
    # size of float32 rounding on these outputs.
    model64 = Elmo(options, n_mixes).double().eval()
    model64.load_state_dict(state)
    with torch.no_grad():
        r64 = model64(char_ids)
        r32 = model(char_ids)
    hits = {f"{n}": dict(m.clip_hits) for n, m in model64.named_modules() if hasattr(m, "clip_hits")}
    f32_err = max(max_diff(a, b) for a, b in zip(r64["layers"] + r64["mixes"], r32["layers"] + r32["mixes"]))
    # How much the clips matter: the same weights with clipping off.
    unclipped = Elmo({**options, "lstm": {**options["lstm"], "cell_clip": None, "proj_clip": None}}, n_mixes).double().eval()
    unclipped.load_state_dict(state)
    with torch.no_grad():
        clip_effect = max(max_diff(a, b) for a, b in zip(unclipped(char_ids)["layers"], r64["layers"]))

    alone32 = check_alone(model, char_ids, r32, lengths, 2e-5)
    alone64 = check_alone(model64, char_ids, r64, lengths, 1e-12)

    tf_err = 0.0
    for b, n in enumerate(lengths):
        ids = np.array(batch_char_ids([[BOS_TOKEN] + SENTENCES[b] + [EOS_TOKEN]])[0])
        for x, y in zip(bilm_tf_forward(read, options, ids), r64["layers"]):
            tf_err = max(tf_err, max_diff(x[1:-1], y[b, :n]))
    assert tf_err < 1e-10, f"bilm-tf forward vs reference: {tf_err}"

    ref = {
        "token_embedding": r64["token_embedding"],
        "elmo_layers": torch.stack(r64["layers"], dim=1),
        "mask": r64["mask"],
    }
    for k, m in enumerate(r64["mixes"]):
        ref[f"elmo_representations.{k}"] = m
    ref = {k: v.float().contiguous() for k, v in ref.items()}
    save_file(ref, os.path.join(out_dir, "reference.safetensors"))

    print(f"{name}: params {sum(v.numel() for v in state.values())}, "
          f"float32 vs float64 {f32_err:.2e}, batch vs alone {alone32:.2e} (f32) {alone64:.2e} (f64), "
          f"bilm-tf forward {tf_err:.2e}")
    for k, v in ref.items():
        print(f"  {k} {list(v.shape)} |max| {v.abs().max():.3f} mean|x| {v.abs().mean():.3f}")
    print("  clip hits", hits, f"(outputs move by {clip_effect:.3f} without clipping)")
    return model64, char_ids


def lstm_saturation(model, char_ids):
    """Share of LSTM gate pre-activations beyond +-4 (saturated sigmoid/tanh)."""
    pre = []

    def hook(module, args, output):
        pre.append(output.detach().abs().flatten())
    handles = [m.register_forward_hook(hook) for n, m in model.named_modules() if n.endswith("_linearity")]
    with torch.no_grad():
        model(char_ids)
    for h in handles:
        h.remove()
    # input_linearity and state_linearity outputs are summed; the per-part share is a proxy.
    allv = torch.cat(pre)
    return float((allv > 4).double().mean())


def main():
    torch.manual_seed(0)
    scales = {
        "small": {"char_embed": 1.0, "char_conv": 0.3, "_highways": 0.3, "_projection": 0.3, "input_linearity": 0.4,
                  "state_linearity": 0.4, "state_projection": 0.6},
        "tanh": {"char_embed": 1.0, "char_conv": 0.5, "_highways": 0.3, "_projection": 0.5, "input_linearity": 0.4,
                 "state_linearity": 0.4, "state_projection": 0.5},
    }
    for name, spec in MODELS.items():
        model, char_ids = make(name, spec["options"], spec["n_mixes"], spec["seed"], scales[name])
        print(f"  gate pre-activations |z| > 4: {lstm_saturation(model, char_ids):.1%}")

    cases = [{"word": w, "ids": word_char_ids(w)} for w in CHAR_ID_WORDS]
    with open(os.path.join(OUT, "char_ids.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n")
    print("char_ids.json", len(cases), "words")


if __name__ == "__main__":
    main()
