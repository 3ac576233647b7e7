"""CoVe (McCann et al. 2017, "Learned in Translation") written from the paper in plain torch,
float64: the attentional sequence-to-sequence model whose encoder is CoVe's MT-LSTM (section
3), and a classifier over CoVe's features (section 4: the simpler, pooled one; the paper's is
a biattentive classification network).

  encoder   H = MT-LSTM(GloVe(w^x)): a two-layer bidirectional nn.LSTM over the source words'
            vectors, run per sequence (packed), H [B, S, 2h], 0 past each source's length.
  decoder   a two-layer unidirectional LSTM of width d = 2h with input feeding:
              h_t^dec = LSTM([z_{t-1}; h~_{t-1}], h_{t-1}^dec)      (h~_0 = 0, zero state)
            where z_{t-1} is the embedding of the previous target word (<s> first);
  attention alpha_t = softmax(H (W_1 h_t^dec + b_1)) over the source's own positions,
            h~_t = tanh(W_2 [H^T alpha_t; h_t^dec] + b_2);
  output    p(y_t | ...) = softmax(W_out h~_t + b_out).

The paper's equations name no initial decoder state: it is zero here (OpenNMT-py, which
the release was trained with, starts from the encoder's final states).

Parameters (the names Sesame's checkpoints use): vectors.weight, rnn.* (nn.LSTM's names,
as the MT-LSTM release), decoder.embeddings.weight, decoder.rnn.{weight_ih,weight_hh,
bias_ih,bias_hh}_l{k} (nn.LSTM's, layer 0 reading [z; h~]), decoder.attention.linear_in.
{weight,bias} (W_1, b_1), decoder.attention.linear_out.{weight,bias} (W_2, b_2 over
[context; h^dec]), generator.{weight,bias} (W_out, b_out).

The loss is the cross entropy of every target token (labels: the next word, -100 past the
end), averaged over the scored tokens.

The classifier reads [GloVe(w); CoVe(w)] of each text's own words, pools them as ULMFiT does
([h_last; max; mean]), then pre_classifier (Linear), ReLU, classifier (Linear); the mean cross
entropy of the labels. The encoder is fixed (the paper keeps CoVe's weights for its tasks).
"""

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def lstm_direction(x, lengths, w_ih, w_hh, b_ih, b_hh, reverse):
    """One direction of an nn.LSTM layer over a right-padded batch, each sequence its own
    length (as packed sequences run); 0 past each length."""
    batch, seq, _ = x.shape
    hidden = w_hh.shape[1]
    out = x.new_zeros(batch, seq, hidden)
    for b, n in enumerate(lengths):
        h = x.new_zeros(hidden)
        c = x.new_zeros(hidden)
        steps = range(n - 1, -1, -1) if reverse else range(n)
        for t in steps:
            i, f, g, o = (x[b, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh).chunk(4)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out[b, t] = h
    return out


def encode(params, src_ids, src_lengths, layers=2):
    """H [B, S, 2h]: the MT-LSTM over the source vectors."""
    x = params["vectors.weight"][src_ids]
    for k in range(layers):
        p = lambda name, suffix: params[f"rnn.{name}_l{k}{suffix}"]
        parts = [lstm_direction(x, src_lengths, p("weight_ih", s), p("weight_hh", s), p("bias_ih", s), p("bias_hh", s), s == "_reverse")
                 for s in ("", "_reverse")]
        x = torch.cat(parts, dim=-1)
    return x


def encode_packed(params, src_ids, src_lengths, layers=2):
    """The same through nn.LSTM and packed sequences (salesforce/cove's MTLSTM), to check
    `encode` against."""
    e, h = params["vectors.weight"].shape[1], params["rnn.weight_hh_l0"].shape[1]
    lstm = torch.nn.LSTM(e, h, num_layers=layers, bidirectional=True, batch_first=True).double()
    with torch.no_grad():
        for name, p in lstm.named_parameters():
            p.copy_(params["rnn." + name])
    x = params["vectors.weight"][src_ids]
    lens, order = torch.sort(torch.tensor(src_lengths), 0, True)
    out, _ = lstm(pack_padded_sequence(x[order], lens.tolist(), batch_first=True))
    return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0][torch.sort(order, 0)[1]]


def decode(params, enc, src_lengths, decoder_input_ids, layers=2):
    """The decoder with input feeding under teacher forcing: logits [B, T, V_target]."""
    batch, steps = decoder_input_ids.shape
    d = params["decoder.rnn.weight_hh_l0"].shape[1]
    z = params["decoder.embeddings.weight"][decoder_input_ids]
    mask = torch.arange(enc.shape[1])[None, :] < torch.tensor(src_lengths)[:, None]
    h = [enc.new_zeros(batch, d) for _ in range(layers)]
    c = [enc.new_zeros(batch, d) for _ in range(layers)]
    feed = enc.new_zeros(batch, d)
    outputs = []
    for t in range(steps):
        x = torch.cat([z[:, t], feed], dim=-1)
        for k in range(layers):
            p = lambda name: params[f"decoder.rnn.{name}_l{k}"]
            i, f, g, o = (x @ p("weight_ih").T + p("bias_ih") + h[k] @ p("weight_hh").T + p("bias_hh")).chunk(4, dim=-1)
            c[k] = torch.sigmoid(f) * c[k] + torch.sigmoid(i) * torch.tanh(g)
            h[k] = torch.sigmoid(o) * torch.tanh(c[k])
            x = h[k]
        query = x @ params["decoder.attention.linear_in.weight"].T + params["decoder.attention.linear_in.bias"]
        scores = torch.einsum("bsd,bd->bs", enc, query).masked_fill(~mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)
        context = torch.einsum("bs,bsd->bd", alpha, enc)
        feed = torch.tanh(torch.cat([context, x], dim=-1) @ params["decoder.attention.linear_out.weight"].T
                          + params["decoder.attention.linear_out.bias"])
        outputs.append(feed)
    return torch.stack(outputs, dim=1) @ params["generator.weight"].T + params["generator.bias"]


def translate_greedy(params, src_ids, src_lengths, start, eos, max_words, layers=2):
    """Greedy decoding: from <s>, each step's most likely word is the next step's input,
    until </s> or max_words steps. Per row: the words (without <s> and </s>) and each step's
    margin between the best and second-best logit."""
    enc = encode(params, src_ids, src_lengths)
    out = []
    for b in range(src_ids.shape[0]):
        words, margins, previous = [], [], start
        for _ in range(max_words):
            logits = decode(params, enc[b:b + 1], src_lengths[b:b + 1], torch.tensor([[start] + words]), layers)[0, -1]
            top = torch.topk(logits, 2).values
            margins.append((top[0] - top[1]).item())
            best = int(logits.argmax())
            if best == eos:
                break
            words.append(best)
        out.append((words, margins))
    return out


def loss(params, src_ids, src_lengths, decoder_input_ids, labels):
    """The mean cross entropy of the scored target tokens."""
    logits = decode(params, encode(params, src_ids, src_lengths), src_lengths, decoder_input_ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def classifier_logits(params, ids, lengths):
    """The pooled classifier's logits [B, labels]."""
    features = torch.cat([params["vectors.weight"][ids], encode(params, ids, lengths)], dim=-1)
    pooled = []
    for b, n in enumerate(lengths):
        x = features[b, :n]
        pooled.append(torch.cat([x[n - 1], x.max(dim=0).values, x.mean(dim=0)]))
    hidden = torch.relu(torch.stack(pooled) @ params["pre_classifier.weight"].T + params["pre_classifier.bias"])
    return hidden @ params["classifier.weight"].T + params["classifier.bias"]


def classifier_loss(params, ids, lengths, labels):
    return F.cross_entropy(classifier_logits(params, ids, lengths), labels)
