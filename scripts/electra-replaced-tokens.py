"""How well an ELECTRA pretraining run's discriminator finds replaced tokens, measured in
PyTorch + transformers from the two folders `sesame train --objective electra` writes
(DIR/generator, DIR/discriminator): held-out text masked ELECTRA's way (15% of the tokens,
85% of those [MASK]ed), a replacement sampled from the generator's softmax at each masked
position, and the discriminator's per-token probability of "replaced" scored against the
truth: ROC AUC (0.5 is chance, whatever the share replaced), accuracy at p > 0.5 beside the
share that calling every token original scores, and mean p over replaced and original tokens.

    python3 scripts/electra-replaced-tokens.py runs/electra-small ../shared/data/wikitext-2/valid.txt
"""

import sys

import torch
import transformers


def auc(scores, labels):
    """ROC AUC by ranks (Mann-Whitney U), ties averaged."""
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    for value in torch.unique(scores):
        tied = scores == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    positives = labels.sum()
    negatives = len(labels) - positives
    return ((ranks[labels.bool()].sum() - positives * (positives + 1) / 2) / (positives * negatives)).item()


def main(run, text_file, rows=64, seq=128):
    torch.manual_seed(0)
    generator = transformers.ElectraForMaskedLM.from_pretrained(f"{run}/generator").eval()
    discriminator = transformers.ElectraForPreTraining.from_pretrained(f"{run}/discriminator").eval()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=f"{run}/discriminator/tokenizer.json")
    mask_id = tokenizer.convert_tokens_to_ids("[MASK]")
    cls, sep, pad = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", "[PAD]"])
    special = {cls, sep, pad}
    lines = [l.strip() for l in open(text_file, encoding="utf-8") if l.strip() and not l.strip().startswith("=")]
    ids = tokenizer(" ".join(lines), add_special_tokens=False)["input_ids"]
    body = seq - 2
    batch = torch.tensor([[cls] + ids[i * body:(i + 1) * body] + [sep] for i in range(rows)])
    maskable = torch.tensor([[t not in special for t in row] for row in batch.tolist()])
    masked = (torch.rand(batch.shape) < 0.15) & maskable
    inputs = batch.clone()
    inputs[masked & (torch.rand(batch.shape) < 0.85)] = mask_id
    with torch.no_grad():
        logits = generator(input_ids=inputs).logits
        samples = torch.distributions.Categorical(logits=logits).sample()
        corrupted = torch.where(masked, samples, batch)
        replaced = (corrupted != batch).long()
        p = torch.sigmoid(discriminator(input_ids=corrupted).logits)
    p, replaced = p[maskable], replaced[maskable]
    accuracy = ((p > 0.5).long() == replaced).float().mean().item()
    share = replaced.float().mean().item()
    print(f"{run}: {len(p)} tokens, {share:.1%} replaced")
    print(f"  ROC AUC {auc(p, replaced):.3f}")
    print(f"  accuracy at p > 0.5: {accuracy:.4f} (calling every token original: {1 - share:.4f})")
    print(f"  mean p(replaced): replaced tokens {p[replaced == 1].mean():.3f}, original tokens {p[replaced == 0].mean():.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
