"""A self-contained PyTorch ELMo (Peters et al. 2018, "Deep contextualized word
representations"), written from the published architecture so the fixtures need neither
AllenNLP nor TensorFlow. Its state_dict() names are AllenNLP `Elmo`'s, so a checkpoint
converted from a release weights.hdf5 loads here unchanged.

What it follows, and where AllenNLP and bilm-tf differ:
- character ids as AllenNLP's ELMoCharacterMapper / batch_to_ids (UTF-8 bytes, 50 per token,
  +1 so 0 is padding; "<S>" and "</S>" become the sentence boundary arrays);
- forward pass as AllenNLP's Elmo in eval mode (no dropout) on a fresh module (its biLM is
  stateful across calls; every call here starts from zero states), scalar mixes without
  layer norm, boundaries removed, padded positions 0 in every layer (bilm-tf leaves the
  token layer unmasked there);
- options as bilm-tf reads them: use_skip_connections false and absent cell_clip /
  proj_clip are honoured (AllenNLP refuses the first and needs both clip keys).

Also the bilm-tf weights.hdf5 layout: from_bilm_tf is AllenNLP's loader, to_bilm_tf its
exact inverse.
"""

import json

import numpy as np
import torch
from torch import nn

MAX_CHARS = 50  # ELMoCharacterMapper.max_word_length; the released options all say 50 too
BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
BOS_TOKEN, EOS_TOKEN = "<S>", "</S>"


def _boundary_ids(char):
    ids = [PAD_CHAR] * MAX_CHARS
    ids[0], ids[1], ids[2] = BOW_CHAR, char, EOW_CHAR
    return [c + 1 for c in ids]


BOS_IDS = _boundary_ids(BOS_CHAR)
EOS_IDS = _boundary_ids(EOS_CHAR)


def word_char_ids(word):
    """50 ids for one token: begin-of-word, the first 48 UTF-8 bytes (a multi-byte character
    may be cut), end-of-word, padding; all +1. The strings "<S>" and "</S>" map to the
    sentence boundary arrays, as in ELMoCharacterMapper."""
    if word == BOS_TOKEN:
        return list(BOS_IDS)
    if word == EOS_TOKEN:
        return list(EOS_IDS)
    data = word.encode("utf-8", "ignore")[: MAX_CHARS - 2]
    ids = [BOW_CHAR] + list(data) + [EOW_CHAR]
    ids += [PAD_CHAR] * (MAX_CHARS - len(ids))
    return [c + 1 for c in ids]


def batch_char_ids(sentences):
    """[B][T][50] for a batch, T the longest sentence; padded tokens are all-zero rows
    (batch_to_ids). No boundary tokens: the model adds them."""
    longest = max(len(s) for s in sentences)
    return [[word_char_ids(w) for w in s] + [[0] * MAX_CHARS] * (longest - len(s)) for s in sentences]


def add_boundaries(char_ids, lengths):
    """[B, T, 50] -> [B, T+2, 50]: BOS first, the tokens, EOS right after each sentence's last
    token; rows past it keep the input's (zero) padding."""
    b, t, c = char_ids.shape
    out = char_ids.new_zeros(b, t + 2, c)
    out[:, 1:-1] = char_ids
    out[:, 0] = torch.tensor(BOS_IDS, dtype=char_ids.dtype)
    for i, n in enumerate(lengths.tolist()):
        out[i, n + 1] = torch.tensor(EOS_IDS, dtype=char_ids.dtype)
    return out


def remove_boundaries(x, lengths):
    """[B, T+2, ...] -> [B, T, ...]: position 0 and each sentence's EOS dropped, rows shifted
    left, padded positions 0. lengths counts tokens without the boundaries."""
    out = x.new_zeros((x.shape[0], x.shape[1] - 2) + tuple(x.shape[2:]))
    for i, n in enumerate(lengths.tolist()):
        out[i, :n] = x[i, 1 : n + 1]
    return out


class Highway(nn.Module):
    """AllenNLP's Highway: one Linear to [nonlinear | gate] halves; the activation is always
    relu (the options' activation is only the CNN's); y = g*x + (1-g)*relu(A x)."""

    def __init__(self, dim, n_layers):
        super().__init__()
        self._layers = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(n_layers)])

    def forward(self, x):
        d = x.shape[-1]
        for layer in self._layers:
            proj = layer(x)
            nonlinear, gate = torch.relu(proj[..., :d]), torch.sigmoid(proj[..., d:])
            x = gate * x + (1 - gate) * nonlinear
        return x


class CharEncoder(nn.Module):
    """Context-independent token vectors: char embedding, one valid conv1d per filter width,
    max over positions, activation, concat, highways, projection."""

    def __init__(self, options):
        super().__init__()
        cnn = options["char_cnn"]
        self.max_chars = cnn["max_characters_per_token"]
        self.activation = {"relu": torch.relu, "tanh": torch.tanh}[cnn["activation"]]
        dim = cnn["embedding"]["dim"]
        n_filters = sum(n for _, n in cnn["filters"])
        # Row 0 is the padding id's (zeros); the file's 261 rows are ids 1..261.
        self._char_embedding_weights = nn.Parameter(torch.zeros(cnn["n_characters"], dim))
        self.n_conv = len(cnn["filters"])
        for i, (width, num) in enumerate(cnn["filters"]):
            self.add_module(f"char_conv_{i}", nn.Conv1d(dim, num, width, bias=True))
        self._highways = Highway(n_filters, cnn.get("n_highway") or 0)
        self._projection = nn.Linear(n_filters, options["lstm"]["projection_dim"], bias=True)

    def forward(self, char_ids):
        """[B, T, 50] (boundaries included) -> [B, T, proj]."""
        b, t, c = char_ids.shape
        x = nn.functional.embedding(char_ids.reshape(b * t, c), self._char_embedding_weights)
        x = x.transpose(1, 2)  # [N, dim, chars]: Conv1d's layout
        convs = []
        for i in range(self.n_conv):
            y = getattr(self, f"char_conv_{i}")(x).max(dim=-1).values
            convs.append(self.activation(y))
        x = self._projection(self._highways(torch.cat(convs, dim=-1)))
        return x.reshape(b, t, -1)


class LstmWithProjection(nn.Module):
    """One direction of one layer (AllenNLP's LstmCellWithProjection): gates in the order
    input, forget, cell, output; c clipped, then h = W_p (o * tanh c), clipped."""

    def __init__(self, input_size, proj, cell, cell_clip, proj_clip):
        super().__init__()
        self.input_linearity = nn.Linear(input_size, 4 * cell, bias=False)
        self.state_linearity = nn.Linear(proj, 4 * cell, bias=True)
        self.state_projection = nn.Linear(cell, proj, bias=False)
        self.cell, self.proj = cell, proj
        # Falsy (absent or 0) means no clipping, as both AllenNLP and TF's LSTMCell do.
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.clip_hits = {"cell": 0, "proj": 0}  # how often each clip changed a value

    def forward(self, x, lengths, reverse):
        """x [B, T, in], lengths [B]. A sentence's state starts at zero at its first token
        (its last one going backwards) and is only updated over its own length; outputs are 0
        at padded positions. Every row steps together, masked: a batched computation that
        the fixture script checks against sentences run alone."""
        b, t, _ = x.shape
        h = x.new_zeros(b, self.proj)
        c = x.new_zeros(b, self.cell)
        out = x.new_zeros(b, t, self.proj)
        n = self.cell
        for step in (range(t - 1, -1, -1) if reverse else range(t)):
            valid = (step < lengths).unsqueeze(-1)
            z = self.input_linearity(x[:, step]) + self.state_linearity(h)
            i, f = torch.sigmoid(z[:, :n]), torch.sigmoid(z[:, n : 2 * n])
            g, o = torch.tanh(z[:, 2 * n : 3 * n]), torch.sigmoid(z[:, 3 * n :])
            c_new = i * g + f * c
            if self.cell_clip:
                self.clip_hits["cell"] += int((c_new.abs() > self.cell_clip)[valid.expand_as(c_new)].sum())
                c_new = c_new.clamp(-self.cell_clip, self.cell_clip)
            h_new = self.state_projection(o * torch.tanh(c_new))
            if self.proj_clip:
                self.clip_hits["proj"] += int((h_new.abs() > self.proj_clip)[valid.expand_as(h_new)].sum())
                h_new = h_new.clamp(-self.proj_clip, self.proj_clip)
            c = torch.where(valid, c_new, c)
            h = torch.where(valid, h_new, h)
            out[:, step] = torch.where(valid, h_new, torch.zeros_like(h_new))
        return out


class BiLstm(nn.Module):
    """Stacked biLSTM whose two directions never mix: layer i of a direction reads layer
    i-1 of the same direction. With skip connections each layer from index 1 on adds its
    input to its output (the recurrent state is the output before the addition)."""

    def __init__(self, options):
        super().__init__()
        lstm = options["lstm"]
        self.n_layers = lstm.get("n_layers", 1)
        self.skip = bool(lstm["use_skip_connections"])
        proj, cell = lstm["projection_dim"], lstm["dim"]
        for i in range(self.n_layers):
            for d in ("forward", "backward"):
                self.add_module(f"{d}_layer_{i}", LstmWithProjection(proj, proj, cell, lstm.get("cell_clip"), lstm.get("proj_clip")))

    def forward(self, x, lengths):
        """x [B, T, proj] -> list of n_layers [B, T, 2*proj] (forward | backward)."""
        mask = (torch.arange(x.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1).to(x.dtype)
        fwd, bwd, outputs = x, x, []
        for i in range(self.n_layers):
            f = getattr(self, f"forward_layer_{i}")(fwd, lengths, reverse=False)
            b = getattr(self, f"backward_layer_{i}")(bwd, lengths, reverse=True)
            if self.skip and i > 0:
                f, b = f + fwd * mask, b + bwd * mask
            fwd, bwd = f, b
            outputs.append(torch.cat([f, b], dim=-1))
        return outputs


class BiLm(nn.Module):
    """AllenNLP's _ElmoBiLm: char encoder (with boundaries added) then the biLSTM."""

    def __init__(self, options):
        super().__init__()
        self._token_embedder = CharEncoder(options)
        self._elmo_lstm = BiLstm(options)


class ScalarMix(nn.Module):
    """gamma * sum_j softmax(s)_j * layer_j (AllenNLP ScalarMix without layer norm)."""

    def __init__(self, n):
        super().__init__()
        self.scalar_parameters = nn.ParameterList([nn.Parameter(torch.zeros(1)) for _ in range(n)])
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, layers):
        w = torch.softmax(torch.cat(list(self.scalar_parameters)), dim=0)
        return self.gamma * sum(w[j] * layer for j, layer in enumerate(layers))


class Elmo(nn.Module):
    """AllenNLP's Elmo(options, weights, num_output_representations) in eval mode."""

    def __init__(self, options, n_mixes):
        super().__init__()
        self.options = options
        self._elmo_lstm = BiLm(options)
        self.n_mixes = n_mixes
        n_outputs = self._elmo_lstm._elmo_lstm.n_layers + 1
        for k in range(n_mixes):
            self.add_module(f"scalar_mix_{k}", ScalarMix(n_outputs))

    def forward(self, char_ids):
        """char_ids [B, T, 50] without boundaries (padded tokens all zero). Returns
        token_embedding [B, T+2, proj] (boundaries in, unmasked), layers: 2L+1 x [B, T, 2*proj]
        (boundaries out, padded positions 0), mask [B, T] and the scalar mixes."""
        lengths = (char_ids > 0).any(dim=-1).sum(dim=1)
        with_bounds = add_boundaries(char_ids, lengths)
        token = self._elmo_lstm._token_embedder(with_bounds)
        t2 = with_bounds.shape[1]
        mask2 = (torch.arange(t2).unsqueeze(0) < (lengths + 2).unsqueeze(1)).to(token.dtype)
        layers = [torch.cat([token, token], dim=-1) * mask2.unsqueeze(-1)]
        layers += self._elmo_lstm._elmo_lstm(token, lengths + 2)
        mixes = [getattr(self, f"scalar_mix_{k}")(layers) for k in range(self.n_mixes)]
        mask = (torch.arange(char_ids.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).to(token.dtype)
        return {
            "token_embedding": token,
            "layers": [remove_boundaries(x, lengths) for x in layers],
            "mask": mask,
            "mixes": [remove_boundaries(x, lengths) for x in mixes],
        }


def load_options(path):
    with open(path) as f:
        return json.load(f)


# --- bilm-tf weights.hdf5 <-> AllenNLP names --------------------------------------------
# TF keeps x @ W (so every matrix is stored transposed), packs an LSTM's input and recurrent
# kernels into one [in + proj, 4*cell] matrix with gates in the order input, cell (j),
# forget, output, and adds 1.0 to the forget pre-activation at run time (AllenNLP folds it
# into the bias). bilm-tf's highway is y = c*relu(W_t x) + (1-c)*x with c = sigmoid(W_c x):
# AllenNLP's gate g is 1-c = sigmoid(-W_c x), hence the negated carry weights.

LSTM_ROOT = "RNN_{d}/RNN/MultiRNNCell/Cell{i}/LSTMCell/"


def _lstm_names(options):
    for i in range(options["lstm"].get("n_layers", 1)):
        for d, direction in enumerate(("forward", "backward")):
            yield LSTM_ROOT.format(d=d, i=i), f"_elmo_lstm._elmo_lstm.{direction}_layer_{i}."


def _swap_middle_gates(a, cell):
    """i, j, f, o <-> i, f, j, o along axis 0 (its own inverse)."""
    return np.concatenate([a[:cell], a[2 * cell : 3 * cell], a[cell : 2 * cell], a[3 * cell :]], axis=0)


def from_bilm_tf(datasets, options):
    """{hdf5 dataset path: float32 array} -> AllenNLP state dict (float32 tensors), as
    AllenNLP's _ElmoCharacterEncoder._load_* and ElmoLstm.load_weights do. No scalar mixes."""
    cnn = options["char_cnn"]
    f32 = np.float32
    te = "_elmo_lstm._token_embedder."
    sd = {}
    emb = datasets["char_embed"]
    sd[te + "_char_embedding_weights"] = np.concatenate([np.zeros((1, emb.shape[1]), f32), emb])
    for i in range(len(cnn["filters"])):
        # [1, width, dim, count] -> Conv1d's [count, dim, width]
        sd[te + f"char_conv_{i}.weight"] = np.transpose(datasets[f"CNN/W_cnn_{i}"][0], (2, 1, 0))
        sd[te + f"char_conv_{i}.bias"] = datasets[f"CNN/b_cnn_{i}"]
    for k in range(cnn.get("n_highway") or 0):
        g = f"CNN_high_{k}/"
        sd[te + f"_highways._layers.{k}.weight"] = np.concatenate([datasets[g + "W_transform"].T, -datasets[g + "W_carry"].T])
        sd[te + f"_highways._layers.{k}.bias"] = np.concatenate([datasets[g + "b_transform"], -datasets[g + "b_carry"]])
    sd[te + "_projection.weight"] = datasets["CNN_proj/W_proj"].T
    sd[te + "_projection.bias"] = datasets["CNN_proj/b_proj"]
    cell, proj = options["lstm"]["dim"], options["lstm"]["projection_dim"]
    for src, dst in _lstm_names(options):
        w = datasets[src + "W_0"].T  # [4*cell, in + proj]
        sd[dst + "input_linearity.weight"] = _swap_middle_gates(w[:, :-proj], cell)
        sd[dst + "state_linearity.weight"] = _swap_middle_gates(w[:, -proj:], cell)
        bias = datasets[src + "B"].copy()
        bias[2 * cell : 3 * cell] += f32(1.0)  # float32 arithmetic, as AllenNLP's numpy does
        sd[dst + "state_linearity.bias"] = _swap_middle_gates(bias, cell)
        sd[dst + "state_projection.weight"] = datasets[src + "W_P_0"].T
    return {k: torch.from_numpy(np.ascontiguousarray(v, dtype=f32)) for k, v in sd.items()}


def to_bilm_tf(state_dict, options):
    """AllenNLP state dict -> {hdf5 dataset path: float32 array}, the inverse of
    from_bilm_tf. Exact when every forget-gate bias b satisfies 0.5 <= b <= 2: then b - 1 is
    exact in float32 (Sterbenz) and adding 1 back restores b."""
    cnn = options["char_cnn"]
    f32 = np.float32
    sd = {k: v.detach().cpu().numpy().astype(f32) for k, v in state_dict.items()}
    te = "_elmo_lstm._token_embedder."
    out = {}
    emb = sd[te + "_char_embedding_weights"]
    assert not emb[0].any(), "row 0 (padding) must be zero: bilm-tf has no such row"
    out["char_embed"] = emb[1:]
    for i in range(len(cnn["filters"])):
        out[f"CNN/W_cnn_{i}"] = np.transpose(sd[te + f"char_conv_{i}.weight"], (2, 1, 0))[None]
        out[f"CNN/b_cnn_{i}"] = sd[te + f"char_conv_{i}.bias"]
    for k in range(cnn.get("n_highway") or 0):
        w, b = sd[te + f"_highways._layers.{k}.weight"], sd[te + f"_highways._layers.{k}.bias"]
        d = w.shape[1]
        g = f"CNN_high_{k}/"
        out[g + "W_transform"], out[g + "b_transform"] = w[:d].T, b[:d]
        out[g + "W_carry"], out[g + "b_carry"] = -w[d:].T, -b[d:]
    out["CNN_proj/W_proj"] = sd[te + "_projection.weight"].T
    out["CNN_proj/b_proj"] = sd[te + "_projection.bias"]
    cell = options["lstm"]["dim"]
    for dst, src in _lstm_names(options):
        w = np.concatenate([sd[src + "input_linearity.weight"], sd[src + "state_linearity.weight"]], axis=1)
        out[dst + "W_0"] = _swap_middle_gates(w, cell).T
        bias = _swap_middle_gates(sd[src + "state_linearity.bias"], cell)
        forget = bias[2 * cell : 3 * cell]
        assert ((forget >= 0.5) & (forget <= 2)).all(), "forget bias outside [0.5, 2]: b - 1 would round"
        bias[2 * cell : 3 * cell] = forget - f32(1.0)
        out[dst + "B"] = bias
        out[dst + "W_P_0"] = sd[src + "state_projection.weight"].T
    return {k: np.ascontiguousarray(v, dtype=f32) for k, v in out.items()}


def write_hdf5(path, datasets):
    import h5py
    # track_times off: the file's bytes depend only on the weights.
    with h5py.File(path, "w") as f:
        for name in sorted(datasets):
            f.create_dataset(name, data=datasets[name], track_times=False)


def read_hdf5(path):
    import h5py
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
    return out
