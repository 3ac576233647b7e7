"""Writes the CoVe parity fixture under tests/fixtures/cove/tiny/: a random-weight MT-LSTM
encoder (McCann et al. 2017) as salesforce/cove's `MTLSTM` runs it — word vectors, then
`nn.LSTM(E, H, num_layers=2, bidirectional=True)` over packed ragged sequences — at E = 6,
H = 5 (the release: 300, 300):
  state_dict.safetensors  the LSTM's state dict as the release file holds it (`weight_ih_l0`,
                          …, `bias_hh_l1_reverse`; no prefix),
  glove.txt               GloVe's text format (a word and E numbers a line) for the
                          vocabulary's words but three (`<pad>` among them: they get zero
                          vectors), plus words
                          outside it, one of them containing a space as GloVe 840B has,
  vocab.txt, inputs.json  the vocabulary (`<unk>`, `<pad>`, words) and a ragged batch,
  reference.safetensors   last_hidden_state [B, T, 2H] (the MT-LSTM's output, 0 at padding),
                          hidden_states.0 (the vectors), .1 and .2 (each layer's [fwd; bwd]),
                          in float64 then stored float32.
Checks before writing: the two-layer LSTM equals its layers run one at a time (as the
per-layer outputs are taken), and each sequence alone equals its row of the batch.

Made with torch 2.15.0 and safetensors; no cove package (its forward is a dozen lines).
Run from the repository root:  python tests/reference/make_cove_fixtures.py
"""

import json
import os

import torch
from safetensors.torch import save_file
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from common import WORDS

OUT = os.path.join("tests", "fixtures", "cove", "tiny")
E, H = 6, 5
VOCAB = ["<unk>", "<pad>"] + WORDS[:22]
# In the vocabulary, not in glove.txt: their vectors are 0 (torchtext's default, and Sesame's).
MISSING = {"<pad>", "dog", "park"}
SEQUENCES = [[2, 3, 4, 5, 6, 7, 8], [9, 3], [10, 11, 12, 0, 13]]


def mtlstm(lstm, vectors, ids, lengths):
    """salesforce/cove's MTLSTM.forward: sort by length, pack, run, unpack, unsort."""
    x = vectors[torch.tensor(ids)]
    lens, order = torch.sort(torch.tensor(lengths), 0, True)
    out, _ = lstm(pack_padded_sequence(x[order], lens.tolist(), batch_first=True))
    out = pad_packed_sequence(out, batch_first=True)[0]
    return x, out[torch.sort(order, 0)[1]]


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(5)
    lstm = torch.nn.LSTM(E, H, num_layers=2, bidirectional=True, batch_first=True).double()
    with torch.no_grad():
        for p in lstm.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    # Rounded to float32, as glove.txt stores them.
    vectors = torch.randn(len(VOCAB), E, generator=g, dtype=torch.float64).float().double()
    for w in MISSING:
        vectors[VOCAB.index(w)] = 0.0
    seq = max(len(s) for s in SEQUENCES)
    input_ids = [s + [1] * (seq - len(s)) for s in SEQUENCES]
    lengths = [len(s) for s in SEQUENCES]
    with torch.no_grad():
        x, out = mtlstm(lstm, vectors, input_ids, lengths)
        # Layer by layer with the same weights, for hidden_states.1.
        first = torch.nn.LSTM(E, H, bidirectional=True, batch_first=True).double()
        second = torch.nn.LSTM(2 * H, H, bidirectional=True, batch_first=True).double()
        for name, p in lstm.named_parameters():
            layer = first if "_l0" in name else second
            getattr(layer, name.replace("_l1", "_l0")).copy_(p)
        _, layer1 = mtlstm(first, vectors, input_ids, lengths)
        lens, order = torch.sort(torch.tensor(lengths), 0, True)
        layer2, _ = second(pack_padded_sequence(layer1[order], lens.tolist(), batch_first=True))
        layer2 = pad_packed_sequence(layer2, batch_first=True)[0][torch.sort(order, 0)[1]]
        assert (layer2 - out).abs().max() < 1e-12
        for b, s in enumerate(SEQUENCES):
            _, alone = mtlstm(lstm, vectors, [s], [len(s)])
            assert (alone[0] - out[b, :len(s)]).abs().max() < 1e-12
    reference = {"last_hidden_state": out, "hidden_states.0": x, "hidden_states.1": layer1, "hidden_states.2": out}
    save_file({k: v.float().contiguous() for k, v in reference.items()}, os.path.join(OUT, "reference.safetensors"))
    save_file({k: v.float().contiguous() for k, v in lstm.state_dict().items()}, os.path.join(OUT, "state_dict.safetensors"))
    with open(os.path.join(OUT, "glove.txt"), "w") as f:
        extra = [("zebra", torch.ones(E)), (". . .", -torch.ones(E))]
        rows = [(w, vectors[i].float()) for i, w in enumerate(VOCAB) if w not in MISSING] + extra
        for w, v in rows:
            f.write(w + " " + " ".join(repr(float(x)) for x in v) + "\n")
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    with open(os.path.join(OUT, "inputs.json"), "w") as f:
        json.dump({"input_ids": input_ids, "attention_mask": [[1] * len(s) + [0] * (seq - len(s)) for s in SEQUENCES]}, f)
    print(f"{OUT}: {len(lstm.state_dict())} tensors, last_hidden_state {tuple(out.shape)}")


if __name__ == "__main__":
    main()
