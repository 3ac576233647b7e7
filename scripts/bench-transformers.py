"""transformers (PyTorch eager, fp32) on the shapes of `sesame bench models`, for side-by-side
numbers: BERT-base, DistilBERT-base and ALBERT-base forwards at 1x128 and 8x128, MiniLM-L6 sentence embeddings (1 and 32
sentences of 128 tokens, mean pooling + normalisation), GPT-2 124M prefill of 128 tokens and
per-token greedy decoding with the KV cache. Random weights, as Sesame's benchmark.

    python scripts/bench-transformers.py [--device cpu|cuda] [--decode-tokens 32]

Prints one JSON object per line, with the same op names and fields as `sesame bench models`.
Needs torch and transformers (tests/reference/requirements.txt).
"""

import argparse
import json
import time

import torch
import transformers


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


def record(op, shape, ms, per_call, device):
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(json.dumps({"op": op, "shape": shape, "ms": ms, "per_second": per_call * 1e3 / ms,
                      "adapter": f"transformers {transformers.__version__} eager fp32 on {name}"}), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--decode-tokens", type=int, default=32)
    args = parser.parse_args()
    dev = args.device
    torch.manual_seed(0)

    with torch.inference_mode():
        bert = transformers.BertModel(transformers.BertConfig(attn_implementation="eager")).eval().to(dev)
        for batch in (1, 8):
            ids = torch.randint(0, 30522, (batch, 128), device=dev)
            record("bert_base_forward", f"{batch}x128 tokens", timed_ms(lambda: bert(ids), dev), batch * 128, dev)
        del bert

        # DistilBERT-base and ALBERT-base, as `sesame bench models` shapes them.
        for op, model in [("distilbert_base_forward", transformers.DistilBertModel(transformers.DistilBertConfig(attn_implementation="eager"))),
                          ("albert_base_forward", transformers.AlbertModel(transformers.AlbertConfig(embedding_size=128, hidden_size=768, num_attention_heads=12,
                                                                                                     intermediate_size=3072, attn_implementation="eager")))]:
            model = model.eval().to(dev)
            for batch in (1, 8):
                ids = torch.randint(0, 30000, (batch, 128), device=dev)
                record(op, f"{batch}x128 tokens", timed_ms(lambda: model(ids), dev), batch * 128, dev)
            del model

        minilm = transformers.BertModel(transformers.BertConfig(hidden_size=384, num_hidden_layers=6, intermediate_size=1536,
                                                                attn_implementation="eager")).eval().to(dev)
        for batch in (1, 32):
            ids = torch.randint(0, 30522, (batch, 128), device=dev)
            mask = torch.ones_like(ids)

            def embed():
                hidden = minilm(ids, attention_mask=mask).last_hidden_state
                pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
                return torch.nn.functional.normalize(pooled, dim=-1).cpu()
            record("minilm_embeddings", f"{batch} sentences x 128 tokens", timed_ms(embed, dev), batch, dev)
        del minilm

        gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(attn_implementation="eager")).eval().to(dev)
        prompt = torch.randint(0, 50257, (1, 128), device=dev)

        def prefill():
            out = gpt2(prompt, use_cache=True)
            return out.logits[:, -1].argmax(-1).item(), out.past_key_values
        record("gpt2_prefill", "124M, prompt 128 tokens", timed_ms(prefill, dev), 128, dev)
        token, past = prefill()
        if dev == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.decode_tokens):
            out = gpt2(torch.tensor([[token]], device=dev), past_key_values=past, use_cache=True)
            token, past = out.logits[:, -1].argmax(-1).item(), out.past_key_values
        ms = (time.perf_counter() - start) * 1e3 / args.decode_tokens
        record("gpt2_decode", f"124M, per token after 128, {args.decode_tokens} tokens", ms, 1, dev)


if __name__ == "__main__":
    main()
