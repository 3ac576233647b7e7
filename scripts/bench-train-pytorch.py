"""PyTorch's side of `sesame bench train`: GPT2LMHeadModel training steps (forward, backward,
AdamW, the loss read back) at the same shape, with random weights and random tokens, eager
attention, fp32 with TF32 off. Prints one JSON line like Sesame's record.

    python scripts/bench-train-pytorch.py                       # GPT-2 124M, batch 8 × 1024
    python scripts/bench-train-pytorch.py --layers 4 --heads 4 --hidden 128 --context 64 \
        --vocab 65 --batch-size 12                              # the baby GPT's shape

Needs torch and transformers (tests/reference/requirements.txt); uses CUDA when present.
"""

import argparse
import json
import time

import torch
import transformers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="timed steps, after one untimed")
    args = parser.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    config = transformers.GPT2Config(
        vocab_size=args.vocab, n_positions=args.context, n_embd=args.hidden, n_layer=args.layers,
        n_head=args.heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    config._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).to(device)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    ids = torch.randint(0, args.vocab, (args.batch_size, args.context), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()  # waits for the step, as Sesame's benchmark does

    step()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    ms = (time.perf_counter() - started) * 1e3 / args.steps
    parameters = sum(p.numel() for p in model.parameters())
    adapter = torch.cuda.get_device_name() if device == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(json.dumps({
        "op": "gpt2_train_step_pytorch",
        "shape": f"{args.layers} layers, {args.heads} heads, {args.hidden} wide, vocabulary {args.vocab}, "
                 f"{parameters} parameters; batch {args.batch_size} × context {args.context}, fp32 (TF32 off), AdamW",
        "ms": ms,
        "per_second": args.batch_size * args.context / (ms / 1e3),
        "adapter": adapter,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
