"""Answers of transformers' pipelines on the committed random-weight fixture models, for the
pipeline tests (native tests/pipelines.rs and the browser API tests): text-classification and
token-classification from the pipelines; question-answering (removed from transformers 5)
and next-sentence prediction (never a pipeline: softmax of the NSP logits, index 0 = "is
next") computed here from the model's logits.

Run from the repository root after make_bert_fixtures.py / make_gpt_fixtures.py:
    python tests/reference/make_pipeline_fixtures.py
Versions: torch 2.15.0, transformers 5.23.0 (tests/reference/requirements.txt).
"""

import json
import os

import torch
import transformers

FIXTURES = "tests/fixtures"
TEXTS = ["the cat sat on the mat .", "she walked across the old bridge in the morning !"]
PAIRS = [("the cat sat on the mat .", "the dog ran to the park ."),
         ("rain fell softly on the roof .", "she read a book by the fire .")]
QUESTIONS = [("who sat on the mat ?", "the cat sat on the mat while the dog ran to the park ."),
             ("what fell on the roof ?", "in the night rain fell softly on the roof of the old house .")]


def load(family, arch):
    path = os.path.join(FIXTURES, family, arch)
    model = getattr(transformers, arch).from_pretrained(path).eval()
    if os.path.exists(os.path.join(path, "vocab.txt")):
        tokenizer = transformers.BertTokenizer.from_pretrained(path)
    else:
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"), unk_token="<unk>", pad_token="<pad>")
    return path, model, tokenizer


def write(path, cases):
    with open(os.path.join(path, "pipeline.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print("wrote", os.path.join(path, "pipeline.json"))


def text_classification(family, arch):
    path, model, tokenizer = load(family, arch)
    classify = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer, device="cpu")
    cases = [{"text": t, "result": classify(t, top_k=None)} for t in TEXTS]
    cases += [{"text": a, "text_pair": b, "result": classify({"text": a, "text_pair": b}, top_k=None)} for a, b in PAIRS] if family == "bert" else []
    write(path, {"text-classification": cases})


def token_classification():
    path, model, tokenizer = load("bert", "BertForTokenClassification")
    # BertTokenizer (slow) has no offsets; the fast tokenizer of the same vocabulary does.
    fast = transformers.BertTokenizerFast.from_pretrained(path)
    tag = transformers.pipeline("token-classification", model=model, tokenizer=fast, device="cpu")
    cases = [{"text": t, "result": [{k: (float(v) if k == "score" else v) for k, v in e.items()} for e in tag(t)]} for t in TEXTS + ["the zebra sat"]]
    write(path, {"token-classification": cases})


LONG_CONTEXT = ("the cat sat on the mat while the dog ran to the park . in the night rain fell softly on the roof "
                "of the old house . the dog sat on the roof of the house .")


def qa_answers(model, fast, input_names, q, c, k, windows=None):
    """transformers 5 removed the question-answering pipeline; this is its v4 post-processing
    (QuestionAnsweringPipeline preprocess with doc_stride windows, then postprocess +
    decode_spans, max_answer_len 15) on the model's logits, written out with numpy. Each
    window runs alone, unpadded, as v4's chunk pipeline ran it; `input_names` are the inputs
    the model reads."""
    import numpy as np
    kwargs = {} if windows is None else dict(truncation="only_second", max_length=windows[0], stride=windows[1], return_overflowing_tokens=True)
    enc = fast(q, c, return_offsets_mapping=True, **kwargs)
    features = len(enc["input_ids"]) if windows is not None else 1
    answers = []
    for f in range(features):
        row = (lambda name: enc[name][f]) if windows is not None else (lambda name: enc[name])
        offsets = row("offset_mapping")
        with torch.no_grad():
            out = model(**{name: torch.tensor([row(name)]) for name in input_names})
        seq_ids = enc.sequence_ids(f)
        # Candidates: context tokens, and [CLS] (p_mask 0) whose probability is zeroed later.
        keep = np.array([s == 1 or i == 0 for i, s in enumerate(seq_ids)])
        def probs(logits):
            x = np.where(keep, logits[0].numpy(), -10000.0)
            x = np.exp(x - x.max())
            x = x / x.sum()
            x[0] = 0.0
            return x
        start, end = probs(out.start_logits), probs(out.end_logits)
        outer = np.tril(np.triu(np.outer(start, end)), 15 - 1)
        flat = outer.flatten()
        order = np.argsort(-flat, kind="stable")[:k]
        s_idx, e_idx = np.unravel_index(order, outer.shape)
        # Spans lie in the context ([CLS] is kept in the softmax only).
        answers += [{"score": float(outer[s, e]), "start": offsets[s][0], "end": offsets[e][1], "answer": c[offsets[s][0]:offsets[e][1]]}
                    for s, e in zip(s_idx, e_idx) if seq_ids[s] == 1 and seq_ids[e] == 1]
    return sorted(answers, key=lambda a: -a["score"])[:k]


def qa_cases(model, fast, input_names, positions):
    """The question-answering cases: short contexts (top 1 and 3), a long one in windows of 24
    tokens sharing 6, and in Sesame's default windows (the model's positions, sharing half)."""
    answer = lambda *args: qa_answers(model, fast, input_names, *args)
    cases = []
    for q, c in QUESTIONS:
        for k in (1, 3):
            cases.append({"question": q, "context": c, "top_k": k, "result": answer(q, c, k)})
    # A context over several windows of 24 tokens sharing 6.
    for q in ("who sat on the roof ?", "what fell ?"):
        for k in (1, 4):
            cases.append({"question": q, "context": LONG_CONTEXT, "top_k": k, "max_seq_len": 24, "doc_stride": 6, "result": answer(q, LONG_CONTEXT, k, (24, 6))})
    # The defaults: windows of the model's positions sharing half of them.
    cases.append({"question": "what fell ?", "context": LONG_CONTEXT, "top_k": 2, "result": answer("what fell ?", LONG_CONTEXT, 2, (positions, positions // 2))})
    return cases


def question_answering():
    path, model, _ = load("bert", "BertForQuestionAnswering")
    fast = transformers.BertTokenizerFast.from_pretrained(path)
    write(path, {"question-answering": qa_cases(model, fast, ("input_ids", "token_type_ids", "attention_mask"), 40)})


def next_sentence(arch):
    path, model, tokenizer = load("bert", arch)
    cases = []
    for a, b in PAIRS:
        with torch.no_grad():
            out = model(**tokenizer(a, b, return_tensors="pt"))
        logits = out.logits if arch == "BertForNextSentencePrediction" else out.seq_relationship_logits
        cases.append({"text": a, "text_pair": b, "is_next_probability": torch.softmax(logits[0], -1)[0].item()})
    write(path, {"next-sentence-prediction": cases})


def main():
    text_classification("bert", "BertForSequenceClassification")
    text_classification("gpt2", "GPT2ForSequenceClassification")
    token_classification()
    question_answering()
    next_sentence("BertForNextSentencePrediction")
    next_sentence("BertForPreTraining")


if __name__ == "__main__":
    main()
