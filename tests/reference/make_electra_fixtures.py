"""Writes the ELECTRA pretraining fixture tests/fixtures/train/electra-pretraining/: the
generator and the discriminator trained together as ELECTRA's paper and its code describe them
(Clark et al. 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators", §2 and §3.2; google-research/electra's run_pretraining.py and pretrain_helpers.py):

- masking: about 15% of each row's words (at least one) selected; a selected token becomes
  [MASK] 85% of the time and stays as it is otherwise (ELECTRA keeps no random replacement);
  `labels` holds the original id at the selected positions, -100 elsewhere;
- the generator (ElectraForMaskedLM) reads the masked rows; its masked-LM loss is the cross
  entropy at the selected positions;
- at each selected position a replacement is sampled from the generator's softmax (Gumbel-max:
  argmax(logits + g), g = -log(-log(u + 1e-9) + 1e-9), u uniform; no gradient flows through the
  sample) and written into the row;
- the discriminator (ElectraForPreTraining) reads the corrupted rows; a token is "replaced"
  (label 1) where the corrupted id differs from the original, so a sample equal to the
  original counts as original; its loss is the binary cross entropy with logits, mean over the
  positions whose attention_mask is 1;
- loss = masked-LM loss + 50 · discriminator loss (the paper's λ);
- the two models share the whole embeddings block (word, position and token-type tables and
  their LayerNorm, "electra.embeddings"), and the generator's output layer is tied to the word
  embeddings, so that table's gradient sums three uses (both models' inputs, the generator's
  output).

Sizes: the discriminator has embedding_size 16 projected to 32, 2 layers of 4 heads, a 64-wide
feed-forward and 48 positions; the generator the same embeddings projected to 24, 2 layers of 2
heads, a 48-wide feed-forward. Dropout 0.2 everywhere, with Sesame's masks (SesameDropout): the
generator's dropout calls are keyed by the dropout seed, the discriminator's by the seed + 1,
both with batch index s at step s. LayerNorm gains and biases nudged off 1 and 0 as the other
fixtures; the discriminator head's weights drawn with std 0.3 (as electra-rtd's).

The folder layout (Sesame's ELECTRA pretraining folder, which init/ and final/ use):
  config.json             the discriminator's (ElectraForPreTraining)
  generator_config.json   the generator's (ElectraForMaskedLM)
  model.safetensors       the shared embeddings under their names (electra.embeddings.…), and
                          each model's own tensors under "discriminator." or "generator." + their
                          names (discriminator.electra.encoder.…,
                          discriminator.discriminator_predictions.…, generator.electra.encoder.…,
                          generator.generator_predictions.…, generator.generator_lm_head.bias)
  vocab.txt, tokenizer files as the other BERT fixtures'

batches.safetensors: input_ids (masked), attention_mask and labels
[20, 4, 16], and generator_samples [20, 4, 16]: the id sampled at each selected position, -100
elsewhere (a replay uses these instead of sampling). grads.safetensors holds step 0's gradient
of every parameter under the folder's names; trajectory.json the 20 steps' losses (loss,
mlm_loss, rtd_loss). Training: make_train_fixtures.py's 20 AdamW steps (lr 1e-3, warmup 4
then cosine, weight decay 0.1 on the parameters of rank >= 2, clipping at 1.0 over both
models' parameters).

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_electra_fixtures.py
"""

import json
import os

import torch
import transformers
from safetensors.torch import save_file

from common import BERT_VOCAB, randomize, write_bert_vocab
from make_family_train_fixtures import single_segment_batches
from make_train_fixtures import (BATCH, DROPOUT_P, DROPOUT_SEED, OPTIMIZER, OUT, SEQ, STEPS, VOCAB, SesameDropout, learning_rate)

CLS, SEP, MASK, PAD = (BERT_VOCAB.index(t) for t in ["[CLS]", "[SEP]", "[MASK]", "[PAD]"])
RTD_WEIGHT = 50.0
SHARED = "electra.embeddings."


def configs():
    common = dict(vocab_size=VOCAB, embedding_size=16, max_position_embeddings=48, num_hidden_layers=2, pad_token_id=PAD,
                  hidden_dropout_prob=DROPOUT_P, attention_probs_dropout_prob=DROPOUT_P)
    discriminator = transformers.ElectraConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64,
                                               architectures=["ElectraForPreTraining"], **common)
    generator = transformers.ElectraConfig(hidden_size=24, num_attention_heads=2, intermediate_size=48,
                                           architectures=["ElectraForMaskedLM"], **common)
    for config in (discriminator, generator):
        config._attn_implementation = "eager"
    return discriminator, generator


class ElectraPretraining(torch.nn.Module):
    """The discriminator and the generator over one embeddings block, their parameters named as
    Sesame's ELECTRA pretraining folder names them."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        discriminator_config, generator_config = configs()
        self.discriminator = transformers.ElectraForPreTraining(discriminator_config)
        self.generator = transformers.ElectraForMaskedLM(generator_config)
        self.generator.electra.embeddings = self.discriminator.electra.embeddings
        self.generator.generator_lm_head.weight = self.discriminator.electra.embeddings.word_embeddings.weight
        randomize(self, seed=1, bias_std=0.02, weight_std=None)
        with torch.no_grad():
            g = torch.Generator().manual_seed(4)
            for p in self.discriminator.discriminator_predictions.parameters():
                p.copy_(0.3 * torch.randn(p.shape, generator=g))

    def named_tensors(self):
        """Every parameter once, under the folder's names."""
        named = {}
        for prefix, model in (("discriminator.", self.discriminator), ("generator.", self.generator)):
            for name, p in model.named_parameters():
                shared = name.startswith(SHARED)
                assert shared == any(p is q for q in self.discriminator.electra.embeddings.parameters()), name
                named[name if shared else prefix + name] = p
        return named


def save(model, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    model.discriminator.config.to_json_file(os.path.join(out_dir, "config.json"))
    model.generator.config.to_json_file(os.path.join(out_dir, "generator_config.json"))
    save_file({n: p.detach().contiguous() for n, p in model.named_tensors().items()}, os.path.join(out_dir, "model.safetensors"))
    write_bert_vocab(out_dir)


def masked_batches(seed):
    """[CLS] words [SEP] rows with ELECTRA's masking (see the module's docstring)."""
    batches, g = single_segment_batches(seed, CLS, SEP, PAD, first_word=5)
    input_ids = batches["input_ids"]
    labels = torch.full_like(input_ids, -100)
    for s in range(STEPS):
        for b in range(BATCH):
            positions = [i for i in range(SEQ) if batches["attention_mask"][s, b, i] and input_ids[s, b, i] not in (CLS, SEP)]
            k = max(1, round(0.15 * len(positions)))
            for j in sorted(torch.randperm(len(positions), generator=g)[:k].tolist()):
                i = positions[j]
                labels[s, b, i] = input_ids[s, b, i]
                if torch.rand((), generator=g).item() < 0.85:
                    input_ids[s, b, i] = MASK
    batches["labels"] = labels
    return batches


def gumbel_samples(logits, selected, g):
    """Gumbel-max samples of `logits` [B, T, V] at the `selected` positions, -100 elsewhere."""
    u = torch.rand(logits.shape, generator=g)
    gumbel = -torch.log(-torch.log(u + 1e-9) + 1e-9)
    sampled = torch.argmax(logits.detach() + gumbel, dim=-1)
    return torch.where(selected, sampled, torch.full_like(sampled, -100))


def losses(model, batch, samples, generator_dropout, discriminator_dropout, s):
    """The step's masked-LM, replaced-token-detection and total losses on `batch`, the
    generator's replacements `samples` (None: sampled here) and the samples used."""
    selected = batch["labels"] != -100
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in batch}
    torch.nn.functional.dropout = generator_dropout
    generator_dropout.begin(batch_index=s)
    out = model.generator(**inputs)
    mlm = torch.nn.functional.cross_entropy(out.logits.reshape(-1, VOCAB), batch["labels"].reshape(-1), ignore_index=-100)
    if samples is None:
        samples = gumbel_samples(out.logits, selected, torch.Generator().manual_seed(1000 + s))
    original = torch.where(selected, batch["labels"], batch["input_ids"])
    corrupted = torch.where(selected, samples, batch["input_ids"])
    replaced = (corrupted != original).float()
    torch.nn.functional.dropout = discriminator_dropout
    discriminator_dropout.begin(batch_index=s)
    logits = model.discriminator(**dict(inputs, input_ids=corrupted)).logits
    active = batch["attention_mask"] == 1
    rtd = torch.nn.functional.binary_cross_entropy_with_logits(logits[active], replaced[active])
    return mlm, rtd, mlm + RTD_WEIGHT * rtd, samples


def main():
    torch.use_deterministic_algorithms(True)
    generator_dropout, discriminator_dropout = SesameDropout(DROPOUT_SEED), SesameDropout(DROPOUT_SEED + 1)
    model = ElectraPretraining()
    out_dir = os.path.join(OUT, "electra-pretraining")
    save(model, os.path.join(out_dir, "init"))
    data = masked_batches(seed=2)
    named = model.named_tensors()
    decay = [n for n, p in named.items() if p.dim() >= 2]
    no_decay = [n for n, p in named.items() if p.dim() < 2]
    opt = OPTIMIZER
    optimizer = torch.optim.AdamW([{"params": [named[n] for n in decay], "weight_decay": opt["weight_decay"]},
                                   {"params": [named[n] for n in no_decay], "weight_decay": 0.0}],
                                  lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    steps, all_samples = [], []
    model.train()
    for s in range(STEPS):
        lr = learning_rate(s, opt["lr"], opt["warmup"], STEPS, opt["schedule"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = {k: v[s] for k, v in data.items()}
        optimizer.zero_grad(set_to_none=True)
        mlm, rtd, loss, samples = losses(model, batch, None, generator_dropout, discriminator_dropout, s)
        all_samples.append(samples)
        loss.backward()
        if s == 0:
            replaced = (samples != batch["labels"]) & (batch["labels"] != -100)
            print(f"step 0: {int((batch['labels'] != -100).sum())} selected, {int(replaced.sum())} replaced by the generator")
            save_file({n: p.grad.detach().clone().contiguous() for n, p in named.items()}, os.path.join(out_dir, "grads.safetensors"))
        grad_norm = torch.nn.utils.clip_grad_norm_(list(named.values()), opt["clip_grad_norm"])
        optimizer.step()
        steps.append({"step": s, "loss": loss.item(), "mlm_loss": mlm.item(), "rtd_loss": rtd.item(), "lr": lr, "grad_norm": grad_norm.item()})
        print(f"  step {s:2d}  loss {loss.item():.6f}  mlm {mlm.item():.6f}  rtd {rtd.item():.6f}  grad_norm {grad_norm.item():.6f}")
    data["generator_samples"] = torch.stack(all_samples)
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(out_dir, "batches.safetensors"))
    trajectory = {"optimizer": dict(opt, steps=STEPS), "dropout_seed": DROPOUT_SEED, "rtd_weight": RTD_WEIGHT,
                  "param_groups": {"decay": decay, "no_decay": no_decay}, "steps": steps}
    with open(os.path.join(out_dir, "trajectory.json"), "w") as f:
        json.dump(trajectory, f, indent=1)
    save(model, os.path.join(out_dir, "final"))


if __name__ == "__main__":
    main()
