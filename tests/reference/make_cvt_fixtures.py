"""Writes the CVT tagger's parity fixture under tests/fixtures/cvt/tiny/, from the reference
written from the paper (cvt_reference.py), float64 then stored float32:

  model.safetensors       random weights under the `cvt` family's names: word_embeddings,
                          emb_scale, char_embeddings, char_cnn.{k} (widths 2, 3, 4),
                          encoder.{0,1}.{weight_ih,weight_hh,bias,weight_hr}[_reverse], and
                          each module's hidden and output Linear,
  config.json             the sizes and the three tags (a CvtForTokenClassification folder),
  tokenizer.json          a WordLevel tokenizer (made by the tokenizers library) over
                          cvt_text's special words then words: lower-cased with every digit
                          0, split on whitespace and punctuation, `<start> … <end>` added,
  inputs.json             four sentences (a digit word, a capitalised one, one longer than
                          max_word_length, a non-ASCII one, an unknown one), their word ids,
                          character ids, attention mask and gold tags (-100 off the words),
  pipeline.json           token-classification of texts (the sentences, and a raw one the
                          tokenizer splits at punctuation): each word's tag, its probability,
                          index, word (the vocabulary's spelling, or the text for an unknown
                          word) and character span,
  reference.safetensors   logits (the primary module) and logits.{module} of the five
                          auxiliary ones [B, T, 3]; hidden_states.0 (the word
                          representations), .1 and .2 (each layer's [fw; bw]),
  losses.json             the labelled loss (smoothing 0.1) and the unlabelled (CVT) loss,
                          without dropout,
  grads-labeled.safetensors, grads-unlabeled.safetensors
                          each one's gradient of every parameter (under its name).

Run from the repository root:  python tests/reference/make_cvt_fixtures.py
"""

import json
import os

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel

import cvt_reference as cvt
from common import WORDS

OUT = os.path.join("tests", "fixtures", "cvt", "tiny")
VOCAB = ["<pad>", "<unk>", "<start>", "<end>", "<missing>"] + WORDS[:20] + ["0000"]
LABELS = ["DET", "NOUN", "OTHER"]
OPTIONS = dict(word_embedding_size=6, char_embedding_size=4, char_filters=3, max_word_length=6, lstm_sizes=[7, 5], projection_size=4, module_size=4)
SENTENCES = [
    ["The", "cat", "sat", "on", "the", "mat"],
    ["a", "dog", "ran", "in", "2018"],
    ["extraordinarily", "big", "café"],
    ["zebra"],
]
TAGS = {"the": "DET", "a": "DET", "cat": "NOUN", "mat": "NOUN", "dog": "NOUN", "café": "NOUN", "zebra": "NOUN"}
SMOOTHING = 0.1


def tokenizer():
    """cvt_text's word ids as a tokenizers pipeline: normalize_word, then the vocabulary."""
    t = Tokenizer(WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    t.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(Regex(r"\d"), "0")])
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.post_processor = processors.TemplateProcessing(single="<start> $A <end>", special_tokens=[("<start>", 2), ("<end>", 3)])
    for n, s in enumerate(SENTENCES):
        assert t.encode(" ".join(s)).ids == cvt.encode([s], VOCAB, OPTIONS["max_word_length"])[0][0].tolist(), s
    return t


def pipeline_cases(sd):
    """The token-classification pipeline's answer for each text: the words the tokenizer
    finds, spelt (characters) from the text, tagged by the primary module."""
    t, cases = tokenizer(), []
    unk = VOCAB.index("<unk>")
    for text in [" ".join(s) for s in SENTENCES] + ["The cat, in 2018!"]:
        e = t.encode(text)
        words = [text[a:b] for (a, b), special in zip(e.offsets, e.special_tokens_mask) if not special]
        ids, chars, lengths = cvt.encode([words], VOCAB, OPTIONS["max_word_length"])
        assert ids[0].tolist() == e.ids, (text, e.ids)
        with torch.no_grad():
            probs = torch.softmax(cvt.forward(sd, ids, chars, lengths)[0]["primary"][0], dim=-1)
        result = []
        for index in range(1, len(e.ids) - 1):
            best = int(probs[index].argmax())
            start, end = e.offsets[index]
            word = text[start:end] if e.ids[index] == unk else e.tokens[index]
            result.append({"entity": LABELS[best], "score": float(probs[index, best]), "index": index, "word": word, "start": start, "end": end})
        cases.append({"text": text, "result": result})
    return cases


def parameters(generator):
    o = OPTIONS
    word, chars, filters, proj, size = o["word_embedding_size"], o["char_embedding_size"], o["char_filters"], o["projection_size"], o["module_size"]
    draw = lambda *shape: 0.4 * torch.randn(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    sd = {"word_embeddings.weight": draw(len(VOCAB), word), "emb_scale": torch.tensor([1.3], dtype=torch.float64), "char_embeddings.weight": draw(cvt.CHAR_VOCAB, chars)}
    for k, width in enumerate(cvt.FILTER_WIDTHS):
        sd[f"char_cnn.{k}.weight"], sd[f"char_cnn.{k}.bias"] = draw(filters, chars, width), draw(filters)
    inputs = word + filters * len(cvt.FILTER_WIDTHS)
    for layer, cell in enumerate(o["lstm_sizes"]):
        for suffix in ("", "_reverse"):
            name = f"encoder.{layer}."
            sd[name + "weight_ih" + suffix], sd[name + "weight_hh" + suffix] = draw(4 * cell, inputs), draw(4 * cell, proj)
            sd[name + "bias" + suffix], sd[name + "weight_hr" + suffix] = draw(4 * cell), draw(proj, cell)
        inputs = 2 * proj
    for module in cvt.MODULES:
        width = 4 * proj if module in ("primary", "full") else proj
        sd[f"{module}.hidden.weight"], sd[f"{module}.hidden.bias"] = draw(size, width), draw(size)
        sd[f"{module}.output.weight"], sd[f"{module}.output.bias"] = draw(len(LABELS), size), draw(len(LABELS))
    return sd


def gradients(sd, loss_of):
    params = {k: v.clone().requires_grad_(True) for k, v in sd.items()}
    loss = loss_of(params)
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True, materialize_grads=True)
    return loss.detach(), dict(zip(params, grads))


def main():
    os.makedirs(OUT, exist_ok=True)
    sd = parameters(torch.Generator().manual_seed(11))
    word_ids, char_ids, lengths = cvt.encode(SENTENCES, VOCAB, OPTIONS["max_word_length"])
    seq = word_ids.shape[1]
    labels = torch.full((len(SENTENCES), seq), -100)
    for n, s in enumerate(SENTENCES):
        for t, w in enumerate(s):
            labels[n, t + 1] = LABELS.index(TAGS.get(w.lower(), "OTHER"))
    with torch.no_grad():
        logits, hidden = cvt.forward(sd, word_ids, char_ids, lengths)
    reference = {"logits": logits["primary"], **{f"logits.{m}": logits[m] for m in cvt.MODULES[1:]}}
    reference.update({f"hidden_states.{i}": h for i, h in enumerate(hidden)})

    # The losses and their gradients without dropout; the teacher is the primary module's
    # probabilities from a pass without gradients.
    gold = labels.clamp(min=0)
    loss, grads = gradients(sd, lambda p: cvt.labeled_loss(cvt.forward(p, word_ids, char_ids, lengths)[0], gold, lengths, len(LABELS), SMOOTHING))
    labeled, losses = grads, {"labeled": loss.item()}
    teacher = torch.softmax(logits["primary"], dim=-1)
    loss, grads = gradients(sd, lambda p: cvt.unlabeled_loss(cvt.forward(p, word_ids, char_ids, lengths)[0], teacher, lengths))
    unlabeled = grads
    losses["unlabeled"] = loss.item()

    # A finite-difference check of one gradient: the reference's autograd through its loops.
    name, index, eps = "encoder.0.weight_hh_reverse", (3, 1), 1e-6
    bumped = {k: v.clone() for k, v in sd.items()}
    bumped[name][index] += eps
    numeric = (cvt.unlabeled_loss(cvt.forward(bumped, word_ids, char_ids, lengths)[0], teacher, lengths) - losses["unlabeled"]) / eps
    assert abs(numeric - unlabeled[name][index]) < 1e-4, (numeric, unlabeled[name][index])

    save_file({k: v.float().contiguous() for k, v in sd.items()}, os.path.join(OUT, "model.safetensors"))
    save_file({k: v.float().contiguous() for k, v in reference.items()}, os.path.join(OUT, "reference.safetensors"))
    for name, tensors in (("labeled", labeled), ("unlabeled", unlabeled)):
        save_file({k: v.float().contiguous() for k, v in tensors.items()}, os.path.join(OUT, f"grads-{name}.safetensors"))
    with open(os.path.join(OUT, "losses.json"), "w") as f:
        json.dump(losses, f)
    config = {
        "model_type": "cvt",
        "architectures": ["CvtForTokenClassification"],
        "vocab_size": len(VOCAB),
        "char_filter_widths": cvt.FILTER_WIDTHS,
        **OPTIONS,
        "pad_token_id": 0,
        "id2label": {str(i): label for i, label in enumerate(LABELS)},
        "label2id": {label: i for i, label in enumerate(LABELS)},
    }
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tokenizer().save(os.path.join(OUT, "tokenizer.json"))
    mask = [[1] * n + [0] * (seq - n) for n in lengths]
    with open(os.path.join(OUT, "inputs.json"), "w") as f:
        json.dump({"sentences": SENTENCES, "input_ids": word_ids.tolist(), "char_ids": char_ids.tolist(), "attention_mask": mask, "labels": labels.tolist()}, f)
    with open(os.path.join(OUT, "pipeline.json"), "w") as f:
        json.dump({"token-classification": pipeline_cases(sd)}, f, indent=1)
    print(f"{OUT}: {len(sd)} tensors, logits {tuple(logits['primary'].shape)}, losses {losses}")


if __name__ == "__main__":
    main()
