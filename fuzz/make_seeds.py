"""Writes the fuzz targets' seed corpora into fuzz/corpus/<target>/ (committed): small valid
inputs of every kind each target reads, from the committed test fixtures and tiny tokenizers
trained here. Run from the repository root: python3 fuzz/make_seeds.py [TARGET …] (the targets
named, else all)"""

import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import load, save
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers, normalizers, decoders

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
# The order of fuzz_targets/common.rs's MODELS: a seed's first byte picks one.
MODELS = [
    "bert/BertForPreTraining", "bert/BertForQuestionAnswering", "roberta/RobertaForMaskedLM",
    "xlm-roberta/XLMRobertaForSequenceClassification", "xlm-roberta-xl/XLMRobertaXLForMultipleChoice",
    "distilbert/DistilBertForMaskedLM", "albert/AlbertForPreTraining", "ernie/ErnieForPreTraining",
    "electra/ElectraForPreTraining", "electra/ElectraForMaskedLM", "gpt2/GPT2LMHeadModel",
    "gpt2/GPT2ForSequenceClassification", "openai-gpt/OpenAIGPTLMHeadModel", "bert/BertForTokenClassification",
]
TEXT = ["the cat sat on the mat.", "Hello, world! über 日本語", "a b c d e f g h i j k l m n o p"] * 3


# The targets whose seeds are written: those named on the command line, else all.
SELECTED = set(sys.argv[1:])


def seed(target, name, data):
    if SELECTED and target not in SELECTED:
        return
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def fixture(path):
    with open(os.path.join(FIXTURES, path), "rb") as f:
        return f.read()


def small_tokenizers():
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.decoder = decoders.WordPiece()
    wordpiece.train_from_iterator(TEXT, trainers.WordPieceTrainer(vocab_size=60, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(TEXT, trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unigram.decoder = decoders.Metaspace()
    unigram.train_from_iterator(TEXT, trainers.UnigramTrainer(vocab_size=40, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>"))
    wordlevel = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2, "!": 3}, unk_token="[UNK]"))
    wordlevel.pre_tokenizer = pre_tokenizers.Whitespace()
    return {"wordpiece": wordpiece, "bpe": bpe, "unigram": unigram, "wordlevel": wordlevel}


def main():
    # safetensors: every dtype the loader reads and one it refuses.
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    seed("safetensors", "dtypes", save({"a.f32": values, "b.f16": values.astype(np.float16), "c.f64": values.astype(np.float64),
                                        "d.i64": np.arange(3, dtype=np.int64), "e.scalar": np.array(1.5, dtype=np.float32)},
                                       metadata={"format": "pt"}))
    seed("safetensors", "empty", save({}))
    seed("safetensors", "elmo", fixture("elmo/tanh/model.safetensors"))
    index = json.loads(fixture("gpt2/GPT2LMHeadModel-sharded/model.safetensors.index.json"))
    seed("safetensors_index", "sharded", json.dumps(index))
    seed("safetensors_index", "one-shard", json.dumps({"weight_map": {"transformer.wte.weight": "model-00001-of-00003.safetensors"}}))
    seed("safetensors_index", "path", json.dumps({"weight_map": {"x": "../model-00001-of-00003.safetensors"}}))

    for i, model in enumerate(MODELS):
        seed("config", model.replace("/", "-"), bytes([i]) + fixture(f"{model}/config.json"))
    for i in (0, 5, 6, 10):
        seed("weights", MODELS[i].replace("/", "-"), bytes([i]) + fixture(f"{MODELS[i]}/model.safetensors"))

    for name, tokenizer in small_tokenizers().items():
        seed("tokenizer_json", name, tokenizer.to_str())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "hello", ",", "!"]
    seed("vocab_files", "wordpiece", bytes([0]) + "\n".join(vocab).encode())
    bpe_vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "i": 5, "\u0120": 6, "t": 7, "hi": 8, "\u0120t": 9, "<mask>": 10, "<|endoftext|>": 11}
    merges = "#version: 0.2\nh i\n\u0120 t\n"
    for kind in (1, 2):
        seed("vocab_files", f"bpe{kind}", bytes([kind]) + json.dumps(bpe_vocab).encode() + b"\0" + merges.encode())

    for name in ("small", "tanh"):
        seed("elmo_options", name, fixture(f"elmo/{name}/options.json"))
    seed("elmo_hdf5", "small", fixture("elmo/small/weights.hdf5"))

    seed("ids_json", "rows", json.dumps({"input_ids": [[1, 5, 2], [1, 2, 0]], "attention_mask": [[1, 1, 1], [1, 1, 0]],
                                          "token_type_ids": [[0, 0, 0], [0, 1, 1]]}))
    seed("ids_json", "choices", json.dumps({"input_ids": [[[0, 5, 2], [0, 6, 2]]], "task_type_ids": [[[0, 0, 0], [1, 1, 1]]]}))

    # What `sesame train --replay-batches tests/fixtures/train/gpt2/batches.safetensors --steps 2`
    # writes, and moments shaped as the fixture's parameters.
    settings = {
        "objective": "clm", "arch": None, "fresh_model": None, "data": None, "replay_batches": "batches.safetensors",
        "steps": 2, "batch_size": 8, "seq_len": 48, "grad_accum": 1, "seed": 0, "dropout": None, "mask_probability": 0.15,
        "whole_word_mask": False, "pretokenized": False, "group_by_length": False, "doc_stride": None, "lm_coef": 0.5,
        "eval_every": 0, "eval_batches": 20, "eval_data": None,
        "schedule": {"lr": 0.001, "warmup": 0, "decay": "cosine", "total_steps": 2, "min_lr": 0.0},
        "adamw": {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01, "clip_grad_norm": 1.0},
    }
    fresh = dict(settings, arch="gpt2", fresh_model={"layers": 2, "heads": 2, "hidden": 16, "context": 32, "tokenizer": "char", "elmo_options": None})
    init = load(fixture("train/gpt2/init/model.safetensors"))
    moments = save({name: (value * 0.01).astype(np.float32) for name, value in init.items()})
    seed("trainer_state", "clm", json.dumps({"step": 2, "settings": settings}).encode() + b"\0" + moments)
    seed("trainer_state", "fresh", json.dumps({"step": 1, "settings": fresh}))
    training_data_seeds()


def training_data_seeds():
    """One file per reader of fuzz_targets/training_data.rs, its first byte the reader's number."""
    documents = "The cat sat on the mat. It was warm.\nThe dog ran home.\n\nParis is in France. The river flowed past the mill."
    files = [
        ("tsv", "sentence\tlabel\nthe cat sat\t1\nthe dog ran home\t0\n"),
        ("conll", "the O\ncat B-ANIMAL\nsat O\n\nthe O\ndog B-ANIMAL\n"),
        ("squad", json.dumps({"data": [{"paragraphs": [{"context": "the cat sat on the mat .", "qas": [
            {"id": "1", "question": "where ?", "answers": [{"text": "the mat", "answer_start": 15}]}]}]}]})),
        ("swag", ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
                 "0,v,0,x,the cat sat .,it was,gold,warm,\"cold, wet\",red,blue,0\n"),
        ("annotated", json.dumps({"text": "Paris is in France. The cat sat.", "entities": [[0, 5], [12, 18]], "phrases": [[20, 27]]})
                      + "\n" + json.dumps({"text": "The dog ran home."}) + "\n"),
        ("gazetteer", "# places\nParis\nNew York\nFrance\n"),
        ("tasks", fixture("train/ernie2/final/tasks.json").decode()),
        ("ernie2-text", documents),
    ]
    for kind, (name, text) in enumerate(files):
        seed("training_data", name, bytes([kind]) + text.encode())


if __name__ == "__main__":
    main()
