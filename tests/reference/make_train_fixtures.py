"""Writes the training fixtures under tests/fixtures/train/{gpt2,bert,gpt2-dropout,
bert-dropout,bert-classify,openai-gpt,gpt2-classify,openai-gpt-classify,
bert-token-classify,bert-qa}/: what Sesame's
backward pass and optimizer are checked against. For each model:

  init/        the initial checkpoint in the Hugging Face layout (config.json,
               model.safetensors from save_pretrained, so tied weights are stored as
               transformers stores them) and a tokenizer, a complete model folder
  batches.safetensors
               the 20 replayed batches, named as transformers' arguments, each with a
               leading step dimension: [20, 4, 16] (next_sentence_label and the classify
               families' labels [20, 4]; bert-token-classify's labels are per token,
               [20, 4, 16]; bert-qa has start_positions and end_positions [20, 4]), int64
  grads.safetensors
               the gradient of the step-0 loss (batch 0, initial weights, before clipping)
               for every parameter, keyed by model.named_parameters() names (tied weights
               appear once, under the name named_parameters() gives them)
  trajectory.json
               the optimizer's settings and, for each of the 20 steps, the loss (before that
               step's update), the learning rate used and the gradient norm before clipping
               (gpt2-classify and openai-gpt-classify also record their auxiliary LM
               weight as "lm_coef")
  final/       the checkpoint after the 20 AdamW steps (config.json, model.safetensors)

Models: GPT2LMHeadModel (loss: transformers' causal-LM loss, logits[:, :-1] predicting
labels[:, 1:], mean over labels != -100), BertForPreTraining (loss: masked-LM cross
entropy, mean over labels != -100, plus next-sentence cross entropy, mean over the batch),
BertForSequenceClassification with 3 labels (bert-classify: cross entropy of the [CLS] head,
mean over the batch; labels [20, 4]; dropout 0.2 everywhere, the classifier's included),
OpenAIGPTLMHeadModel (openai-gpt: GPT-2's size, batches, optimizer and causal-LM loss, but
the original GPT's post-LayerNorm blocks without a final LayerNorm, a 4 * n_embd feed-forward
and its default afn "gelu", which transformers' OpenAI GPT code maps to the tanh
approximation gelu_new; the LM head tied to transformer.tokens_embed.weight),
GPT2ForSequenceClassification with 3 labels (gpt2-classify: GPT's fine-tuning objective,
Radford et al. 2018 section 3.2, L = L_task + LM_COEF * L_LM with LM_COEF = 0.5. GPT-2's sizes,
pad_token_id 1 (<pad>), dropout 0.2 everywhere (the score head has none); batches of
Zipf-distributed words without special tokens, one row per step right-padded with 1 to 6
<pad>s, labels [20, 4] 0 to 2 at random. One backbone pass h = transformer(input_ids,
attention_mask).last_hidden_state (after ln_f); L_task: cross entropy, mean over the batch, of
score(h) at each row's last non-pad token (transformers' rule: the rightmost position whose id
is not pad_token_id; the logits GPT2ForSequenceClassification returns); L_LM: the causal-LM
loss of h @ transformer.wte.weight^T (the tied LM head, which the checkpoint does not store),
position t predicting input_ids[t + 1], mean over the targets whose attention_mask is 1) and
OpenAIGPTForSequenceClassification with 3 labels (openai-gpt-classify: the same objective,
LM_COEF, pad_token_id, dropout, batches and labels as gpt2-classify on openai-gpt's model: h is
OpenAIGPTModel's last_hidden_state, the last block's output, with no final LayerNorm; score is
Linear(32, 3) without bias, pooled by the same rule, the rightmost position whose id is not
pad_token_id; the LM head is h @ transformer.tokens_embed.weight^T, not stored either) and
BertForTokenClassification with 5 labels (bert-token-classify: bert-classify's sizes, no
pooler, the classifier Linear(32, 5) on every position of the last hidden state after a dropout
of hidden_dropout_prob, the last of the forward pass's dropout calls; batches as bert-classify's,
[CLS] words [SEP] with one row per step right-padded with 1 to 6 [PAD]s, and per-token labels
[20, 4, 16]: a class 0 to 4 at random at each word position, -100 at [CLS], [SEP] and padding,
and -100 on about 1 in 5 word positions besides, at random, as transformers' token-
classification data marks subword continuations; loss: transformers' cross entropy over all
positions, ignore_index -100, mean over the labels != -100) and BertForQuestionAnswering
(bert-qa: bert-classify's sizes, no pooler, qa_outputs Linear(32, 2) on every position of the
last hidden state with no dropout before it, its two outputs the start and end logits; batches
[CLS] question [SEP] context [SEP] with token_type_ids 1 on the context and its [SEP], one row
per step right-padded with 1 to 6 [PAD]s, and start_positions / end_positions [20, 4]: a span
of 1 to 3 context tokens, or 0 ([CLS], an answer outside the window) for about 1 row in 5, and
in every fourth step one row's positions past the sequence (SEQ + 3), which transformers
clamps to SEQ and ignores; loss: transformers' (CE(start) + CE(end)) / 2, each cross entropy
over all SEQ positions, padding included, mean over the rows not ignored).
Float32, CPU, deterministic, eager attention. gpt2, bert and openai-gpt have every dropout
probability 0; the -dropout variants (the same models) and the -classify families have every
dropout probability 0.2, and torch.nn.functional.dropout replaced by Sesame's counter-based
masks (SesameDropout below, mirroring src/ops/dropout.rs bit for bit), so both sides drop the
same elements.

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_train_fixtures.py
"""

import json
import math
import os

import torch
import transformers
from safetensors.torch import save_file

from common import BERT_VOCAB, GPT_VOCAB, SesameMasks, randomize, write_bert_vocab, write_gpt_tokenizer
from lamb import Lamb

OUT = os.path.join("tests", "fixtures", "train")
STEPS, BATCH, SEQ = 20, 4, 16
FIRST_WORD = 5  # ids below are special tokens in both vocabularies
VOCAB = 99
assert len(BERT_VOCAB) == len(GPT_VOCAB) == VOCAB

OPTIMIZER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1,
             "warmup": 4, "schedule": "cosine", "steps": STEPS, "clip_grad_norm": 1.0}

DROPOUT_SEED, DROPOUT_P = 7, 0.2
TOKEN_LABELS = 5  # bert-token-classify's classes
LM_COEF = 0.5  # the -classify GPTs: weight of the auxiliary LM loss (GPT paper, section 3.2)
GPT_CLASSIFY = ("gpt2-classify", "openai-gpt-classify")
GPT_PAD = GPT_VOCAB.index("<pad>")  # 1
CLS, SEP, MASK, PAD = (BERT_VOCAB.index(t) for t in ["[CLS]", "[SEP]", "[MASK]", "[PAD]"])


def learning_rate(step, lr, warmup, total, schedule):
    """The learning rate for 0-based step `step`: linear warmup to lr over `warmup` steps,
    lr * (step + 1) / warmup, then with p = (step - warmup) / max(1, total - warmup):
      cosine:   lr * 0.5 * (1 + cos(pi * p))
      linear:   lr * (1 - p)
      constant: lr
    (Sesame implements all three; these fixtures use cosine.)"""
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    if schedule == "cosine":
        return lr * 0.5 * (1.0 + math.cos(math.pi * p))
    if schedule == "linear":
        return lr * (1.0 - p)
    if schedule == "constant":
        return lr
    raise ValueError(schedule)


def zipf_words(shape, g):
    """Word ids (FIRST_WORD..VOCAB-1) drawn with Zipf frequencies, p ~ 1 / rank over a fixed
    shuffled ranking of the words: unlike uniform ids (loss stuck at ln 99) the unigram
    statistics can be learned, so the loss visibly falls within the 20 steps."""
    n_words = VOCAB - FIRST_WORD
    ranking = torch.randperm(n_words, generator=torch.Generator().manual_seed(3))
    probs = 1.0 / torch.arange(1, n_words + 1, dtype=torch.float64)
    draws = torch.multinomial(probs, math.prod(shape), replacement=True, generator=g)
    return (FIRST_WORD + ranking[draws]).reshape(shape)


def gpt_batches(seed):
    """Zipf-distributed word ids; row 3 of every step right-padded over its last 4 positions."""
    g = torch.Generator().manual_seed(seed)
    input_ids = zipf_words((STEPS, BATCH, SEQ), g)
    attention_mask = torch.ones(STEPS, BATCH, SEQ, dtype=torch.long)
    attention_mask[:, 3, SEQ - 4:] = 0
    input_ids[attention_mask == 0] = GPT_PAD
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def bert_batches(seed):
    """MLM + NSP pretraining batches: [CLS] A [SEP] B [SEP] (Zipf-distributed words; one row
    per step padded with 1 to 4 [PAD]s). About 15% of the word positions (at least one per row) are predicted:
    their label is the original id and their input [MASK] (80%), a random word (10%) or
    unchanged (10%); the random word is uniform, as BERT's. next_sentence_label is 0 (B follows A) or 1 (B random), at random."""
    g = torch.Generator().manual_seed(seed)

    def rand(n, lo=0, hi=None):
        return torch.randint(lo, hi, (n,), generator=g).tolist()

    def uniform():
        return torch.rand((), generator=g).item()

    shape = (STEPS, BATCH, SEQ)
    input_ids = torch.full(shape, PAD, dtype=torch.long)
    token_type_ids = torch.zeros(shape, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    labels = torch.full(shape, -100, dtype=torch.long)
    next_sentence_label = torch.zeros(STEPS, BATCH, dtype=torch.long)
    for s in range(STEPS):
        padded_row = rand(1, 0, BATCH)[0]
        for b in range(BATCH):
            pads = rand(1, 1, 5)[0] if b == padded_row else 0
            words = SEQ - 3 - pads
            len_a = rand(1, 2, words - 1)[0]  # both segments at least 2 words
            seg_a = zipf_words((len_a,), g).tolist()
            seg_b = zipf_words((words - len_a,), g).tolist()
            ids = [CLS] + seg_a + [SEP] + seg_b + [SEP]
            types = [0] * (len_a + 2) + [1] * (len(seg_b) + 1)
            n = len(ids)
            input_ids[s, b, :n] = torch.tensor(ids)
            token_type_ids[s, b, :n] = torch.tensor(types)
            attention_mask[s, b, :n] = 1
            next_sentence_label[s, b] = rand(1, 0, 2)[0]
            word_positions = [i for i, t in enumerate(ids) if t not in (CLS, SEP)]
            k = max(1, round(0.15 * len(word_positions)))
            order = torch.randperm(len(word_positions), generator=g)[:k].tolist()
            for j in sorted(order):
                i = word_positions[j]
                labels[s, b, i] = ids[i]
                r = uniform()
                if r < 0.8:
                    input_ids[s, b, i] = MASK
                elif r < 0.9:
                    input_ids[s, b, i] = rand(1, FIRST_WORD, VOCAB)[0]
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "labels": labels, "next_sentence_label": next_sentence_label}


class SesameDropout(SesameMasks):
    """torch.nn.functional.dropout with Sesame's masks (common.sesame_mask, mirroring
    src/ops/dropout.rs bit for bit): the n-th dropout call of a forward pass is site n, and a
    call that drops nothing still takes its site. transformers calls dropout in the order
    Sesame numbers its sites: the embeddings, then per layer the attention probabilities, the
    attention output and the feed-forward output."""

    __call__ = SesameMasks.dropout


def padded_label_batches(seed, pad, first=(), last=(), word_offset=0):
    """Sequence-classification batches: `first` Zipf-distributed words `last`, one row per
    step right-padded with 1 to 6 `pad`s (word ids, shifted by `word_offset`, are never the
    pad id), and one label per sequence, 0 to 2 at random."""
    g = torch.Generator().manual_seed(seed)
    shape = (STEPS, BATCH, SEQ)
    input_ids = torch.full(shape, pad, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    for s in range(STEPS):
        padded_row = torch.randint(0, BATCH, (), generator=g).item()
        for b in range(BATCH):
            pads = torch.randint(1, 7, (), generator=g).item() if b == padded_row else 0
            words = (zipf_words((SEQ - len(first) - len(last) - pads,), g) + word_offset).tolist()
            ids = list(first) + words + list(last)
            input_ids[s, b, :len(ids)] = torch.tensor(ids)
            attention_mask[s, b, :len(ids)] = 1
    labels = torch.randint(0, 3, (STEPS, BATCH), generator=g)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def classify_batches(seed):
    """BERT's: [CLS] words [SEP], padded with [PAD], one segment."""
    batches = padded_label_batches(seed, PAD, first=[CLS], last=[SEP])
    return {"input_ids": batches["input_ids"], "token_type_ids": torch.zeros_like(batches["input_ids"]),
            "attention_mask": batches["attention_mask"], "labels": batches["labels"]}


def token_classify_batches(seed):
    """BERT's token classification: classify_batches' input_ids, token_type_ids and
    attention_mask, and per-token labels [STEPS, BATCH, SEQ]: a class 0 to TOKEN_LABELS - 1 at
    random at each word position, -100 at [CLS], [SEP] and padding, and -100 on about 1 in 5
    word positions besides (transformers' token-classification data labels only a word's first
    subword), so ignored labels occur inside sentences too. The labels are drawn from their own
    generator, seeded seed + 10, after the inputs."""
    batches = classify_batches(seed)
    input_ids, attention_mask = batches["input_ids"], batches["attention_mask"]
    g = torch.Generator().manual_seed(seed + 10)
    classes = torch.randint(0, TOKEN_LABELS, input_ids.shape, generator=g)
    continuation = torch.rand(input_ids.shape, generator=g) < 0.2
    words = (attention_mask == 1) & (input_ids != CLS) & (input_ids != SEP)
    labels = classes.masked_fill(~words | continuation, -100)
    counted = labels != -100
    assert bool(counted.any(-1).all()), "every row keeps a label"
    assert bool((words & continuation).any()), "some word positions are ignored"
    return {"input_ids": input_ids, "token_type_ids": batches["token_type_ids"],
            "attention_mask": attention_mask, "labels": labels}


def qa_batches(seed):
    """BERT's question answering: [CLS] question [SEP] context [SEP] (Zipf-distributed words,
    a question of 2 to 4 of them), segment 1 from the context on, one row per step
    right-padded with 1 to 6 [PAD]s, and an answer span per row (see the docstring)."""
    g = torch.Generator().manual_seed(seed)

    def rand(lo, hi):
        return torch.randint(lo, hi, (), generator=g).item()

    shape = (STEPS, BATCH, SEQ)
    input_ids = torch.full(shape, PAD, dtype=torch.long)
    token_type_ids = torch.zeros(shape, dtype=torch.long)
    attention_mask = torch.zeros(shape, dtype=torch.long)
    start_positions = torch.zeros(STEPS, BATCH, dtype=torch.long)
    end_positions = torch.zeros(STEPS, BATCH, dtype=torch.long)
    for s in range(STEPS):
        padded_row = rand(0, BATCH)
        for b in range(BATCH):
            pads = rand(1, 7) if b == padded_row else 0
            question = zipf_words((rand(2, 5),), g).tolist()
            context = zipf_words((SEQ - 3 - len(question) - pads,), g).tolist()
            ids = [CLS] + question + [SEP] + context + [SEP]
            first = len(question) + 2  # the context's first token
            input_ids[s, b, :len(ids)] = torch.tensor(ids)
            token_type_ids[s, b, first:len(ids)] = 1
            attention_mask[s, b, :len(ids)] = 1
            if torch.rand((), generator=g).item() >= 0.2:
                start = rand(first, first + len(context))
                start_positions[s, b] = start
                end_positions[s, b] = min(start + rand(0, 3), first + len(context) - 1)
        if s % 4 == 3:
            row = rand(0, BATCH)
            start_positions[s, row] = end_positions[s, row] = SEQ + 3
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "start_positions": start_positions, "end_positions": end_positions}


def gpt_classify_batches(seed):
    """GPT's: words without special tokens, padded with <pad>."""
    batches = padded_label_batches(seed, GPT_PAD)
    assert int(batches["input_ids"][batches["attention_mask"] == 1].min()) >= FIRST_WORD > GPT_PAD
    return batches


def causal_lm_loss(logits, input_ids, attention_mask):
    """Position t predicts input_ids[t + 1]; targets where attention_mask is 0 are ignored."""
    targets = input_ids.masked_fill(attention_mask == 0, -100)[:, 1:]
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)


def tied_lm_weight(model):
    """The token embedding table the -classify GPTs' auxiliary LM head is tied to:
    GPT2Model's wte, OpenAIGPTModel's tokens_embed."""
    transformer = model.transformer
    return transformer.wte.weight if hasattr(transformer, "wte") else transformer.tokens_embed.weight


def gpt_classify_loss(model, batch, lm_weight):
    """The -classify GPTs' loss L = L_task + LM_COEF * L_LM (see the docstring) and its two
    parts, the LM head being h @ lm_weight^T. One pass of model.transformer makes the dropout
    calls in the order model(**batch) does."""
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    h = model.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    positions = torch.arange(input_ids.shape[-1])
    last = (positions * (input_ids != model.config.pad_token_id)).argmax(-1)
    pooled = model.score(h)[torch.arange(input_ids.shape[0]), last]
    task = torch.nn.functional.cross_entropy(pooled, batch["labels"])
    lm = causal_lm_loss(h @ lm_weight.T, input_ids, attention_mask)
    return task + LM_COEF * lm, task, lm


def check_loss(family, model, batch, loss):
    """The loss definition written in the docstring, recomputed from the logits."""
    with torch.no_grad():
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label", "start_positions", "end_positions")}
        if family in GPT_CLASSIFY:
            inputs["output_hidden_states"] = True
        out = model(**inputs)
        ce = torch.nn.functional.cross_entropy
        if family in GPT_CLASSIFY:
            # out.logits: transformers' own pooling at the last non-pad token. hidden_states[-1]
            # is the last_hidden_state, the input of both heads: GPT2Model's after ln_f
            # (transformers swaps the last block's output for it), OpenAIGPTModel's the last
            # block's output (GPT has no final LayerNorm).
            expected = ce(out.logits, batch["labels"]) \
                + LM_COEF * causal_lm_loss(out.hidden_states[-1] @ tied_lm_weight(model).T,
                                           batch["input_ids"], batch["attention_mask"])
        elif family.startswith("gpt2") or family == "openai-gpt":
            logits = out.logits[:, :-1].reshape(-1, VOCAB)
            expected = ce(logits, batch["labels"][:, 1:].reshape(-1), ignore_index=-100)
        elif family == "bert-classify":
            expected = ce(out.logits, batch["labels"])
        elif family == "bert-qa":
            # Positions clamped to 0..SEQ; SEQ is ignored.
            def span_loss(logits, positions):
                return ce(logits, positions.clamp(0, SEQ), ignore_index=SEQ)
            expected = (span_loss(out.start_logits, batch["start_positions"])
                        + span_loss(out.end_logits, batch["end_positions"])) / 2
        elif family == "bert-token-classify":
            # Every position is classified; the mean runs over the labels != -100 only.
            labels = batch["labels"].reshape(-1)
            logits = out.logits.reshape(-1, TOKEN_LABELS)
            counted = labels != -100
            expected = ce(logits[counted], labels[counted], reduction="sum") / counted.sum()
        else:
            expected = ce(out.prediction_logits.reshape(-1, VOCAB), batch["labels"].reshape(-1), ignore_index=-100) \
                + ce(out.seq_relationship_logits, batch["next_sentence_label"])
    assert torch.allclose(expected, loss, rtol=1e-6, atol=1e-6), (family, expected.item(), loss.item())


def train(family, model, batches, out_dir, dropout, check=check_loss, optimizer_settings=OPTIMIZER):
    """20 steps of `model` on `batches` (AdamW, or LAMB when `optimizer_settings` names it),
    writing grads.safetensors and trajectory.json; `check(family, model, batch, loss)`
    recomputes step 0's loss from the model's outputs."""
    decay = [n for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [n for n, p in model.named_parameters() if p.dim() < 2]
    params = dict(model.named_parameters())
    opt = optimizer_settings
    groups = [{"params": [params[n] for n in decay], "weight_decay": opt["weight_decay"]},
              {"params": [params[n] for n in no_decay], "weight_decay": 0.0}]
    if opt.get("name", "adamw") == "lamb":
        # Neither decay nor layer adaptation for biases and LayerNorm gains (ALBERT's LAMB).
        groups[1]["adapt"] = False
        optimizer = Lamb(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    else:
        optimizer = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"], foreach=False)
    steps = []
    model.train()
    for s in range(opt["steps"]):
        lr = learning_rate(s, opt["lr"], opt["warmup"], opt["steps"], opt["schedule"])
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = {k: v[s] for k, v in batches.items()}
        optimizer.zero_grad(set_to_none=True)
        dropout.begin(batch_index=s)
        if family in GPT_CLASSIFY:
            loss, task, lm = gpt_classify_loss(model, batch, tied_lm_weight(model))
            if s == 0:
                print(f"{family} step 0: task {task.item():.6f}  lm {lm.item():.6f}  "
                      f"task + {LM_COEF} * lm = {loss.item():.6f}")
        else:
            loss = model(**batch).loss
        loss.backward()
        if s == 0:
            sites = dropout.site
            dropout.begin(batch_index=s)
            check(family, model, batch, loss.detach())
            assert dropout.site == sites, (family, sites, dropout.site)  # the same dropout calls
            grads = {n: p.grad.detach().clone().contiguous() for n, p in model.named_parameters()}
            save_file(grads, os.path.join(out_dir, "grads.safetensors"))
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), opt["clip_grad_norm"])
        optimizer.step()
        steps.append({"step": s, "loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()})
    trajectory = {"optimizer": opt, "dropout_seed": dropout.seed}
    if family in GPT_CLASSIFY:
        trajectory["lm_coef"] = LM_COEF
    trajectory.update({"param_groups": {"decay": decay, "no_decay": no_decay}, "steps": steps})
    with open(os.path.join(out_dir, "trajectory.json"), "w") as f:
        json.dump(trajectory, f, indent=1)
    return steps


def write_run(family, model, write_tokenizer, batches, dropout, check=check_loss, optimizer_settings=OPTIMIZER):
    """The fixture folder of one run: init/ (the model and `write_tokenizer(dir)`'s files),
    batches.safetensors, the 20 steps' grads.safetensors and trajectory.json, and final/."""
    out_dir = os.path.join(OUT, family)
    init_dir, final_dir = os.path.join(out_dir, "init"), os.path.join(out_dir, "final")
    model.save_pretrained(init_dir, safe_serialization=True)
    write_tokenizer(init_dir)
    save_file({k: v.contiguous() for k, v in batches.items()}, os.path.join(out_dir, "batches.safetensors"))
    steps = train(family, model, batches, out_dir, dropout, check, optimizer_settings)
    model.save_pretrained(final_dir, safe_serialization=True)
    print(family)
    for st in steps:
        print(f"  step {st['step']:2d}  loss {st['loss']:.6f}  lr {st['lr']:.6g}  grad_norm {st['grad_norm']:.6f}")


def build(family):
    torch.manual_seed(0)
    p = DROPOUT_P if family in ("gpt2-dropout", "bert-dropout", "bert-classify", "bert-token-classify", "bert-qa") \
        + GPT_CLASSIFY else 0.0
    if family.startswith(("gpt2", "openai-gpt")):
        gpt2 = family.startswith("gpt2")
        # Classifiers: score = Linear(32, 3, bias=False), transformers' normal(0, 0.02) init,
        # pooled at the last token that is not pad_token_id.
        head = {"pad_token_id": GPT_PAD, "num_labels": 3} if family in GPT_CLASSIFY else {}
        prefix = "GPT2" if gpt2 else "OpenAIGPT"
        architecture = prefix + ("ForSequenceClassification" if head else "LMHeadModel")
        sizes = dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=48,
                     resid_pdrop=p, embd_pdrop=p, attn_pdrop=p, bos_token_id=None, eos_token_id=None,
                     architectures=[architecture], **head)
        if gpt2:
            config = transformers.GPT2Config(n_inner=64, activation_function="gelu_new", **sizes)
        else:
            # No n_inner in OpenAIGPTConfig: the feed-forward is 4 * n_embd = 128 wide. afn
            # keeps its default "gelu" (transformers' ACT_FNS maps it to gelu_new, the tanh
            # form).
            config = transformers.OpenAIGPTConfig(**sizes)
        config._attn_implementation = "eager"
        model = getattr(transformers, architecture)(config)
    else:
        # bert-token-classify: classifier_dropout stays None, so the classifier's dropout is
        # hidden_dropout_prob.
        architecture, num_labels = {"bert-classify": ("BertForSequenceClassification", 3),
                                    "bert-token-classify": ("BertForTokenClassification", TOKEN_LABELS),
                                    "bert-qa": ("BertForQuestionAnswering", 2),
                                    }.get(family, ("BertForPreTraining", 2))
        config = transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=48, type_vocab_size=2, hidden_act="gelu",
            hidden_dropout_prob=p, attention_probs_dropout_prob=p, architectures=[architecture],
            num_labels=num_labels)
        config._attn_implementation = "eager"
        model = getattr(transformers, architecture)(config)
    # transformers' own init leaves LayerNorm gains at 1 and biases at 0; nudge them so
    # their gradients are not special cases, keeping the std-0.02 weights of a real start.
    randomize(model, seed=1, bias_std=0.02, weight_std=None)
    return model


def main():
    torch.use_deterministic_algorithms(True)
    dropout = SesameDropout(DROPOUT_SEED)
    torch.nn.functional.dropout = dropout
    for family, make_batches in [("gpt2", gpt_batches), ("bert", bert_batches),
                                 ("gpt2-dropout", gpt_batches), ("bert-dropout", bert_batches),
                                 ("bert-classify", classify_batches), ("openai-gpt", gpt_batches),
                                 ("gpt2-classify", gpt_classify_batches),
                                 ("openai-gpt-classify", gpt_classify_batches),
                                 ("bert-token-classify", token_classify_batches),
                                 ("bert-qa", qa_batches)]:
        tokenizer = write_gpt_tokenizer if family.startswith(("gpt2", "openai-gpt")) else write_bert_vocab
        write_run(family, build(family), tokenizer, make_batches(seed=2), dropout)


if __name__ == "__main__":
    main()
