"""Writes the ONNX models the transformers.js benchmark loads, in transformers.js' folder layout
(config.json, tokenizer files, onnx/model.onnx and its q8 twin onnx/model_quantized.onnx), under
~/.cache/sesame/onnx/ (or $SESAME_CACHE/onnx):

  all-MiniLM-L6-v2/  the pretrained MiniLM from ~/.cache/sesame/models/all-MiniLM-L6-v2 (scripts/fetch-models.sh):
                     input_ids, attention_mask, token_type_ids -> last_hidden_state
  gpt2-6x384/        GPT-2 with 6 layers x 384 (6 heads, 1024 positions, vocabulary 50257) and the same
                     deterministic random weights as randomGpt2() in www/bench.js, as a decoder with past key
                     values named as optimum names them: input_ids, attention_mask, position_ids,
                     past_key_values.N.key/value -> logits, present.N.key/value; tokenizer from
                     ~/.cache/sesame/vocab/gpt2/{vocab.json,merges.txt}

The q8 models are what transformers.js' own conversion script makes for dtype "q8": onnxruntime's dynamic
quantization of every MatMul/Gather weight to uint8 with one scale and zero point a tensor (activations quantized at
run time). Each fp32 export is checked against PyTorch with onnxruntime (MiniLM: hidden states; GPT-2: logits with an empty and a
non-empty cache, and a greedy continuation decoded step by step with the cache).

Run: /work/venv-ref/bin/pip install -r bench/transformersjs/requirements.txt
     /work/venv-ref/bin/python bench/transformersjs/export_onnx.py [--only minilm|gpt2] [--out DIR]
"""

import argparse
import functools
import json
import os
import shutil
from pathlib import Path

import numpy as np
import torch

CACHE = Path(os.environ.get("SESAME_CACHE", Path.home() / ".cache" / "sesame"))
OPSET = 18


def export(module, args, path, input_names, output_names, dynamic_shapes):
    path.parent.mkdir(parents=True, exist_ok=True)
    program = torch.onnx.export(
        module,
        args,
        input_names=input_names,
        output_names=output_names,
        dynamic_shapes=dynamic_shapes,
        opset_version=OPSET,
        dynamo=True,
        external_data=False,
        optimize=True,
    )
    program.save(str(path), external_data=False)
    import onnx

    # Name the dimensions the exporter left as bare symbols (GPT-2's attention_mask length) as optimum does.
    model = onnx.load(str(path))
    for value in [*model.graph.input, *model.graph.output]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param and dim.dim_param.startswith("s") and dim.dim_param[1:].isdigit():
                dim.dim_param = "total_sequence_length"
    onnx.save(model, str(path))
    onnx.checker.check_model(str(path), full_check=True)
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")


def quantize_q8(path):
    """Writes model_quantized.onnx beside `path`: dynamic uint8 quantization, per tensor (transformers.js' "q8")."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    out = path.with_name("model_quantized.onnx")
    quantize_dynamic(str(path), str(out), weight_type=QuantType.QUInt8, per_channel=False, reduce_range=False)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB)")
    return out


def session(path):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


# --- MiniLM ---------------------------------------------------------------------------------------------------------


class BertWrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state


def export_minilm(out: Path):
    from transformers import AutoTokenizer, BertModel

    src = CACHE / "models" / "all-MiniLM-L6-v2"
    dst = out / "all-MiniLM-L6-v2"
    model = BertModel.from_pretrained(src, attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(src)
    batch = tokenizer(["the quick brown fox", "hello world, a longer second sentence than the first"], padding=True, return_tensors="pt")
    args = (batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    b, s = torch.export.Dim("batch_size"), torch.export.Dim("sequence_length", max=512)
    dyn = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}, "token_type_ids": {0: b, 1: s}}
    with torch.no_grad():
        export(BertWrapper(model).eval(), args, dst / "onnx" / "model.onnx", ["input_ids", "attention_mask", "token_type_ids"], ["last_hidden_state"], dyn)
    for name in ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]:
        if (src / name).exists():
            shutil.copy(src / name, dst / name)

    # Check: ONNX vs PyTorch on a different batch and length than the export sample.
    check = tokenizer(["the " * 126, "a short one"], padding=True, return_tensors="pt")
    with torch.no_grad():
        want = model(**check).last_hidden_state.numpy()
    got = session(dst / "onnx" / "model.onnx").run(None, {k: v.numpy() for k, v in check.items()})[0]
    diff = float(np.abs(got - want).max())
    print(f"MiniLM check: shape {got.shape}, max |onnx - torch| = {diff:.2e}")
    assert diff < 1e-3, diff
    quantize_q8(dst / "onnx" / "model.onnx")


# --- GPT-2 6x384 ----------------------------------------------------------------------------------------------------

GPT2 = dict(layers=6, width=384, heads=6, vocab=50257, positions=1024)


@functools.cache
def _lcg_jumps(block):
    """Step k+1 of the generator from state s is A[k] * s + C[k] (mod 2^32), for k < block."""
    a, c, mask = 1664525, 1013904223, (1 << 32) - 1
    A = np.empty(block, dtype=np.uint64)
    C = np.empty(block, dtype=np.uint64)
    ak, ck = 1, 0
    for k in range(block):
        ak, ck = (ak * a) & mask, (ck * a + c) & mask
        A[k], C[k] = ak, ck
    return A, C


def lcg_stream(seed: int, count: int, block: int = 1 << 20):
    """The values of randomGpt2()'s generator in www/bench.js (seed = seed * 1664525 + 1013904223 mod 2^32, value =
    (seed / 2^32 - 0.5) * 0.1), `count` of them, vectorised by jumping ahead a block at a time; returns (values, seed)."""
    mask = (1 << 32) - 1
    A, C = _lcg_jumps(block)
    out = np.empty(count, dtype=np.float64)
    done = 0
    while done < count:
        n = min(block, count - done)
        states = (A[:n] * np.uint64(seed) + C[:n]) & np.uint64(mask)
        out[done : done + n] = (states.astype(np.float64) / 2**32 - 0.5) * 0.1
        seed = int(states[-1])
        done += n
    return out, seed


def random_gpt2_state(layers, width, heads, vocab, positions):
    """The tensors of www/bench.js randomGpt2(), in its order (GPT2LMHeadModel checkpoint names and layouts)."""
    shapes = [("transformer.wte.weight", [vocab, width]), ("transformer.wpe.weight", [positions, width])]
    for i in range(layers):
        p = f"transformer.h.{i}."
        shapes += [
            (p + "ln_1.weight", [width]), (p + "ln_1.bias", [width]), (p + "attn.c_attn.weight", [width, 3 * width]), (p + "attn.c_attn.bias", [3 * width]),
            (p + "attn.c_proj.weight", [width, width]), (p + "attn.c_proj.bias", [width]), (p + "ln_2.weight", [width]), (p + "ln_2.bias", [width]),
            (p + "mlp.c_fc.weight", [width, 4 * width]), (p + "mlp.c_fc.bias", [4 * width]), (p + "mlp.c_proj.weight", [4 * width, width]), (p + "mlp.c_proj.bias", [width]),
        ]
    shapes += [("transformer.ln_f.weight", [width]), ("transformer.ln_f.bias", [width])]
    seed, state = 1, {}
    for name, shape in shapes:
        n = int(np.prod(shape))
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            values = np.ones(n)
        else:
            values, seed = lcg_stream(seed, n)
        state[name] = torch.from_numpy(values.astype(np.float32).reshape(shape))
    return state


class Gpt2Wrapper(torch.nn.Module):
    """GPT2LMHeadModel with the cache as flat tensors: (input_ids, attention_mask, position_ids, key_0, value_0, …)
    -> (logits, present_key_0, present_value_0, …), each key/value [batch, heads, length, head_dim]."""

    def __init__(self, model, layers):
        super().__init__()
        self.model, self.layers = model, layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(self.layers)], config=self.model.config)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, past_key_values=cache, use_cache=True)
        flat = []
        for i in range(self.layers):
            layer = out.past_key_values.layers[i]
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def export_gpt2(out: Path):
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast, GenerationConfig

    L, W, H, V, P = (GPT2[k] for k in ["layers", "width", "heads", "vocab", "positions"])
    dst = out / f"gpt2-{L}x{W}"
    config = GPT2Config(n_layer=L, n_embd=W, n_head=H, n_positions=P, vocab_size=V, bos_token_id=50256, eos_token_id=50256)
    config.architectures = ["GPT2LMHeadModel"]
    model = GPT2LMHeadModel(config).eval()
    model.config._attn_implementation = "eager"
    state = random_gpt2_state(L, W, H, V, P)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    dst.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(dst)
    GenerationConfig(bos_token_id=50256, eos_token_id=50256).save_pretrained(dst)
    vocab = CACHE / "vocab" / "gpt2"
    tokenizer = GPT2TokenizerFast(vocab=str(vocab / "vocab.json"), merges=str(vocab / "merges.txt"))
    tokenizer.model_max_length = P
    tokenizer.save_pretrained(dst)

    head_dim = W // H
    batch, seq, past_len = 2, 3, 5
    ids = torch.randint(0, V, (batch, seq))
    mask = torch.ones(batch, past_len + seq, dtype=torch.int64)
    pos = torch.arange(past_len, past_len + seq).expand(batch, seq)
    past = [torch.randn(batch, H, past_len, head_dim) for _ in range(2 * L)]
    b, s, p = torch.export.Dim("batch_size"), torch.export.Dim("sequence_length", max=P), torch.export.Dim("past_sequence_length", max=P)
    past_names = [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    total = torch.export.Dim.DYNAMIC  # = sequence_length + past_sequence_length
    dyn = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: total}, "position_ids": {0: b, 1: s}, "past": tuple({0: b, 2: p} for _ in past)}
    wrapper = Gpt2Wrapper(model, L).eval()
    with torch.no_grad():
        export(wrapper, (ids, mask, pos, *past), dst / "onnx" / "model.onnx", ["input_ids", "attention_mask", "position_ids", *past_names], ["logits", *present_names], dyn)

    # Check 1: the prompt with an empty cache (as transformers.js runs the first step) gives PyTorch's logits.
    sess = session(dst / "onnx" / "model.onnx")
    prompt = tokenizer("The quick brown fox jumps over the lazy dog.", return_tensors="np")["input_ids"].astype(np.int64)
    n = prompt.shape[1]
    feed = {"input_ids": prompt, "attention_mask": np.ones_like(prompt), "position_ids": np.arange(n)[None].astype(np.int64)}
    feed |= {name: np.zeros((1, H, 0, head_dim), np.float32) for name in past_names}
    outs = sess.run(None, feed)
    with torch.no_grad():
        want = model(torch.from_numpy(prompt)).logits.numpy()
    diff = float(np.abs(outs[0] - want).max())
    print(f"GPT-2 check (prompt of {n} tokens, empty cache): max |onnx - torch| logits = {diff:.2e}")
    assert diff < 1e-3, diff

    # Check 2: 8 greedy steps with the cache match PyTorch's greedy generation (no EOS stop).
    tokens = list(prompt[0])
    for _ in range(8):
        next_id = int(outs[0][0, -1].argmax())
        tokens.append(next_id)
        t = len(tokens)
        feed = {"input_ids": np.array([[next_id]], np.int64), "attention_mask": np.ones((1, t), np.int64), "position_ids": np.array([[t - 1]], np.int64)}
        feed |= dict(zip(past_names, outs[1:]))
        outs = sess.run(None, feed)
    with torch.no_grad():
        ref = model.generate(torch.from_numpy(prompt), max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)[0].tolist()
    print(f"GPT-2 check (8 greedy steps with cache): onnx {tokens[n:]} torch {ref[n:]}")
    assert tokens == ref, (tokens, ref)
    quantize_q8(dst / "onnx" / "model.onnx")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=CACHE / "onnx")
    ap.add_argument("--only", choices=["minilm", "gpt2"])
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.only in (None, "minilm"):
        export_minilm(a.out)
    if a.only in (None, "gpt2"):
        export_gpt2(a.out)


if __name__ == "__main__":
    main()
