"""Writes pipeline.json for the recurrent fixtures the browser and Node tests run as model
folders (the folders `sesame convert-ulmfit` and `sesame convert-cove` make in place from
the committed state dicts; tests/ulmfit_parity.rs and tests/cove_parity.rs check that the
committed folders are exactly that conversion):

awd_lstm/fastai-classifier/pipeline.json  text-classification: each text through fastai's
    text rules (`defaults.text_proc_rules`, which also put xxbos first), split into words,
    numericalized with the fixture's vocabulary (xxunk for an unknown word) and classified by
    fastai's `get_text_classifier` holding the fixture's state dict (eval mode, a batch of
    one); every label with its softmax probability, best first. One text is longer than the
    classifier's max_len, so fastai pools over its last chunks only.
cove/tiny/pipeline.json  feature-extraction: each text split as the CoVe folder's tokenizer
    splits (\\w+ or a run of punctuation; an unknown word is <unk>), run through the
    MT-LSTM of make_cove_fixtures.py, then mean-pooled over the words (pooling "mean") or the
    first word's vector (pooling "cls").

fastai's tokenizer is spaCy's, which is not installed here: the texts are ones whose words
spaCy and a split on \\w+ and punctuation agree on. Sesame's own split of fastai's rules is
checked against fastai separately (tests/fixtures/tokenizers/fastai_rules.json).

Needs fastai 2.7.18 (see make_awd_lstm_fastai_fixtures.py for the venv) and torch 2.15.0.
Run from the repository root:  python tests/reference/make_recurrent_pipeline_fixtures.py
"""

import json
import os
import re
import warnings
from functools import reduce

import torch
from safetensors.torch import load_file

warnings.filterwarnings("ignore")
from fastai.text.all import AWD_LSTM, defaults, get_text_classifier  # noqa: E402

from make_awd_lstm_fastai_fixtures import ENCODER  # noqa: E402
from make_cove_fixtures import E, H, mtlstm  # noqa: E402

FIXTURES = os.path.join("tests", "fixtures")
WORD = re.compile(r"\w+|[^\w\s]+")


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def ulmfit_classifier():
    folder = os.path.join(FIXTURES, "awd_lstm", "fastai-classifier")
    vocab, labels = read_lines(os.path.join(folder, "vocab.txt")), read_lines(os.path.join(folder, "labels.txt"))
    with open(os.path.join(folder, "options.json")) as f:
        options = json.load(f)
    clf = get_text_classifier(AWD_LSTM, len(vocab), len(labels), seq_len=options["bptt"], config=dict(ENCODER), lin_ftrs=[10], ps=[0.1], max_len=options["max_len"])
    clf.load_state_dict(load_file(os.path.join(folder, "state_dict.safetensors")))
    clf.eval()
    o2i = {w: i for i, w in enumerate(vocab)}
    texts = [
        "the cat sat on the mat",
        "The big red bird sang in the tree and a small dog ran to the park and the house",
        "a zebra saw the BLUE house",
    ]
    cases = []
    for text in texts:
        ruled = reduce(lambda t, rule: rule(t), defaults.text_proc_rules, text)
        ids = [o2i.get(w, 0) for w in WORD.findall(ruled)]
        with torch.no_grad():
            probs = torch.softmax(clf(torch.tensor([ids]))[0][0].double(), 0)
        ranked = sorted(zip(labels, probs.tolist()), key=lambda p: -p[1])
        cases.append({"text": text, "ids": ids, "result": [{"label": label, "score": score} for label, score in ranked]})
    with open(os.path.join(folder, "pipeline.json"), "w") as f:
        json.dump({"text-classification": cases}, f, indent=1)
    print(f"{folder}: {len(cases)} text-classification cases, {[len(c['ids']) for c in cases]} tokens")


def cove():
    folder = os.path.join(FIXTURES, "cove", "tiny")
    vocab = read_lines(os.path.join(folder, "vocab.txt"))
    state = {k: v.double() for k, v in load_file(os.path.join(folder, "state_dict.safetensors")).items()}
    lstm = torch.nn.LSTM(E, H, num_layers=2, bidirectional=True, batch_first=True).double()
    lstm.load_state_dict(state)
    vectors = torch.zeros(len(vocab), E, dtype=torch.float64)
    with open(os.path.join(folder, "glove.txt")) as f:
        for line in f:
            word, *values = line.rstrip("\n").rsplit(" ", E)
            if word in vocab:
                vectors[vocab.index(word)] = torch.tensor([float(v) for v in values], dtype=torch.float64)
    o2i = {w: i for i, w in enumerate(vocab)}
    cases = []
    for text, pooling in [("the cat sat on the mat", "mean"), ("a dog ran to the park , a zebra saw the bird", "mean"), ("red house", "cls")]:
        ids = [o2i.get(w, 0) for w in WORD.findall(text)]
        with torch.no_grad():
            _, out = mtlstm(lstm, vectors, [ids], [len(ids)])
        pooled = out[0].mean(0) if pooling == "mean" else out[0, 0]
        cases.append({"text": text, "pooling": pooling, "ids": ids, "result": pooled.tolist()})
    with open(os.path.join(folder, "pipeline.json"), "w") as f:
        json.dump({"feature-extraction": cases}, f, indent=1)
    print(f"{folder}: {len(cases)} feature-extraction cases")


if __name__ == "__main__":
    ulmfit_classifier()
    cove()
