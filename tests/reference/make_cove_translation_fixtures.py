"""Writes tests/fixtures/train/cove-translation/: CoVe's translation model
(cove_reference.py) over the tiny MT-LSTM of tests/fixtures/cove/tiny (E = 6,
h = 5, so the decoder is d = 10 wide) with a random decoder over a small target vocabulary,
float64:

  init/                   config.json (CoveForTranslation; the vectors kept fixed, as the
                          paper keeps GloVe), model.safetensors, tokenizer.json (the source
                          words, cove/tiny's) and target_tokenizer.json (WordLevel, every
                          sentence as <s> ... </s>, made by the tokenizers library),
  pairs.tsv               the sentence pairs behind the batches, a source and a target a line,
  batches.safetensors     input_ids, attention_mask [20, 3, S] (the sources, padded with
                          <pad>), decoder_input_ids [20, 3, T] (<s> y_1 ... y_n, padded) and
                          labels [20, 3, T] (y_1 ... y_n </s>, -100 past the end),
  gradients.safetensors   step 0's loss and the gradient of every parameter, the vectors'
                          included (as if they trained),
  trajectory.json         the optimizer, and each step's loss, learning rate and gradient norm
                          (before clipping at 1.0) of 20 AdamW steps,
  final/model.safetensors the trained weights after them (all but the fixed vectors),
  greedy.json             greedy translations of step 0's sources by the initial weights (at
                          most 6 words), with each step's margin between the two best words.

Checks before writing: the encoder equals nn.LSTM over packed sequences.

Run from the repository root:  PYTHONPATH=tests/reference python3 tests/reference/make_cove_translation_fixtures.py
"""

import json
import os
import random
import shutil

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, pre_tokenizers, processors
from tokenizers.models import WordLevel

import cove_reference as ref
from make_train_fixtures import DROPOUT_SEED, OPTIMIZER, learning_rate

TINY = os.path.join("tests", "fixtures", "cove", "tiny")
OUT = os.path.join("tests", "fixtures", "train", "cove-translation")
BATCH = 3
TARGET_EMBEDDING = 7
GREEDY_WORDS = 6
TARGET_VOCAB = ["<pad>", "<unk>", "<s>", "</s>", "der", "die", "katze", "hund", "saß", "auf", "matte", "lief", "zum", "park", "und", "sah", "haus"]
# A word-for-word dictionary (with some source words unknown to the target side).
DICTIONARY = {"the": "die", "a": "der", "cat": "katze", "dog": "hund", "sat": "saß", "on": "auf", "mat": "matte", "ran": "lief", "to": "zum",
              "park": "park", "and": "und", "saw": "sah", "house": "haus", "tree": "baum"}


def target_tokenizer():
    t = Tokenizer(WordLevel({w: i for i, w in enumerate(TARGET_VOCAB)}, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 2), ("</s>", 3)])
    t.add_special_tokens(["<pad>", "<unk>", "<s>", "</s>"])
    return t


def pairs(rng, count):
    words = list(DICTIONARY) + ["big", "bird", "morning"]
    out = []
    for _ in range(count):
        source = [rng.choice(words) for _ in range(rng.randint(1, 6))]
        target = [DICTIONARY.get(w, "vogel") for w in source]
        if rng.random() < 0.5:
            target = target[:-1] if len(target) > 1 else target + ["und"]
        out.append((" ".join(source), " ".join(target)))
    return out


def batches(source_tokenizer, target):
    rng = random.Random(11)
    steps = [pairs(rng, BATCH) for _ in range(OPTIMIZER["steps"])]
    encoded = [[(source_tokenizer.encode(s).ids, target.encode(t).ids) for s, t in batch] for batch in steps]
    seq = max(len(s) for batch in encoded for s, _ in batch)
    tseq = max(len(t) - 1 for batch in encoded for _, t in batch)
    pad = source_tokenizer.token_to_id("<pad>")
    data = {"input_ids": [], "attention_mask": [], "decoder_input_ids": [], "labels": []}
    for batch in encoded:
        data["input_ids"].append([s + [pad] * (seq - len(s)) for s, _ in batch])
        data["attention_mask"].append([[1] * len(s) + [0] * (seq - len(s)) for s, _ in batch])
        data["decoder_input_ids"].append([t[:-1] + [0] * (tseq - len(t) + 1) for _, t in batch])
        data["labels"].append([t[1:] + [-100] * (tseq - len(t) + 1) for _, t in batch])
    return steps, {k: torch.tensor(v, dtype=torch.int64) for k, v in data.items()}


def fresh_decoder(g, e, h):
    d = 2 * h
    shapes = {"decoder.embeddings.weight": (len(TARGET_VOCAB), TARGET_EMBEDDING)}
    for k in range(2):
        width = TARGET_EMBEDDING + d if k == 0 else d
        shapes.update({f"decoder.rnn.weight_ih_l{k}": (4 * d, width), f"decoder.rnn.weight_hh_l{k}": (4 * d, d),
                       f"decoder.rnn.bias_ih_l{k}": (4 * d,), f"decoder.rnn.bias_hh_l{k}": (4 * d,)})
    shapes.update({"decoder.attention.linear_in.weight": (d, d), "decoder.attention.linear_in.bias": (d,),
                   "decoder.attention.linear_out.weight": (d, 2 * d), "decoder.attention.linear_out.bias": (d,),
                   "generator.weight": (len(TARGET_VOCAB), d), "generator.bias": (len(TARGET_VOCAB),)})
    # Rounded to float32, as the checkpoint stores them.
    return {n: (0.4 * torch.randn(s, generator=g, dtype=torch.float64)).float().double() for n, s in shapes.items()}


def train_adamw(trained, loss_of_step, out):
    """OPTIMIZER's AdamW steps on the parameters `trained` (name -> leaf; weight decay on
    matrices only), step s minimising loss_of_step(s); writes out/trajectory.json and
    out/final/model.safetensors (the trained parameters)."""
    decay = sorted(n for n, p in trained.items() if p.dim() >= 2)
    no_decay = sorted(n for n, p in trained.items() if p.dim() < 2)
    opt = OPTIMIZER
    groups = [{"params": [trained[n] for n in decay], "weight_decay": opt["weight_decay"]}, {"params": [trained[n] for n in no_decay], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    trajectory = []
    for s in range(opt["steps"]):
        lr = learning_rate(s, opt["lr"], opt["warmup"], opt["steps"], opt["schedule"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of_step(s)
        loss.backward()
        # A parameter the step's loss does not reach has a zero gradient, as in Sesame (AdamW
        # still decays it and its moments).
        for p in trained.values():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grad_norm = torch.nn.utils.clip_grad_norm_(list(trained.values()), opt["clip_grad_norm"])
        optimizer.step()
        trajectory.append({"step": s, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()})
        print(f"  step {s:2d}  loss {loss.item():.6f}  lr {lr:.6g}  grad_norm {grad_norm.item():.6f}")
    with open(os.path.join(out, "trajectory.json"), "w") as f:
        json.dump({"optimizer": opt, "dropout_seed": DROPOUT_SEED, "param_groups": {"decay": decay, "no_decay": no_decay}, "steps": trajectory}, f, indent=1)
    save_file({k: v.detach().float().contiguous() for k, v in trained.items()}, os.path.join(out, "final", "model.safetensors"))


def step_loss(params, data, s):
    lengths = data["attention_mask"][s].sum(1).tolist()
    return ref.loss(params, data["input_ids"][s], lengths, data["decoder_input_ids"][s], data["labels"][s])


def main():
    for sub in ("init", "final"):
        os.makedirs(os.path.join(OUT, sub), exist_ok=True)
    with open(os.path.join(TINY, "config.json")) as f:
        config = json.load(f)
    e, h = config["embedding_dim"], config["hidden_size"]
    config.update({"architectures": ["CoveForTranslation"], "target_vocab_size": len(TARGET_VOCAB), "target_embedding_dim": TARGET_EMBEDDING,
                   "decoder_layers": 2, "train_vectors": False, "dropout": 0.0, "decoder_start_token_id": 2, "eos_token_id": 3, "pad_token_id": 1})
    with open(os.path.join(OUT, "init", "config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    shutil.copy(os.path.join(TINY, "tokenizer.json"), os.path.join(OUT, "init", "tokenizer.json"))
    target = target_tokenizer()
    target.save(os.path.join(OUT, "init", "target_tokenizer.json"))
    source_tokenizer = Tokenizer.from_file(os.path.join(TINY, "tokenizer.json"))

    g = torch.Generator().manual_seed(17)
    params = {k: v.double() for k, v in load_file(os.path.join(TINY, "model.safetensors")).items()}
    params.update(fresh_decoder(g, e, h))
    save_file({k: v.float().contiguous() for k, v in params.items()}, os.path.join(OUT, "init", "model.safetensors"))

    steps, data = batches(source_tokenizer, target)
    with open(os.path.join(OUT, "pairs.tsv"), "w") as f:
        f.write("".join(f"{s}\t{t}\n" for batch in steps for s, t in batch))
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(OUT, "batches.safetensors"))

    lengths = data["attention_mask"][0].sum(1).tolist()
    packed = ref.encode_packed(params, data["input_ids"][0], lengths)
    assert (packed - ref.encode(params, data["input_ids"][0], lengths)).abs().max() < 1e-12

    # Step 0's gradients, the vectors' included.
    leaves = {k: torch.nn.Parameter(v.clone()) for k, v in params.items()}
    loss = step_loss(leaves, data, 0)
    loss.backward()
    gradients = {"loss": loss.detach().reshape(1)}
    gradients.update({f"grad.{k}": p.grad for k, p in leaves.items()})
    save_file({k: v.float().contiguous() for k, v in gradients.items()}, os.path.join(OUT, "gradients.safetensors"))

    # Greedy translations of step 0's sources by the initial weights, with each step's margin
    # between the two best words (a near tie may go either way in float32).
    with torch.no_grad():
        greedy = ref.translate_greedy(params, data["input_ids"][0], lengths, 2, 3, GREEDY_WORDS)
    with open(os.path.join(OUT, "greedy.json"), "w") as f:
        json.dump({"max_words": GREEDY_WORDS, "translations": [w for w, _ in greedy], "margins": [m for _, m in greedy]}, f)

    # 20 AdamW steps with the vectors fixed.
    trained = {k: torch.nn.Parameter(v.clone()) for k, v in params.items() if k != "vectors.weight"}
    fixed = {"vectors.weight": params["vectors.weight"]}
    train_adamw(trained, lambda s: step_loss({**trained, **fixed}, data, s), OUT)

if __name__ == "__main__":
    main()
