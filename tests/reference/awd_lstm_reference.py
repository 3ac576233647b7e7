"""AWD-LSTM (Merity et al. 2017, "Regularizing and Optimizing LSTM Language Models") at
inference, written from the paper in float64 with fastai's parameter names (the layout
ULMFiT's released models use): embeddings E [vocab, emb]; L single-direction LSTM layers
emb -> n_hid -> ... -> n_hid -> emb, layer l's weights under `0.rnns.{l}.` with the recurrent
matrix kept as `weight_hh_l0_raw` (the weight-dropped one in training) and the rest under
`module.`; the decoder logits = h W^T + b with W = E when tied (Inan et al. 2017, Press &
Wolf 2017). Dropout is training-only, so none of it appears here.

Each LSTM layer, from zero state, gates in PyTorch's order (input, forget, cell, output):
    [i, f, g, o] = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh
    c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g);  h_t = sigmoid(o) tanh(c_t)
Batches are right-padded: a sequence's layers are 0 past its length.
"""

import torch


def lstm_layer(x, lengths, w_ih, b_ih, w_hh, b_hh):
    """x [B, T, in] -> h [B, T, hidden], 0 past each length; float64 throughout."""
    batch, seq, _ = x.shape
    hidden = w_hh.shape[1]
    out = torch.zeros(batch, seq, hidden, dtype=torch.float64)
    for b in range(batch):
        h = torch.zeros(hidden, dtype=torch.float64)
        c = torch.zeros(hidden, dtype=torch.float64)
        for t in range(lengths[b]):
            pre = w_ih @ x[b, t] + b_ih + w_hh @ h + b_hh
            i, f, g, o = pre.split(hidden)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out[b, t] = h
    return out


def encoder_layers(state, input_ids, lengths, prefix="0."):
    """The embeddings and every layer's output, [B, T, size] each, of fastai's AWD_LSTM under
    `prefix` in `state` (a dict of tensors)."""
    sd = {k: v.double() for k, v in state.items()}
    ids = torch.tensor(input_ids)
    x = sd[prefix + "encoder.weight"][ids]
    layers = [x]
    n_layers = sum(1 for k in sd if k.startswith(prefix + "rnns.") and k.endswith(".weight_hh_l0_raw"))
    for l in range(n_layers):
        rnn = f"{prefix}rnns.{l}."
        x = lstm_layer(x, lengths, sd[rnn + "module.weight_ih_l0"], sd[rnn + "module.bias_ih_l0"],
                       sd[rnn + "weight_hh_l0_raw"], sd[rnn + "module.bias_hh_l0"])
        layers.append(x)
    return layers


def lm_logits(state, last, tie_weights=True):
    """The decoder: last [B, T, emb] -> logits [B, T, vocab]."""
    sd = {k: v.double() for k, v in state.items()}
    weight = sd["0.encoder.weight"] if tie_weights else sd["1.decoder.weight"]
    logits = last @ weight.T
    if "1.decoder.bias" in sd:
        logits = logits + sd["1.decoder.bias"]
    return logits
