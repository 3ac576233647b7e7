"""PyTorch's side of `npm run bench:finetune`: transformers' BertForSequenceClassification
(the model folder given, MiniLM-L6 by default) fine-tuned in eager mode on the CPU — forward,
backward, the gradient norm clipped to 1, torch.optim.AdamW with Sesame's weight-decay grouping,
the loss read back — at batch × length tokens of random word ids, on the threads given. Prints
one JSON line: {"examples_per_s", "step_ms", "peak_rss_bytes", "threads", …}.

    python scripts/bench-finetune-pytorch.py --model ~/.cache/sesame/models/all-MiniLM-L6-v2 --threads 2

Needs torch and transformers (tests/reference/requirements.txt).
"""

import argparse
import json
import resource
import time

import torch
import transformers


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8, help="timed steps, after one untimed")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification.from_pretrained(args.model, num_labels=2, attn_implementation="eager")
    model.train()
    params = dict(model.named_parameters())
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=5e-5)
    vocab = model.config.vocab_size
    ids = torch.randint(1000, vocab, (args.batch_size, args.length))
    ids[:, 0], ids[:, -1] = 101, 102  # [CLS] … [SEP]
    labels = torch.randint(0, 2, (args.batch_size,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.item()

    step()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    seconds = (time.perf_counter() - started) / args.steps
    print(json.dumps({
        "runtime": f"PyTorch {torch.__version__} eager, transformers {transformers.__version__}",
        "threads": args.threads, "batch_size": args.batch_size, "length": args.length,
        "step_ms": round(1000 * seconds, 1), "examples_per_s": round(args.batch_size / seconds, 2),
        # ru_maxrss is in KiB on Linux.
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    main()
