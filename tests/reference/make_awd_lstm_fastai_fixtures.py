"""Writes the AWD-LSTM fixtures made by fastai itself (the reference implementation of
ULMFiT) under tests/fixtures/awd_lstm/:

fastai-lm/          get_language_model(AWD_LSTM, 30, emb 8, n_hid 12, 3 layers, tied, bias):
  state_dict.safetensors  `model.state_dict()` as fastai writes it (with its duplicates
                          `0.encoder_dp.emb.weight` and the tied `1.decoder.weight`),
  vocab.txt, inputs.json  fastai's special tokens then 21 words; a batch of two sequences
                          (fastai's language model reads unpadded rows),
  reference.safetensors   eval-mode outputs after `reset()`: logits, hidden_states.0 (the
                          embeddings), hidden_states.{1,2,3} (each LSTM's output, hooked) and
                          last_hidden_state.
fastai-classifier/  get_text_classifier(AWD_LSTM, 30, 3 classes, seq_len 4, max_len 8,
                    lin_ftrs [10]) with random BatchNorm statistics:
  state_dict.safetensors, vocab.txt, labels.txt,
  inputs.json             four texts right-padded into one batch: lengths 6, 3, 14 and 1 (the
                          14-token one is longer than max_len, so fastai pools only over its
                          last chunks: positions 8..13),
  reference.safetensors   `logits` [4, 3]: each text classified alone by fastai (a batch of
                          one, no padding: fastai's padded batches move tokens around chunk
                          boundaries, which Sesame does not reproduce), `pooled` [4, 24] the
                          concat pools [last, max, mean] of the same runs,
  options.json            the seq_len (bptt) and max_len to convert with.

Weights are drawn wider than fastai's initialisation (embeddings U(±0.1), LSTMs U(±1/√n)) so
that every layer moves the outputs; BatchNorm's statistics and affine parameters are random.

Made with fastai 2.7.18 (installed with --no-deps beside torch 2.15.0; its other imports:
fastcore 1.7.29, fastprogress, fastdownload, pandas, scikit-learn, matplotlib, pillow, scipy).
Run from the repository root:  python tests/reference/make_awd_lstm_fastai_fixtures.py
"""

import json
import os
import warnings

import torch
from safetensors.torch import save_file

warnings.filterwarnings("ignore")
from fastai.text.all import AWD_LSTM, get_language_model, get_text_classifier, masked_concat_pool  # noqa: E402

from make_awd_lstm_fixtures import VOCAB  # noqa: E402

OUT = os.path.join("tests", "fixtures", "awd_lstm")
ENCODER = dict(emb_sz=8, n_hid=12, n_layers=3, pad_token=1, bidir=False, hidden_p=0.15, input_p=0.25, embed_p=0.02, weight_p=0.2)
PAD = 1


def widen(model, seed):
    """Every parameter redrawn with std 0.4 (biases 0.2); BatchNorm weights 1 ± 0.5 and
    running statistics random."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 0.2 if name.endswith("bias") else 0.4
            p.copy_(std * torch.randn(p.shape, generator=g))
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm1d):
                module.weight.copy_(0.5 + torch.rand(module.weight.shape, generator=g))
                module.running_mean.copy_(0.3 * torch.randn(module.running_mean.shape, generator=g))
                module.running_var.copy_(0.5 + torch.rand(module.running_var.shape, generator=g))


def save_state(model, out):
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out, "state_dict.safetensors"))
    with open(os.path.join(out, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    return state


def language_model():
    out = os.path.join(OUT, "fastai-lm")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    lm = get_language_model(AWD_LSTM, len(VOCAB), config=dict(ENCODER, output_p=0.1, tie_weights=True, out_bias=True))
    widen(lm, 1)
    state = save_state(lm, out)
    assert "0.rnns.0.module.weight_hh_l0" not in state and "0.encoder_dp.emb.weight" in state
    layers = {}
    for i, rnn in enumerate(lm[0].rnns):
        rnn.register_forward_hook(lambda module, inputs, output, i=i: layers.__setitem__(i, output[0]))
    ids = [[2, 9, 10, 11, 12, 13], [2, 14, 8, 15, 16, 17]]
    lm.eval()
    lm.reset()
    with torch.no_grad():
        logits, raw, _ = lm(torch.tensor(ids))
        reference = {"logits": logits, "last_hidden_state": raw, "hidden_states.0": lm[0].encoder(torch.tensor(ids))}
    reference.update({f"hidden_states.{i + 1}": h for i, h in layers.items()})
    save_file({k: v.float().contiguous() for k, v in reference.items()}, os.path.join(out, "reference.safetensors"))
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump({"input_ids": ids, "attention_mask": [[1] * len(r) for r in ids]}, f)
    print(f"{out}: {len(state)} tensors, logits {tuple(logits.shape)}")


def classifier():
    out = os.path.join(OUT, "fastai-classifier")
    os.makedirs(out, exist_ok=True)
    bptt, max_len = 4, 8
    torch.manual_seed(0)
    clf = get_text_classifier(AWD_LSTM, len(VOCAB), 3, seq_len=bptt, config=dict(ENCODER), lin_ftrs=[10], ps=[0.1], max_len=max_len)
    widen(clf, 2)
    state = save_state(clf, out)
    texts = [[2, 9, 10, 11, 12, 13], [2, 14, 8], [2, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27], [2]]
    clf.eval()
    logits, pooled = [], []
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([text])
            logits.append(clf(ids)[0][0])
            encoded, mask = clf[0](ids)
            pooled.append(masked_concat_pool(encoded, mask, bptt)[0])
    reference = {"logits": torch.stack(logits), "pooled": torch.stack(pooled)}
    save_file({k: v.float().contiguous() for k, v in reference.items()}, os.path.join(out, "reference.safetensors"))
    seq = max(len(t) for t in texts)
    with open(os.path.join(out, "inputs.json"), "w") as f:
        json.dump({"input_ids": [t + [PAD] * (seq - len(t)) for t in texts], "attention_mask": [[1] * len(t) + [0] * (seq - len(t)) for t in texts]}, f)
    with open(os.path.join(out, "labels.txt"), "w") as f:
        f.write("negative\nneutral\npositive\n")
    with open(os.path.join(out, "options.json"), "w") as f:
        json.dump({"bptt": bptt, "max_len": max_len}, f)
    print(f"{out}: {len(state)} tensors, logits {tuple(reference['logits'].shape)}")


if __name__ == "__main__":
    language_model()
    classifier()
