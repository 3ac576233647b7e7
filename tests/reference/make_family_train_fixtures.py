"""Writes the training fixtures of the BERT-like families under tests/fixtures/train/
{roberta-mlm,distilbert-mlm,albert-sop,ernie-nsp,electra-rtd}/, in the layout
make_train_fixtures.py documents (init/, batches.safetensors, grads.safetensors,
trajectory.json, final/) and trained the same way: 20 AdamW steps (lr 1e-3, warmup 4 then
cosine, weight decay 0.1 on the parameters of rank >= 2, clipping at 1.0) from the step-0
gradients on, every dropout probability 0.2 with Sesame's masks (SesameDropout), float32,
CPU, eager attention. Each model is 32 wide with 4 heads, a 64-wide feed-forward and 48
positions; LayerNorm gains and biases nudged off 1 and 0 as make_train_fixtures.py does.

  roberta-mlm     RobertaForMaskedLM: 2 layers, one token type, pad_token_id 1 (positions
                  counted after it, the padding row of both the word and the position table
                  untrained), <s> words </s> rows with one row per step right-padded with 1
                  to 6 <pad>s, about 15% of the words predicted (80% <mask>, 10% a random
                  word, 10% unchanged), no next-sentence label (RoBERTa's objective). Loss:
                  cross entropy over the labels != -100.
  xlm-roberta-xl-mlm
                  XLMRobertaXLForMaskedLM: roberta-mlm's sizes, batches and loss with pre-LN
                  layers (x + f(LayerNorm(x)), no LayerNorm on the embeddings, one after the
                  last layer); it drops out after the embeddings, on the attention probabilities
                  and after the attention's output projection, not after the feed-forward block.
  distilbert-mlm  DistilBertForMaskedLM: 2 layers, no token types, learned positions; rows
                  [CLS] words [SEP], padded and masked as roberta-mlm's. DistilBERT drops out
                  after the embeddings, on the attention probabilities and after the
                  feed-forward block, not after the attention's output projection.
  albert-sop      AlbertForPreTraining: embedding_size 16 projected to 32, 3 layers in 2 groups
                  of 2 inner layers (depth l runs group int(l / 1.5): group 0 twice, so its
                  layers' gradients sum over two uses), batches as the bert fixture's ([CLS] A
                  [SEP] B [SEP], masked) with sentence_order_label (1 = the segments swapped) in
                  place of next_sentence_label; classifier_dropout_prob 0.2 before the SOP
                  head. ALBERT drops out after the embeddings, on the attention probabilities
                  and after the attention's output projection, not after the feed-forward
                  block. Loss: masked-LM cross entropy + sentence-order cross entropy.
  albert-lamb     albert-sop's model and batches trained with LAMB (tests/reference/lamb.py,
                  written from You et al. 2019): lr 2e-3, betas (0.9, 0.999), eps 1e-6,
                  weight decay 0.01, neither decay nor layer adaptation for biases and
                  LayerNorm gains (the parameters of rank 1), the same schedule and clipping.
  ernie-nsp       ErnieForPreTraining with use_task_id and 3 task types: the bert fixture's
                  batches plus task_type_ids, each row's real tokens one task id 0 to 2 at
                  random (0 at padding). Loss: masked-LM + next-sentence cross entropy.
  electra-rtd     ElectraForPreTraining (the discriminator): embedding_size 16 projected to
                  32, 2 layers; rows [CLS] words [SEP], padded as above, about 15% of the
                  words replaced by a random word, labels 1 where the token differs from the
                  original, else 0, on every position; the discriminator head's weights and
                  biases drawn with std 0.3 (see main). Loss: transformers' BCE with logits,
                  mean over the positions whose attention_mask is 1.
  roberta-classify, electra-classify, distilbert-classify
                  RobertaForSequenceClassification, ElectraForSequenceClassification,
                  DistilBertForSequenceClassification with 3 labels, the sizes above (2
                  layers; ELECTRA's embeddings 16 wide): each family's head on the first
                  token — RoBERTa's dropout, dense, tanh, dropout, out_proj; ELECTRA's the same
                  with GELU; DistilBERT's pre_classifier, ReLU, dropout (seq_classif_dropout
                  0.2), classifier — on rows <s>/[CLS] words </s>/[SEP], one row per step
                  right-padded with 1 to 6 pads, labels 0 to 2 at random. Loss: cross entropy,
                  mean over the batch.

  distilbert-token-classify, distilbert-qa
                  DistilBertForTokenClassification (5 labels; dropout `dropout` before the
                  classifier) and DistilBertForQuestionAnswering (dropout `qa_dropout` before
                  qa_outputs), distilbert-mlm's sizes, with make_train_fixtures.py's
                  bert-token-classify and bert-qa batches without token_type_ids (DistilBERT has
                  no token types); qa_dropout 0.2. Losses: as the BERT fixtures'.

Made with: torch 2.15.0, transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3
(requirements.txt beside this).
Run from the repository root:  python tests/reference/make_family_train_fixtures.py
"""

import torch
import transformers

from common import BERT_VOCAB, randomize, write_bert_vocab
from make_family_fixtures import ROBERTA_VOCAB, roberta_tokenizer
from make_train_fixtures import (BATCH, DROPOUT_P, DROPOUT_SEED, OPTIMIZER, SEQ, STEPS, TOKEN_LABELS, VOCAB, SesameDropout, bert_batches,
                                 padded_label_batches, qa_batches, token_classify_batches, write_run)

assert len(ROBERTA_VOCAB) == VOCAB
CLS, SEP, MASK, PAD = (BERT_VOCAB.index(t) for t in ["[CLS]", "[SEP]", "[MASK]", "[PAD]"])
# RoBERTa's ids: <s> 0, <pad> 1, </s> 2, <unk> 3, the words 4..97, <mask> 98.
R_BOS, R_PAD, R_EOS, R_MASK = (ROBERTA_VOCAB.index(t) for t in ["<s>", "<pad>", "</s>", "<mask>"])
SIZES = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64, max_position_embeddings=48,
             hidden_dropout_prob=DROPOUT_P, attention_probs_dropout_prob=DROPOUT_P)


def single_segment_batches(seed, bos, eos, pad, first_word):
    """bos words eos rows (the words first_word .. first_word + 93), one row per step
    right-padded with 1 to 6 pads; and a generator for what is drawn next."""
    batches = padded_label_batches(seed, pad, first=[bos], last=[eos], word_offset=first_word - 5)
    del batches["labels"]
    return batches, torch.Generator().manual_seed(seed + 10)


def mlm_batches(seed, bos, eos, pad, mask, first_word):
    """single_segment_batches with about 15% of each row's words (at least one) predicted:
    label the original id, input `mask` (80%), a random word (10%) or unchanged (10%)."""
    batches, g = single_segment_batches(seed, bos, eos, pad, first_word)
    input_ids = batches["input_ids"]
    labels = torch.full_like(input_ids, -100)
    for s in range(STEPS):
        for b in range(BATCH):
            positions = [i for i in range(SEQ) if batches["attention_mask"][s, b, i] and input_ids[s, b, i] not in (bos, eos)]
            k = max(1, round(0.15 * len(positions)))
            for j in sorted(torch.randperm(len(positions), generator=g)[:k].tolist()):
                i = positions[j]
                labels[s, b, i] = input_ids[s, b, i]
                r = torch.rand((), generator=g).item()
                if r < 0.8:
                    input_ids[s, b, i] = mask
                elif r < 0.9:
                    input_ids[s, b, i] = torch.randint(first_word, first_word + 94, (), generator=g).item()
    batches["labels"] = labels
    return batches


def roberta_batches(seed):
    return mlm_batches(seed, R_BOS, R_EOS, R_PAD, R_MASK, first_word=4)


def distilbert_batches(seed):
    return mlm_batches(seed, CLS, SEP, PAD, MASK, first_word=5)


def albert_batches(seed):
    """The bert fixture's batches, the pair label named sentence_order_label; ALBERT reads
    token types as BERT does."""
    batches = bert_batches(seed)
    batches["sentence_order_label"] = batches.pop("next_sentence_label")
    return batches


def ernie_batches(seed):
    batches = bert_batches(seed)
    g = torch.Generator().manual_seed(seed + 20)
    tasks = torch.randint(0, 3, (STEPS, BATCH, 1), generator=g).expand(STEPS, BATCH, SEQ)
    batches["task_type_ids"] = (tasks * batches["attention_mask"]).contiguous()
    return batches


def electra_batches(seed):
    """Replaced-token detection: about 15% of each row's words (at least one) replaced by a
    random word; labels 1 where the input differs from the original token."""
    batches, g = single_segment_batches(seed, CLS, SEP, PAD, first_word=5)
    original = batches["input_ids"].clone()
    input_ids = batches["input_ids"]
    for s in range(STEPS):
        for b in range(BATCH):
            positions = [i for i in range(SEQ) if batches["attention_mask"][s, b, i] and input_ids[s, b, i] not in (CLS, SEP)]
            k = max(1, round(0.15 * len(positions)))
            for j in torch.randperm(len(positions), generator=g)[:k].tolist():
                input_ids[s, b, positions[j]] = torch.randint(5, VOCAB, (), generator=g).item()
    batches["labels"] = (input_ids != original).long()
    assert batches["labels"].sum() > STEPS * BATCH // 2
    return batches


def roberta_classify_batches(seed):
    return padded_label_batches(seed, R_PAD, first=[R_BOS], last=[R_EOS], word_offset=-1)


def bert_classify_batches(seed):
    return padded_label_batches(seed, PAD, first=[CLS], last=[SEP])


def without_token_types(make_batches):
    """make_batches without token_type_ids, for a family that has no token types."""
    def made(seed):
        batches = make_batches(seed)
        del batches["token_type_ids"]
        return batches
    return made


def sizes_for(family):
    p = DROPOUT_P
    if family == "xlm-roberta-xl-mlm":
        return transformers.XLMRobertaXLConfig(vocab_size=VOCAB, num_hidden_layers=2, type_vocab_size=1, pad_token_id=R_PAD, bos_token_id=R_BOS,
                                               eos_token_id=R_EOS, architectures=["XLMRobertaXLForMaskedLM"], **SIZES)
    if family == "albert-lamb":
        return sizes_for("albert-sop")
    if family.endswith("-classify") and family != "distilbert-token-classify":
        base = sizes_for(family.replace("-classify", {"roberta": "-mlm", "distilbert": "-mlm", "electra": "-rtd"}[family.split("-")[0]]))
        prefix = {"roberta": "Roberta", "distilbert": "DistilBert", "electra": "Electra"}[family.split("-")[0]]
        base.architectures = [prefix + "ForSequenceClassification"]
        base.num_labels = 3
        if family == "distilbert-classify":
            base.seq_classif_dropout = p
        return base
    if family == "roberta-mlm":
        return transformers.RobertaConfig(vocab_size=VOCAB, num_hidden_layers=2, type_vocab_size=1, pad_token_id=R_PAD, bos_token_id=R_BOS,
                                          eos_token_id=R_EOS, architectures=["RobertaForMaskedLM"], **SIZES)
    if family in ("distilbert-token-classify", "distilbert-qa"):
        base = sizes_for("distilbert-mlm")
        base.architectures = ["DistilBertForTokenClassification" if family.endswith("classify") else "DistilBertForQuestionAnswering"]
        base.num_labels = TOKEN_LABELS if family.endswith("classify") else 2
        base.qa_dropout = p
        return base
    if family == "distilbert-mlm":
        return transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=48,
                                             dropout=p, attention_dropout=p, pad_token_id=PAD, architectures=["DistilBertForMaskedLM"])
    if family == "albert-sop":
        return transformers.AlbertConfig(vocab_size=VOCAB, embedding_size=16, num_hidden_layers=3, num_hidden_groups=2, inner_group_num=2,
                                         hidden_act="gelu_new", classifier_dropout_prob=p, pad_token_id=PAD, architectures=["AlbertForPreTraining"],
                                         **SIZES)
    if family == "ernie-nsp":
        return transformers.ErnieConfig(vocab_size=VOCAB, num_hidden_layers=2, use_task_id=True, task_type_vocab_size=3, pad_token_id=PAD,
                                        architectures=["ErnieForPreTraining"], **SIZES)
    if family == "electra-rtd":
        return transformers.ElectraConfig(vocab_size=VOCAB, embedding_size=16, num_hidden_layers=2, pad_token_id=PAD,
                                          architectures=["ElectraForPreTraining"], **SIZES)
    raise ValueError(family)


def check_loss(family, model, batch, loss):
    """The loss definitions of the docstring, recomputed from the model's outputs."""
    ce = torch.nn.functional.cross_entropy
    labels = batch.get("labels")
    with torch.no_grad():
        inputs = {k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label", "sentence_order_label", "start_positions", "end_positions")}
        out = model(**inputs)
        if family == "distilbert-token-classify":
            counted = labels.reshape(-1) != -100
            expected = ce(out.logits.reshape(-1, TOKEN_LABELS)[counted], labels.reshape(-1)[counted])
        elif family == "distilbert-qa":
            def span_loss(logits, positions):
                return ce(logits, positions.clamp(0, SEQ), ignore_index=SEQ)
            expected = (span_loss(out.start_logits, batch["start_positions"]) + span_loss(out.end_logits, batch["end_positions"])) / 2
        elif family == "electra-rtd":
            active = batch["attention_mask"] == 1
            expected = torch.nn.functional.binary_cross_entropy_with_logits(out.logits[active], labels[active].float())
        elif family.endswith("-classify"):
            expected = ce(out.logits, labels)
        elif family in ("roberta-mlm", "xlm-roberta-xl-mlm", "distilbert-mlm"):
            expected = ce(out.logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
        else:
            mlm = ce(out.prediction_logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
            pair = out.sop_logits if family.startswith("albert") else out.seq_relationship_logits
            expected = mlm + ce(pair, batch.get("sentence_order_label", batch.get("next_sentence_label")))
    assert torch.allclose(expected, loss, rtol=1e-6, atol=1e-6), (family, expected.item(), loss.item())


LAMB = dict(OPTIMIZER, name="lamb", lr=2e-3, beta2=0.999, eps=1e-6, weight_decay=0.01)

FAMILIES = [("roberta-mlm", roberta_batches), ("xlm-roberta-xl-mlm", roberta_batches), ("distilbert-mlm", distilbert_batches), ("albert-sop", albert_batches),
            ("albert-lamb", albert_batches),
            ("ernie-nsp", ernie_batches), ("electra-rtd", electra_batches), ("roberta-classify", roberta_classify_batches),
            ("electra-classify", bert_classify_batches), ("distilbert-classify", bert_classify_batches),
            ("distilbert-token-classify", without_token_types(token_classify_batches)), ("distilbert-qa", without_token_types(qa_batches))]


def main():
    torch.use_deterministic_algorithms(True)
    dropout = SesameDropout(DROPOUT_SEED)
    torch.nn.functional.dropout = dropout
    for family, make_batches in FAMILIES:
        torch.manual_seed(0)
        config = sizes_for(family)
        config._attn_implementation = "eager"
        model = getattr(transformers, config.architectures[0])(config)
        randomize(model, seed=1, bias_std=0.02, weight_std=None)
        if family == "electra-rtd":
            # At transformers' init the discriminator's logits are all near 0 and the loss
            # sits at ln 2 whatever the encoder does: weights of order 1 give it a signal.
            with torch.no_grad():
                g = torch.Generator().manual_seed(4)
                for p in model.discriminator_predictions.parameters():
                    p.copy_(0.3 * torch.randn(p.shape, generator=g))
        tokenizer = roberta_tokenizer if family.startswith(("roberta", "xlm-roberta")) else write_bert_vocab
        optimizer = LAMB if family == "albert-lamb" else OPTIMIZER
        write_run(family, model, tokenizer, make_batches(seed=2), dropout, check=check_loss, optimizer_settings=optimizer)


if __name__ == "__main__":
    main()
