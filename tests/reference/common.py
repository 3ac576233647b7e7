"""Helpers shared by the fixture scripts (torch 2.15.0, transformers 5.23.0): the fixtures'
vocabulary, randomised weights, reference outputs, and Sesame's dropout masks."""

import json
import os

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

# The fixtures' 99-token vocabulary: BERT's five special tokens, then lowercase words and
# punctuation (GPT's word-level tokenizer uses the same list, "<unk>" first).
WORDS = """the a cat dog sat on mat ran to park and saw big small red blue house tree bird sang
in morning night moon sun shone over hill river flowed past old mill children played with ball
while parents watched from bench quiet town slept under stars wind blew through leaves rain fell
softly roof fire warm kept us happy book read she he they we it was is are , . ! ? of for at
by green field walked across bridge long road home door window light dark cold day song little""".split()
assert len(WORDS) == 94, len(WORDS)
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
GPT_VOCAB = ["<unk>", "<pad>", "<s>", "</s>", "<mask>"] + WORDS


def write_bert_vocab(out_dir):
    """vocab.txt (one token per line) and the same WordPiece tokenizer as tokenizer.json (what
    the browser fetches first). Returns transformers' tokenizer of the same vocabulary."""
    path = os.path.join(out_dir, "vocab.txt")
    with open(path, "w") as f:
        f.write("\n".join(BERT_VOCAB) + "\n")
    transformers.BertTokenizerFast.from_pretrained(out_dir).backend_tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
    return transformers.BertTokenizer.from_pretrained(out_dir)


def write_gpt_tokenizer(out_dir):
    """tokenizer.json: word-level over GPT_VOCAB, split on whitespace and punctuation.
    Returns transformers' tokenizer loaded from it."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(GPT_VOCAB)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    return transformers.PreTrainedTokenizerFast(tokenizer_file=path, unk_token="<unk>", pad_token="<pad>")


OUTPUT_NAMES = ["logits", "prediction_logits", "seq_relationship_logits", "sop_logits", "start_logits",
                "end_logits", "last_hidden_state", "pooler_output"]


def randomize(model, seed, bias_std=0.1, weight_std=0.3):
    """LayerNorm gains 1 + 0.1 randn, biases bias_std randn, other weights weight_std randn
    (weights of order 1: transformers' init, std 0.02, would leave every layer near zero and
    make the comparison weak). weight_std=None keeps the model's own weights. LayerNorms are
    found by name: `LayerNorm`, `layer_norm` (RoBERTa's head, DistilBERT's, ALBERT's) or `ln_`."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            lower = name.lower()
            if "layernorm.weight" in lower or "layer_norm.weight" in lower or (".ln_" in name and name.endswith("weight")):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(bias_std * torch.randn(p.shape, generator=g))
            elif weight_std is not None:
                p.copy_(weight_std * torch.randn(p.shape, generator=g))


def write_fixture(model, out_dir, inputs, max_shard_size=None):
    """Saves the checkpoint (sharded in files of at most `max_shard_size`, when given),
    inputs.json and reference.safetensors (every output of a forward pass with hidden states
    and attentions, named as the output object's fields)."""
    sharding = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(out_dir, safe_serialization=True, **sharding)
    with open(os.path.join(out_dir, "inputs.json"), "w") as f:
        json.dump(inputs, f)
    tensors = {k: torch.tensor(v) for k, v in inputs.items()}
    with torch.no_grad():
        result = model(**tensors, output_hidden_states=True, output_attentions=True)
    outputs = {}
    for name in OUTPUT_NAMES:
        value = getattr(result, name, None)
        if value is not None:
            outputs[name] = value.float().clone()
    for j, h in enumerate(result.hidden_states):
        outputs[f"hidden_states.{j}"] = h.float().clone()
    for j, a in enumerate(result.attentions):
        outputs[f"attentions.{j}"] = a.float().clone()
    save_file(outputs, os.path.join(out_dir, "reference.safetensors"))
    return sorted(outputs)


def check_finite_difference(model, name, loss, eps=1e-5):
    """Central difference of `loss()` (a float of the model's current parameters) on the entry
    of parameter `name` with the largest |grad|, which must agree to 1e-6 relative."""
    p = dict(model.named_parameters())[name]
    k = int(p.grad.abs().argmax())
    analytic = float(p.grad.flatten()[k])
    with torch.no_grad():
        values = []
        for sign in (1, -1):
            saved = float(p.view(-1)[k])
            p.view(-1)[k] = saved + sign * eps
            values.append(loss())
            p.view(-1)[k] = saved
    numeric = (values[0] - values[1]) / (2 * eps)
    rel = abs(numeric - analytic) / abs(analytic)
    assert rel < 1e-6, f"finite difference {name}[{k}]: {numeric} vs {analytic} (rel {rel:.1e})"
    return f"{name}[{k}] {analytic:.6e} rel {rel:.1e}"


M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF


def fmix32(h):
    """MurmurHash3's 32-bit finalizer on a uint64 array holding u32 values."""
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def sesame_mask(seed, batch_index, site, shape, p):
    """The factors of Sesame's dropout mask (src/ops/dropout.rs, bit for bit), a float32
    tensor of `shape`: site `site` of micro-batch `batch_index` of a run seeded `seed` has key
    splitmix(splitmix(splitmix(seed) ^ batch_index) ^ site); the entry at row-major index j is
    kept iff fmix32(fmix32(j * 0x9E3779B1 + key_lo) ^ key_hi) >= round(p * 2^32), and a kept
    entry is 1 / (1 - p) in float32, a dropped one 0."""
    key = splitmix64(splitmix64(splitmix64(seed) ^ batch_index) ^ site)
    p32 = float(np.float32(p))
    threshold = min(round(p32 * 2.0 ** 32), M32)
    index = np.arange(int(np.prod(shape)), dtype=np.uint64)
    h = fmix32(fmix32((index * 0x9E3779B1 + (key & M32)) & M32) ^ (key >> 32))
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p32))
    return torch.from_numpy(np.where(h >= threshold, scale, np.float32(0.0)).astype(np.float32)).reshape(shape)


class SesameMasks:
    """Sesame's dropout masks for a reference that draws them in Sesame's order: the n-th mask
    drawn after `begin(batch_index)` is site n (`sesame_mask`); `mask(shape, p)` draws the
    next. `dropout_mask` and `dropout` stand in for fastai's and torch's."""

    def __init__(self, seed):
        self.seed, self.batch_index, self.site = seed, 0, 0

    def begin(self, batch_index):
        self.batch_index, self.site = batch_index, 0

    def mask(self, shape, p):
        site, self.site = self.site, self.site + 1
        return sesame_mask(self.seed, self.batch_index, site, shape, p)

    def dropout_mask(self, x, sz, p):
        """fastai's `dropout_mask(x, sz, p)`: RNNDropout's [B, 1, C] and EmbeddingDropout's [V, 1]."""
        return self.mask(tuple(sz), p).to(x.dtype)

    def dropout(self, input, p=0.5, training=True, inplace=False):
        """torch.nn.functional.dropout (fastai's WeightDropout's, on the raw recurrent matrix):
        a call that drops nothing still takes its site."""
        if not training or p == 0.0:
            self.site += 1
            return input
        return input * self.mask(tuple(input.shape), p)
