"""Cross-view training's sequence tagger (Clark, Luong, Manning & Le 2018, "Semi-Supervised
Sequence Modeling with Cross-View Training"), written from the paper and the semantics of the
authors' TensorFlow code (tensorflow/models research/cvt_text), in float64, under the
parameter names Sesame's `cvt` family stores.

Input. Each sentence is `<start> w_1 … w_n <end>`. A word's id is that of its normalised
form (lower-cased, every digit 0; `<unk>` otherwise); its characters are its UTF-8 bytes
(case and digits kept), laid out in a row of max_word_length + 4 ids:
    [PAD, START, b_1 + 5, …, b_k + 5, END, PAD, …]     (k = min(bytes, max_word_length))
with ids PAD 0, UNK 1, START 2, END 3, MISSING 4 (the row of `<start>`, `<end>` and padding
is [PAD, START, MISSING, END, PAD, …]). Rows always have the same length; cvt_text sizes them
to the batch's longest word (≤ 20), which makes a word's vector depend on its batch.

Word representation. x = [emb_scale · E[w]; cnn_2; cnn_3; …] where each cnn_k is a
`valid` convolution of width k (char_filters filters, with bias) over the character
embeddings C[c], ReLU, then the max over all of the row's windows.

Encoder. Two bidirectional LSTM layers with output projection (TF's LSTMCell with num_proj,
no peepholes, no clipping): per direction, from zero state,
    [i, f, g, o] = W_ih x_t + W_hh h_{t-1} + b      (PyTorch's gate order; cvt_text's
                                                     forget_bias 1 is part of b at init)
    c_t = σ(f) c_{t-1} + σ(i) tanh(g);  h_t = W_hr (σ(o) tanh(c_t))
The backward direction reads each sentence reversed within its length. Layer 1 reads x and
gives fw1, bw1; layer 2 reads [fw1; bw1] and gives fw2, bw2. Outputs are 0 past the length.

Prediction modules (no parameters shared; each `hidden` then `output` Linear with bias):
    primary   : output(ReLU(hidden([fw1; bw1; fw2; bw2])))   the tagger's logits
    full      : output(hidden([fw1; bw1; fw2; bw2]))          no ReLU
    forwards  : output(ReLU(hidden(fw1)))    predicts y_t
    backwards : output(ReLU(hidden(bw1)))    predicts y_t
    future    : output(ReLU(hidden(fw1)))    at t predicts y_{t+1} (sees only words < t+1)
    past      : output(ReLU(hidden(bw1)))    at t predicts y_{t-1} (sees only words > t-1)
(cvt_text's primary and full sum one Linear per input, two biases; one Linear over the
concatenation is the same function with their sum as its bias.)

Training (see `labeled_loss`, `unlabeled_loss`). A labelled batch's loss is the primary
module's cross entropy against the gold tags smoothed by 0.1, averaged over the real words of
the batch (`<start>`, `<end>` and padding masked). An unlabelled batch first runs the primary
module without dropout — the teacher, a constant — then, on one pass of the encoder under
dropout, sums over full, forwards, backwards, future and past each one's divergence from the
teacher's probabilities (at its shifted position: the mask is mask_t · mask_{t±1}), each
averaged over its own positions. Batches alternate 1:1. cvt_text minimises the cross entropy
against the teacher; its KL divergence, used here, differs by the teacher's entropy, a
constant: the same gradients, and 0 when a view agrees with the teacher.

Dropout has one rate — 0.5 on labelled batches, 0.2 on unlabelled ones — and sits where
cvt_text puts it, in its order: the word embeddings (before emb_scale), the character CNN's
output, then per layer the forward and the backward direction's outputs at every step (TF's
DropoutWrapper(output_keep_prob): the recurrence reads the undropped state). `forward` draws
its masks in that order from any source; with Sesame's (common.SesameMasks: the n-th mask of a
forward is site n) they are sites 0 (embeddings), 1 (CNN) and 2 + 2·layer + direction.
"""

import torch

PAD, UNK, START, END, MISSING = 0, 1, 2, 3, 4
CHAR_VOCAB = 256 + 5
MODULES = ["primary", "full", "forwards", "backwards", "future", "past"]
# The target shift of each auxiliary module: at position t it predicts y_{t + shift}.
SHIFT = {"primary": 0, "full": 0, "forwards": 0, "backwards": 0, "future": 1, "past": -1}
FILTER_WIDTHS = [2, 3, 4]


def normalize_word(word):
    return "".join("0" if ch.isdigit() else ch for ch in word.lower())


def char_row(word, max_word_length):
    """The character ids of one word ([PAD, START, MISSING, END, …] for None: a sentence
    boundary or padding)."""
    row = [PAD] * (max_word_length + 4)
    body = [MISSING] if word is None else [b + 5 for b in word.encode("utf-8")[:max_word_length]]
    row[1 : 3 + len(body)] = [START] + body + [END]
    return row


def encode(sentences, vocab, max_word_length):
    """Sentences (lists of words) -> word ids [B, T], char ids [B, T, L + 4], lengths (with
    <start> and <end>), right-padded with <pad> (id 0)."""
    index = {w: i for i, w in enumerate(vocab)}
    seq = max(len(s) for s in sentences) + 2
    ids, chars, lengths = [], [], []
    for s in sentences:
        words = [index["<start>"]] + [index.get(normalize_word(w), index["<unk>"]) for w in s] + [index["<end>"]]
        rows = [char_row(None, max_word_length)] + [char_row(w, max_word_length) for w in s] + [char_row(None, max_word_length)]
        pad = seq - len(words)
        ids.append(words + [index["<pad>"]] * pad)
        chars.append(rows + [char_row(None, max_word_length)] * pad)
        lengths.append(len(words))
    return torch.tensor(ids), torch.tensor(chars), lengths


def lstm_direction(x, lengths, w_ih, w_hh, b, w_hr, reverse):
    """One direction of a projected LSTM layer: x [B, T, in] -> [B, T, proj], 0 past each
    length; `reverse` reads each sequence backwards within its length."""
    batch, seq, _ = x.shape
    cell, proj = w_hh.shape[0] // 4, w_hr.shape[0]
    out = torch.zeros(batch, seq, proj, dtype=x.dtype)
    for n in range(batch):
        h, c = torch.zeros(proj, dtype=x.dtype), torch.zeros(cell, dtype=x.dtype)
        steps = range(lengths[n] - 1, -1, -1) if reverse else range(lengths[n])
        for t in steps:
            i, f, g, o = (w_ih @ x[n, t] + w_hh @ h + b).split(cell)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = w_hr @ (torch.sigmoid(o) * torch.tanh(c))
            out[n, t] = h
    return out


def dropout(x, p, masks):
    """Inverted dropout of rate p: x times a mask of 0 (probability p) and 1 / (1 - p), the
    next that `masks.mask(shape, p)` draws. Nothing is dropped when p is 0 or `masks` None."""
    if p == 0.0 or masks is None:
        return x
    return x * masks.mask(tuple(x.shape), p).to(x.dtype)


def forward(state, word_ids, char_ids, lengths, p=0.0, masks=None):
    """Every module's logits [B, T, labels] and the hidden states (word representation, layer
    1 [fw; bw], layer 2 [fw; bw]); when training, dropout p with masks drawn from `masks`."""
    sd = state
    emb = dropout(sd["word_embeddings.weight"][word_ids], p, masks) * sd["emb_scale"]
    batch, seq, width = char_ids.shape
    chars = sd["char_embeddings.weight"][char_ids.reshape(batch * seq, width)]  # [N, L, C]
    pooled = []
    for k in range(len(FILTER_WIDTHS)):
        conv = torch.nn.functional.conv1d(chars.transpose(1, 2), sd[f"char_cnn.{k}.weight"], sd[f"char_cnn.{k}.bias"])
        pooled.append(torch.relu(conv).max(dim=2).values.reshape(batch, seq, -1))
    # cvt_text drops each width's output with its own call: one mask over their concatenation
    # drops every entry just as independently, in one draw.
    x = torch.cat([emb, dropout(torch.cat(pooled, dim=-1), p, masks)], dim=-1)
    hidden = [x]
    directions = {}
    for layer in range(2):
        outs = []
        for suffix, reverse in (("", False), ("_reverse", True)):
            name = f"encoder.{layer}."
            h = lstm_direction(
                x, lengths, sd[name + "weight_ih" + suffix], sd[name + "weight_hh" + suffix], sd[name + "bias" + suffix], sd[name + "weight_hr" + suffix], reverse
            )
            outs.append(dropout(h, p, masks))
        directions[layer] = outs
        x = torch.cat(outs, dim=-1)
        hidden.append(x)
    (fw1, bw1), (fw2, bw2) = directions[0], directions[1]
    inputs = {
        "primary": torch.cat([fw1, bw1, fw2, bw2], dim=-1),
        "full": torch.cat([fw1, bw1, fw2, bw2], dim=-1),
        "forwards": fw1,
        "backwards": bw1,
        "future": fw1,
        "past": bw1,
    }
    logits = {}
    for module, z in inputs.items():
        h = z @ sd[f"{module}.hidden.weight"].T + sd[f"{module}.hidden.bias"]
        if module != "full":
            h = torch.relu(h)
        logits[module] = h @ sd[f"{module}.output.weight"].T + sd[f"{module}.output.bias"]
    return logits, hidden


def word_mask(lengths, seq):
    """1 at the real words (not <start>, <end> or padding) [B, T]."""
    mask = torch.zeros(len(lengths), seq, dtype=torch.float64)
    for n, length in enumerate(lengths):
        mask[n, 1 : length - 1] = 1.0
    return mask


def shifted(x, shift):
    """x[:, t + shift] at t (cvt_text's roll: wraps around, the mask removes the wrap)."""
    return torch.roll(x, -shift, dims=1)


def masked_ce(logits, targets, mask):
    """Σ mask · (−Σ_k q_k log p_k) / Σ mask, targets q [B, T, labels]."""
    ce = -(targets * torch.log_softmax(logits, dim=-1)).sum(-1)
    return (mask * ce).sum() / mask.sum()


def labeled_loss(logits, labels, lengths, num_labels, smoothing):
    """The primary module's smoothed cross entropy; `labels` [B, T] (any value off the words)."""
    mask = word_mask(lengths, labels.shape[1])
    one_hot = torch.nn.functional.one_hot(labels, num_labels).to(torch.float64)
    return masked_ce(logits["primary"], one_hot * (1 - smoothing) + smoothing / num_labels, mask)


def unlabeled_loss(logits, teacher_probs, lengths):
    """Σ over the auxiliary modules of KL(teacher ‖ module) at their shifted positions."""
    mask = word_mask(lengths, teacher_probs.shape[1])
    entropy = -(teacher_probs * torch.log(teacher_probs)).sum(-1)
    total = 0.0
    for module in MODULES[1:]:
        s = SHIFT[module]
        positions = mask * shifted(mask, s)
        cross = masked_ce(logits[module], shifted(teacher_probs, s), positions)
        total = total + cross - (positions * shifted(entropy, s)).sum() / positions.sum()
    return total
