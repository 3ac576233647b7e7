"""Writes the AWD-LSTM parity fixtures under tests/fixtures/awd_lstm/: two tiny random-weight
language models as fastai state dicts (the names `learn.model.state_dict()` has), each with
  state_dict.safetensors   what `sesame convert-ulmfit --weights` reads,
  vocab.txt                fastai's itos, one token a line (`--vocab`),
  inputs.json              a ragged right-padded batch (input_ids, attention_mask),
  reference.safetensors    awd_lstm_reference.py's outputs in float64, stored float32:
                           logits, last_hidden_state, hidden_states.{0..L}.
lm/:     vocab 30, emb 8, n_hid 12, 3 layers, decoder tied to the embeddings with a bias; the
         state dict also holds fastai's duplicates `0.encoder_dp.emb.weight` (the same table)
         and `0.rnns.{l}.module.weight_hh_l0` (a weight-dropped copy of the raw matrix, as a
         training forward leaves it: different values, which must not be read).
untied/: vocab 30, emb 6, n_hid 10, 2 layers, the decoder's own weight and no bias, no
         duplicates.

Checks before writing: the reference's LSTM equals torch.nn.LSTM on the same weights
(float64, 1e-12), and each sequence run alone equals its row of the batch.

Made with torch 2.15.0 and safetensors (requirements.txt beside this); no fastai.
Run from the repository root:  python tests/reference/make_awd_lstm_fixtures.py
"""

import json
import os

import torch
from safetensors.torch import save_file

from awd_lstm_reference import encoder_layers, lm_logits, lstm_layer
from common import WORDS

OUT = os.path.join("tests", "fixtures", "awd_lstm")
# fastai's special tokens in its vocabularies' order (defaults.text_spec_tok): xxpad is id 1.
SPECIAL = ["xxunk", "xxpad", "xxbos", "xxeos", "xxfld", "xxrep", "xxwrep", "xxup", "xxmaj"]
VOCAB = SPECIAL + WORDS[:21]
PAD = 1
# Lengths 7, 3, 5 (right-padded with xxpad).
SEQUENCES = [[2, 9, 10, 11, 12, 13, 29], [2, 14, 8], [2, 8, 15, 16, 17]]

MODELS = {
    "lm": dict(emb=8, n_hid=12, layers=3, tied=True, bias=True, duplicates=True, seed=1),
    "untied": dict(emb=6, n_hid=10, layers=2, tied=False, bias=False, duplicates=False, seed=2),
}


def random_state(cfg):
    g = torch.Generator().manual_seed(cfg["seed"])
    rand = lambda *shape, std=0.4: std * torch.randn(*shape, generator=g, dtype=torch.float64)
    vocab, emb, n_hid, layers = len(VOCAB), cfg["emb"], cfg["n_hid"], cfg["layers"]
    sd = {"0.encoder.weight": rand(vocab, emb, std=0.8)}
    if cfg["duplicates"]:
        sd["0.encoder_dp.emb.weight"] = sd["0.encoder.weight"].clone()
    for l in range(layers):
        inp = emb if l == 0 else n_hid
        hid = emb if l == layers - 1 else n_hid
        rnn = f"0.rnns.{l}."
        sd[rnn + "weight_hh_l0_raw"] = rand(4 * hid, hid)
        sd[rnn + "module.weight_ih_l0"] = rand(4 * hid, inp)
        sd[rnn + "module.bias_ih_l0"] = rand(4 * hid, std=0.2)
        sd[rnn + "module.bias_hh_l0"] = rand(4 * hid, std=0.2)
        if cfg["duplicates"]:
            keep = (torch.rand(4 * hid, hid, generator=g, dtype=torch.float64) > 0.5).double()
            sd[rnn + "module.weight_hh_l0"] = sd[rnn + "weight_hh_l0_raw"] * keep / 0.5
    if not cfg["tied"]:
        sd["1.decoder.weight"] = rand(len(VOCAB), emb, std=0.8)
    if cfg["bias"]:
        sd["1.decoder.bias"] = rand(len(VOCAB), std=0.3)
    return sd


def check_against_nn_lstm(sd):
    """The hand-written recurrence against torch.nn.LSTM on every layer's weights."""
    g = torch.Generator().manual_seed(7)
    rnn = "0.rnns.0."
    hid, inp = sd[rnn + "weight_hh_l0_raw"].shape[1], sd[rnn + "module.weight_ih_l0"].shape[1]
    lstm = torch.nn.LSTM(inp, hid, batch_first=True).double()
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(sd[rnn + "module.weight_ih_l0"])
        lstm.weight_hh_l0.copy_(sd[rnn + "weight_hh_l0_raw"])
        lstm.bias_ih_l0.copy_(sd[rnn + "module.bias_ih_l0"])
        lstm.bias_hh_l0.copy_(sd[rnn + "module.bias_hh_l0"])
        x = torch.randn(2, 5, inp, generator=g, dtype=torch.float64)
        want, _ = lstm(x)
    got = lstm_layer(x, [5, 5], sd[rnn + "module.weight_ih_l0"], sd[rnn + "module.bias_ih_l0"],
                     sd[rnn + "weight_hh_l0_raw"], sd[rnn + "module.bias_hh_l0"])
    assert (got - want).abs().max() < 1e-12, (got - want).abs().max()


def main():
    seq = max(len(s) for s in SEQUENCES)
    input_ids = [s + [PAD] * (seq - len(s)) for s in SEQUENCES]
    mask = [[1] * len(s) + [0] * (seq - len(s)) for s in SEQUENCES]
    lengths = [len(s) for s in SEQUENCES]
    for name, cfg in MODELS.items():
        out = os.path.join(OUT, name)
        os.makedirs(out, exist_ok=True)
        sd = random_state(cfg)
        check_against_nn_lstm(sd)
        layers = encoder_layers(sd, input_ids, lengths)
        logits = lm_logits(sd, layers[-1], tie_weights=cfg["tied"])
        for b, s in enumerate(SEQUENCES):
            alone = encoder_layers(sd, [s], [len(s)])
            assert (alone[-1][0] - layers[-1][b, :len(s)]).abs().max() < 1e-12
        reference = {"logits": logits, "last_hidden_state": layers[-1]}
        reference.update({f"hidden_states.{i}": h for i, h in enumerate(layers)})
        save_file({k: v.float().contiguous() for k, v in reference.items()}, os.path.join(out, "reference.safetensors"))
        save_file({k: v.float().contiguous() for k, v in sd.items()}, os.path.join(out, "state_dict.safetensors"))
        with open(os.path.join(out, "vocab.txt"), "w") as f:
            f.write("\n".join(VOCAB) + "\n")
        with open(os.path.join(out, "inputs.json"), "w") as f:
            json.dump({"input_ids": input_ids, "attention_mask": mask}, f)
        print(f"{out}: {len(sd)} tensors, logits {tuple(logits.shape)}")


if __name__ == "__main__":
    main()
