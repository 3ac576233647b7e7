"""Writes the parity fixtures of the encoder families under tests/fixtures/<model_type>/<class>/:
RoBERTa, XLM-RoBERTa, XLM-RoBERTa-XL (pre-LN), DistilBERT, ALBERT, ERNIE and ELECTRA, every head transformers has for
them, and BERT's multiple-choice head. Each folder holds a tiny random-weight checkpoint in the
Hugging Face layout (config.json, model.safetensors), a tokenizer.json (word-level over the
fixtures' words, with the family's special tokens and template), the inputs (inputs.json) and
transformers' outputs (reference.safetensors: logits, every hidden state and attention map).

The shapes are chosen to catch what a power-of-two test would not: hidden size 30 over 5 heads
(head dim 6), feed-forward 37, a prime vocabulary of 101, a padded batch, ALBERT with 3 layers
over 2 groups of 2 inner layers (and E = 14 ≠ H), ELECTRA with E = 14, DistilBERT with
sinusoidal positions left out of its checkpoint (the loader computes them), ERNIE with task
types. Multiple-choice inputs are [2 examples, 3 choices, 7 tokens].

Pipeline answers go to pipeline.json: fill-mask (transformers' pipeline, each family's own mask
token), text-classification and zero-shot-classification (an NLI-labelled RoBERTa, the
pipelines), question answering (transformers v4's pipeline post-processing, which v5 removed,
from make_pipeline_fixtures.py), next-sentence prediction with ALBERT's sentence-order head and multiple choice
(softmax of the heads' logits over (prompt, choice) pairs, computed here: neither is a
transformers pipeline).

Made with: torch 2.15.0, transformers 5.23.0 (requirements.txt beside this).
Run from the repository root:  python tests/reference/make_family_fixtures.py
"""

import json
import os

import torch
import transformers
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from common import WORDS, randomize, write_bert_vocab, write_fixture
from make_pipeline_fixtures import qa_cases

OUT = os.path.join("tests", "fixtures")
SIZES = dict(vocab_size=101, hidden_size=30, num_hidden_layers=2, num_attention_heads=5, intermediate_size=37, max_position_embeddings=40)
ROBERTA_VOCAB = ["<s>", "<pad>", "</s>", "<unk>"] + WORDS + ["<mask>"]

# Two sequences of 7, the second padded after 5 (with the family's padding id), with segments.
def inputs(pad, token_types=True, task_types=False):
    batch = {
        "input_ids": [[5, 17, 45, 98, 6, 60, 7], [5, 8, 91, 7, 33, pad, pad]],
        "attention_mask": [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]],
    }
    if token_types:
        batch["token_type_ids"] = [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0, 0]]
    if task_types:
        batch["task_type_ids"] = [[0, 1, 2, 1, 0, 2, 1], [2, 2, 1, 0, 0, 0, 0]]
    return batch


def choice_inputs(pad, token_types=True):
    """[2 examples, 3 choices, 7 tokens]: each choice a row, some padded."""
    ids = [[[5, 17, 45, 6, 60, 7, 21], [5, 17, 45, 6, 61, 7, pad], [5, 17, 45, 6, 70, 71, 7]],
           [[5, 8, 6, 33, 7, pad, pad], [5, 8, 6, 34, 35, 7, pad], [5, 8, 6, 90, 91, 92, 7]]]
    batch = {"input_ids": ids, "attention_mask": [[[int(t != pad) for t in row] for row in ex] for ex in ids]}
    if token_types:
        batch["token_type_ids"] = [[[0, 0, 0, 0, 1, 1, 1] for _ in ex] for ex in ids]
    return batch


def roberta_tokenizer(out_dir):
    """tokenizer.json: word-level over ROBERTA_VOCAB with RoBERTa's template (<s> A </s></s>
    B </s>) and <mask>. Returns transformers' tokenizer loaded from it."""
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(ROBERTA_VOCAB)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tok.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    return transformers.PreTrainedTokenizerFast(tokenizer_file=path, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                                                unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")


def bert_tokenizer(out_dir, keep_vocab_txt=True):
    """BERT's WordPiece over BERT_VOCAB as vocab.txt and tokenizer.json (ALBERT, a SentencePiece
    family, keeps only the tokenizer.json)."""
    write_bert_vocab(out_dir)
    if not keep_vocab_txt:
        os.remove(os.path.join(out_dir, "vocab.txt"))
    return transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(out_dir, "tokenizer.json"), cls_token="[CLS]", sep_token="[SEP]",
                                                unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]")


NLI_LABELS = {"0": "contradiction", "1": "neutral", "2": "entailment"}

FAMILIES = {
    "roberta": dict(config=lambda: transformers.RobertaConfig(**SIZES, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2),
                    prefix="Roberta", heads=["Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                    pad=1, token_types=False, tokenizer=roberta_tokenizer, mask="<mask>"),
    "xlm-roberta": dict(config=lambda: transformers.XLMRobertaConfig(**SIZES, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2),
                        prefix="XLMRoberta", heads=["Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                        pad=1, token_types=False, tokenizer=roberta_tokenizer, mask="<mask>"),
    "xlm-roberta-xl": dict(config=lambda: transformers.XLMRobertaXLConfig(**SIZES, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2),
                           prefix="XLMRobertaXL", heads=["Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                           pad=1, token_types=False, tokenizer=roberta_tokenizer, mask="<mask>"),
    "distilbert": dict(config=lambda: transformers.DistilBertConfig(vocab_size=101, dim=30, n_layers=2, n_heads=5, hidden_dim=37, max_position_embeddings=40),
                       prefix="DistilBert", heads=["Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                       pad=0, token_types=False, tokenizer=bert_tokenizer, mask="[MASK]"),
    "albert": dict(config=lambda: transformers.AlbertConfig(**{**SIZES, "num_hidden_layers": 3}, embedding_size=14, num_hidden_groups=2, inner_group_num=2, pad_token_id=0),
                   prefix="Albert", heads=["Model", "ForPreTraining", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                   pad=0, token_types=True, tokenizer=lambda d: bert_tokenizer(d, keep_vocab_txt=False), mask="[MASK]"),
    "ernie": dict(config=lambda: transformers.ErnieConfig(**SIZES, use_task_id=True, task_type_vocab_size=3),
                  prefix="Ernie", heads=["Model", "ForMaskedLM", "ForPreTraining", "ForNextSentencePrediction", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                  pad=0, token_types=True, task_types=True, tokenizer=bert_tokenizer, mask="[MASK]"),
    "electra": dict(config=lambda: transformers.ElectraConfig(**SIZES, embedding_size=14),
                    prefix="Electra", heads=["Model", "ForPreTraining", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice"],
                    pad=0, token_types=True, tokenizer=bert_tokenizer, mask="[MASK]"),
    "bert": dict(config=lambda: transformers.BertConfig(**SIZES), prefix="Bert", heads=["ForMultipleChoice"], pad=0, token_types=True, tokenizer=bert_tokenizer, mask="[MASK]"),
}

TEXTS = ["the cat sat on the mat .", "she walked across the old bridge in the morning !"]
PAIRS = [("the cat sat on the mat .", "the dog ran to the park ."), ("rain fell softly on the roof .", "she read a book by the fire .")]
CHOICES = [("the cat sat on the", ["mat .", "moon .", "river flowed past the old mill ."]), ("in the morning the bird", ["sang .", "slept under the stars .", "read a book ."])]


def write(path, cases):
    with open(os.path.join(path, "pipeline.json"), "w") as f:
        json.dump(cases, f, indent=1)


def pipelines(family, arch, model, tokenizer, out_dir, mask):
    """pipeline.json of the heads a pipeline serves."""
    if arch.endswith("ForMaskedLM"):
        fill = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
        write(out_dir, {"fill-mask": [{"text": t, "top_k": 3, "result": fill(t, top_k=3)} for t in (f"the cat sat on the {mask} .", f"the {mask} ran to the {mask} !")]})
    elif arch.endswith("ForSequenceClassification"):
        classify = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer, device="cpu")
        cases = {"text-classification": [{"text": t, "result": classify(t, top_k=None)} for t in TEXTS]
                 + [{"text": a, "text_pair": b, "result": classify({"text": a, "text_pair": b}, top_k=None)} for a, b in PAIRS]}
        if family == "roberta":
            zero_shot = transformers.pipeline("zero-shot-classification", model=model, tokenizer=tokenizer, device="cpu")
            labels = ["cat", "dog", "rain"]
            cases["zero-shot-classification"] = [
                {"text": t, "labels": labels, "multi_label": multi, "hypothesis_template": template, "result": zero_shot(t, candidate_labels=labels, multi_label=multi, hypothesis_template=template)}
                for t in TEXTS for multi in (False, True) for template in ("This example is {}.", "the {} .")
            ]
        write(out_dir, cases)
    elif arch.endswith("ForMultipleChoice"):
        cases = []
        for prompt, choices in CHOICES:
            enc = tokenizer([prompt] * len(choices), choices, padding=True, return_tensors="pt")
            with torch.no_grad():
                logits = model(**{k: v.unsqueeze(0) for k, v in enc.items()}).logits[0]
            cases.append({"prompt": prompt, "choices": choices, "scores": torch.softmax(logits, -1).tolist()})
        write(out_dir, {"multiple-choice": cases})
    elif arch.endswith("ForQuestionAnswering"):
        # RoBERTa's positions start after the padding id: 38 of its 40 rows hold tokens.
        positions = SIZES["max_position_embeddings"] - (2 if family.startswith("xlm-roberta") or family == "roberta" else 0)
        write(out_dir, {"question-answering": qa_cases(model, tokenizer, tokenizer.model_input_names, positions)})
    elif arch == "AlbertForPreTraining":
        cases = []
        for a, b in PAIRS:
            with torch.no_grad():
                out = model(**tokenizer(a, b, return_tensors="pt"))
            cases.append({"text": a, "text_pair": b, "is_next_probability": torch.softmax(out.sop_logits[0], -1)[0].item()})
        write(out_dir, {"next-sentence-prediction": cases})


def drop_tensor(out_dir, suffix):
    """Removes the tensor whose name ends with `suffix` from the saved checkpoint."""
    path = os.path.join(out_dir, "model.safetensors")
    tensors = load_file(path)
    kept = {k: v for k, v in tensors.items() if not k.endswith(suffix)}
    assert len(kept) == len(tensors) - 1, suffix
    save_file(kept, path, metadata={"format": "pt"})


def main():
    for f, (family, spec) in enumerate(FAMILIES.items()):
        for h, head in enumerate(spec["heads"]):
            arch = spec["prefix"] + head
            config = spec["config"]()
            config.architectures = [arch]
            if head == "ForSequenceClassification" and family == "roberta":
                config.id2label, config.label2id = {int(k): v for k, v in NLI_LABELS.items()}, {v: int(k) for k, v in NLI_LABELS.items()}
            elif head in ("ForSequenceClassification", "ForTokenClassification"):
                config.num_labels = 3 if head == "ForSequenceClassification" else 5
            sinusoidal = family == "distilbert" and head == "Model"
            if sinusoidal:
                config.sinusoidal_pos_embds = True
            # The eager implementation is the one that returns attention probabilities.
            config._attn_implementation = "eager"
            torch.manual_seed(0)
            model = getattr(transformers, arch)(config).eval()
            randomize(model, seed=100 * f + h)
            if sinusoidal:
                embeddings = model.embeddings.position_embeddings.weight
                with torch.no_grad():
                    transformers.models.distilbert.modeling_distilbert._create_sinusoidal_embeddings(embeddings.shape[0], embeddings.shape[1], embeddings)
            out_dir = os.path.join(OUT, family, arch)
            os.makedirs(out_dir, exist_ok=True)
            batch = choice_inputs(spec["pad"], spec["token_types"]) if head == "ForMultipleChoice" else inputs(spec["pad"], spec["token_types"], spec.get("task_types", False))
            names = write_fixture(model, out_dir, batch)
            if sinusoidal:
                drop_tensor(out_dir, "position_embeddings.weight")
            tokenizer = spec["tokenizer"](out_dir)
            # What the family's own tokenizer class returns (PreTrainedTokenizerFast's default
            # leaves token types out).
            tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"] if spec["token_types"] else ["input_ids", "attention_mask"]
            pipelines(family, arch, model, tokenizer, out_dir, spec["mask"])
            print(arch, names)


if __name__ == "__main__":
    main()
