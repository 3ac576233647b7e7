"""Loads checkpoints that `sesame train` wrote into Python transformers and records their
logits, so that tests/trained_models.rs can check Sesame gives the same: the proof that a
Sesame checkpoint round-trips through transformers.

For each folder it asserts that from_pretrained finds every weight it expects and no
unexpected one (a missing weight would be silently re-initialised), encodes a fixed text
with the folder's tokenizer.json, and writes tests/fixtures/roundtrip/<name>.safetensors with
`input_ids` [1, T] (int64) and the model's output logits (float32):
  baby-gpt-shakespeare  models/baby-gpt-shakespeare (GPT2LMHeadModel, trained on Tiny Shakespeare)
  bert-pretraining      tests/fixtures/roundtrip/bert-pretraining (BertForPreTraining, a fresh
                        BERT with a WordPiece vocabulary, 30 MLM+NSP steps with dropout 0.1 on
                        WikiText-2 text: `sesame train --arch bert --tokenizer wordpiece:600
                        --layers 2 --heads 2 --hidden 32 --objective mlm+nsp --seq-len 64
                        --batch-size 8 --steps 30 --lr 3e-3 --dropout 0.1 --seed 4`)
  openai-gpt-clm        tests/fixtures/roundtrip/openai-gpt-clm (OpenAIGPTLMHeadModel, the tiny GPT
                        of tests/fixtures/train/openai-gpt after its 20 replayed causal-LM
                        batches with dropout 0.1: `sesame train --objective clm --model-init
                        tests/fixtures/train/openai-gpt/init --replay-batches
                        tests/fixtures/train/openai-gpt/batches.safetensors --lr 1e-3
                        --warmup 4 --schedule cosine --weight-decay 0.1 --dropout 0.1 --seed 4`)
  bert-wikitext         models/bert-wikitext (BertForPreTraining, the demo's WikiText-2 BERT)
  roberta-wikitext, albert-wikitext, ernie-wikitext, distilbert-wikitext
                        models/<name> (RobertaForMaskedLM, AlbertForPreTraining,
                        ErnieForPreTraining, DistilBertForMaskedLM: the demo's WikiText-2 models
                        pretrained with RoBERTa's, ALBERT's and ERNIE's recipes, and the BERT
                        distilled into a DistilBERT, scripts/pretraining-comparison.sh)
  electra-wikitext-generator, electra-wikitext-discriminator
                        models/electra-wikitext/generator and discriminator (ElectraForMaskedLM,
                        ElectraForPreTraining: the demo's WikiText-2 ELECTRA, pretrained with
                        ELECTRA's recipe, scripts/pretraining-comparison.sh)
  roberta-mlm, xlm-roberta-xl-mlm, distilbert-mlm, albert-sop, ernie-nsp, electra-rtd
                        tests/fixtures/roundtrip/<name> (RobertaForMaskedLM,
                        XLMRobertaXLForMaskedLM, DistilBertForMaskedLM, AlbertForPreTraining, ErnieForPreTraining,
                        ElectraForPreTraining: the tiny models of tests/fixtures/train/<name>
                        after their 20 replayed batches with dropout 0.1: `sesame train
                        --objective mlm|mlm+sop|mlm+nsp|rtd --model-init
                        tests/fixtures/train/<name>/init --replay-batches
                        tests/fixtures/train/<name>/batches.safetensors --lr 1e-3 --warmup 4
                        --schedule cosine --weight-decay 0.1 --dropout 0.1 --seed 4 --out
                        tests/fixtures/roundtrip/<name>`)
  electra-pretraining-discriminator, electra-pretraining-generator
                        tests/fixtures/roundtrip/<name> (ElectraForPreTraining, ElectraForMaskedLM: the
                        two folders `sesame train --objective electra` writes after replaying
                        the ELECTRA pretraining run of tests/fixtures/train/electra-pretraining:
                        `sesame train --objective electra --model-init
                        tests/fixtures/train/electra-pretraining/init --replay-batches
                        tests/fixtures/train/electra-pretraining/batches.safetensors --steps 20
                        --lr 1e-3 --warmup 4 --schedule cosine --weight-decay 0.1 --beta2 0.95
                        --clip-grad-norm 1.0 --dropout 0.1 --seed 4 --out DIR`, DIR/discriminator
                        and DIR/generator)
  ernie2-mlm, ernie2-caps, ernie2-order
                        tests/fixtures/roundtrip/<name> (ErnieForMaskedLM, ErnieForTokenClassification,
                        ErnieForSequenceClassification: three of the task folders `sesame train
                        --objective multi-task` exports after replaying ERNIE 2.0's continual
                        pretraining run of tests/fixtures/train/ernie2: `sesame train --objective
                        multi-task --model-init tests/fixtures/train/ernie2/init --replay-batches
                        tests/fixtures/train/ernie2/batches.safetensors --steps 20 --lr 1e-3
                        --warmup 4 --schedule cosine --weight-decay 0.1 --beta2 0.95
                        --clip-grad-norm 1.0 --dropout 0.1 --seed 4 --out DIR`, DIR/tasks/<task>)
  fine-tune-bert-classify
                        tests/fixtures/roundtrip/fine-tune-bert-classify
                        (BertForSequenceClassification: the folder the package's fineTune saves
                        after the reference run of tests/fixtures/fine-tune/bert-classify,
                        tests/reference/make_fine_tune_roundtrip.mjs; its id2label is checked too)

Each file holds every logits output the model returns (logits, prediction_logits,
seq_relationship_logits, sop_logits). A folder is loaded as the class its config.json names.

Made with: torch 2.15.0, transformers 5.23.0 (requirements.txt beside this).
Run from the repository root:  python tests/reference/check_sesame_checkpoints.py [NAME …]
(the names given, else all)
"""

import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

OUT = os.path.join("tests", "fixtures", "roundtrip")
CHECKPOINTS = [
    ("baby-gpt-shakespeare", os.path.join("models", "baby-gpt-shakespeare"), "ROMEO:\nWhat light through yonder window breaks?"),
    ("bert-pretraining", os.path.join(OUT, "bert-pretraining"), "the [MASK] of the river is in the north ."),
    ("openai-gpt-clm", os.path.join(OUT, "openai-gpt-clm"), "the old dog sat by the river and the bird sang"),
    ("bert-wikitext", os.path.join("models", "bert-wikitext"), "she became one of [MASK] most popular singers ."),
    ("roberta-wikitext", os.path.join("models", "roberta-wikitext"), "she became one of [MASK] most popular singers ."),
    ("albert-wikitext", os.path.join("models", "albert-wikitext"), "she became one of [MASK] most popular singers ."),
    ("ernie-wikitext", os.path.join("models", "ernie-wikitext"), "she became one of [MASK] most popular singers ."),
    ("distilbert-wikitext", os.path.join("models", "distilbert-wikitext"), "she became one of [MASK] most popular singers ."),
    ("electra-wikitext-generator", os.path.join("models", "electra-wikitext", "generator"), "she became one of [MASK] most popular singers ."),
    ("electra-wikitext-discriminator", os.path.join("models", "electra-wikitext", "discriminator"), "she became one of the most popular singers ."),
    ("roberta-mlm", os.path.join(OUT, "roberta-mlm"), "the cat sat on the <mask> by the river ."),
    ("xlm-roberta-xl-mlm", os.path.join(OUT, "xlm-roberta-xl-mlm"), "the old mill by the <mask> was quiet ."),
    ("distilbert-mlm", os.path.join(OUT, "distilbert-mlm"), "the cat sat on the [MASK] by the river ."),
    ("albert-sop", os.path.join(OUT, "albert-sop"), "the dog ran to the [MASK] and saw a big tree ."),
    ("ernie-nsp", os.path.join(OUT, "ernie-nsp"), "the bird sang in the morning while the [MASK] shone ."),
    ("electra-rtd", os.path.join(OUT, "electra-rtd"), "the children played with a ball from the bench ."),
    ("electra-pretraining-discriminator", os.path.join(OUT, "electra-pretraining-discriminator"), "the cat sat on the mat by the river ."),
    ("electra-pretraining-generator", os.path.join(OUT, "electra-pretraining-generator"), "the cat sat on the [MASK] by the river ."),
    ("ernie2-mlm", os.path.join(OUT, "ernie2-mlm"), "the river ran past the [MASK] mill ."),
    ("ernie2-caps", os.path.join(OUT, "ernie2-caps"), "the river ran past the old mill ."),
    ("ernie2-order", os.path.join(OUT, "ernie2-order"), "the bird sang . the river ran past the old mill ."),
    ("fine-tune-bert-classify", os.path.join(OUT, "fine-tune-bert-classify"), "the children played in the warm sun ."),
]
# Class names a fine-tuned folder must carry (config.json's id2label, as fineTune's `labels`).
LABELS = {"fine-tune-bert-classify": {0: "negative", 1: "positive"}}
LOGITS = ["logits", "prediction_logits", "seq_relationship_logits", "sop_logits"]


def main():
    torch.manual_seed(0)
    wanted = set(sys.argv[1:])
    unknown = wanted - {name for name, _, _ in CHECKPOINTS}
    assert not unknown, f"no checkpoint named {sorted(unknown)}"
    for name, folder, text in CHECKPOINTS:
        if wanted and name not in wanted:
            continue
        with open(os.path.join(folder, "config.json")) as f:
            architecture = json.load(f)["architectures"][0]
        model, info = getattr(transformers, architecture).from_pretrained(folder, output_loading_info=True)
        problems = {k: v for k, v in info.items() if v and k != "mismatched_keys" or (k == "mismatched_keys" and v)}
        assert not problems, f"{name}: transformers could not load every weight: {problems}"
        if name in LABELS:
            assert model.config.id2label == LABELS[name], f"{name}: id2label {model.config.id2label}"
        model.eval()
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
        input_ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            out = model(input_ids=input_ids)
        tensors = {"input_ids": input_ids}
        for output in LOGITS:
            if getattr(out, output, None) is not None:
                tensors[output] = getattr(out, output).float().contiguous()
        save_file(tensors, os.path.join(OUT, f"{name}.safetensors"))
        print(name, type(model).__name__, "input", list(input_ids.shape), {k: list(v.shape) for k, v in tensors.items()})


if __name__ == "__main__":
    main()
