"""transformers (PyTorch eager, fp32) on the shapes of `sesame bench models`, for side-by-side
numbers: BERT-base, DistilBERT-base and ALBERT-base forwards at 1x128 and 8x128, MiniLM-L6 sentence embeddings (1 and 32
sentences of 128 tokens, mean pooling + normalisation), GPT-2 124M prefill of 128 tokens and
per-token greedy decoding with the KV cache. Random weights, as Sesame's benchmark.

    python scripts/bench-transformers.py [--device cpu|cuda] [--decode-tokens 32] [--threads N]
        [--dtype fp32|qint8] [--only OP]

`--dtype qint8` is PyTorch's dynamic int8 (`torch.ao.quantization.quantize_dynamic` on every
`nn.Linear`: int8 weights per tensor, activations quantized per call, fbgemm/onednn int8
GEMMs; CPU only). GPT-2's projections are transformers' Conv1D, which quantize_dynamic does not
touch, so they are turned into the equivalent nn.Linear first (the weight transposed).
`--only` keeps the ops whose name contains it, as `sesame bench models --only` does.

Prints one JSON object per line, with the same op names and fields as `sesame bench models`.
Needs torch and transformers (tests/reference/requirements.txt).
"""

import argparse
import json
import time
import warnings

import torch
import transformers
from transformers.pytorch_utils import Conv1D


def timed_ms(fn, device, budget_s=2.0):
    """Mean ms per call after a warm-up, enough calls to fill about budget_s."""
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - start
    reps = max(1, min(200, int(budget_s / max(once, 1e-6))))
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - start) * 1e3 / reps


def linear_of(conv):
    """transformers' Conv1D (y = x W + b, W [in, out]) as the nn.Linear it is."""
    linear = torch.nn.Linear(conv.weight.shape[0], conv.weight.shape[1])
    with torch.no_grad():
        linear.weight.copy_(conv.weight.t())
        linear.bias.copy_(conv.bias)
    return linear


def prepared(model, dtype, device):
    """The model in eval mode on `device`, with its linear layers in dynamic int8 for qint8."""
    model = model.eval()
    if dtype == "qint8":
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, Conv1D):
                    setattr(parent, name, linear_of(child))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return model.to(device)


def record(op, shape, ms, per_call, device, dtype):
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    threads = f", {torch.get_num_threads()} threads" if device == "cpu" else ""
    print(json.dumps({"op": op, "shape": shape, "ms": ms, "per_second": per_call * 1e3 / ms,
                      "adapter": f"transformers {transformers.__version__} eager {dtype} on {name}{threads}"}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's, every core)")
    parser.add_argument("--dtype", choices=["fp32", "qint8"], default="fp32")
    parser.add_argument("--only", default="", help="run only the ops whose name contains this")
    args = parser.parse_args()
    dev = args.device
    if args.dtype == "qint8" and dev != "cpu":
        parser.error("--dtype qint8 runs on the CPU only")
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    wanted = lambda op: args.only in op  # noqa: E731

    def record_op(op, shape, ms, per_call):
        record(op, shape, ms, per_call, dev, args.dtype)

    with torch.inference_mode():
        # BERT-base, DistilBERT-base and ALBERT-base, as `sesame bench models` shapes them.
        encoders = [
            ("bert_base_forward", 30522, lambda: transformers.BertModel(transformers.BertConfig(attn_implementation="eager"))),
            ("distilbert_base_forward", 30000, lambda: transformers.DistilBertModel(transformers.DistilBertConfig(attn_implementation="eager"))),
            ("albert_base_forward", 30000, lambda: transformers.AlbertModel(transformers.AlbertConfig(
                embedding_size=128, hidden_size=768, num_attention_heads=12, intermediate_size=3072, attn_implementation="eager"))),
        ]
        for op, vocab, make in encoders:
            if not wanted(op):
                continue
            model = prepared(make(), args.dtype, dev)
            for batch in (1, 8):
                ids = torch.randint(0, vocab, (batch, 128), device=dev)
                record_op(op, f"{batch}x128 tokens", timed_ms(lambda: model(ids), dev), batch * 128)
            del model

        if wanted("minilm_embeddings"):
            minilm = prepared(transformers.BertModel(transformers.BertConfig(
                hidden_size=384, num_hidden_layers=6, intermediate_size=1536, attn_implementation="eager")), args.dtype, dev)
            for batch in (1, 32):
                ids = torch.randint(0, 30522, (batch, 128), device=dev)
                mask = torch.ones_like(ids)

                def embed():
                    hidden = minilm(ids, attention_mask=mask).last_hidden_state
                    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
                    return torch.nn.functional.normalize(pooled, dim=-1).cpu()
                record_op("minilm_embeddings", f"{batch} sentences x 128 tokens", timed_ms(embed, dev), batch)
            del minilm

        if wanted("gpt2_prefill") or wanted("gpt2_decode"):
            gpt2 = prepared(transformers.GPT2LMHeadModel(transformers.GPT2Config(attn_implementation="eager")), args.dtype, dev)
            prompt = torch.randint(0, 50257, (1, 128), device=dev)

            def prefill():
                out = gpt2(prompt, use_cache=True)
                return out.logits[:, -1].argmax(-1).item(), out.past_key_values
            if wanted("gpt2_prefill"):
                record_op("gpt2_prefill", "124M, prompt 128 tokens", timed_ms(prefill, dev), 128)
            if wanted("gpt2_decode"):
                token, past = prefill()
                if dev == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(args.decode_tokens):
                    out = gpt2(torch.tensor([[token]], device=dev), past_key_values=past, use_cache=True)
                    token, past = out.logits[:, -1].argmax(-1).item(), out.past_key_values
                ms = (time.perf_counter() - start) * 1e3 / args.decode_tokens
                record_op("gpt2_decode", f"124M, per token after 128, {args.decode_tokens} tokens", ms, 1)


if __name__ == "__main__":
    main()
