"""Writes the BERT parity fixtures under tests/fixtures/bert/: for each head, a tiny
random-weight checkpoint in the Hugging Face layout (config.json, model.safetensors), the
inputs (inputs.json, as a tokenizer returns them) and transformers' outputs
(reference.safetensors: every output the Rust side compares, named as the output object's
attributes: logits, last_hidden_state, pooler_output, hidden_states.{i}, attentions.{i}, ...),
a word-level vocab.txt, and for the masked-LM head the fill-mask pipeline's answers on two
texts (fill_mask.json).

Made with: torch 2.15.0, transformers 5.23.0 (requirements.txt beside this).
Run from the repository root:  python tests/reference/make_bert_fixtures.py
"""

import json
import os

import torch
import transformers

from common import randomize, write_bert_vocab, write_fixture

OUT = os.path.join("tests", "fixtures", "bert")
HEADS = {
    "BertModel": {},
    "BertForMaskedLM": {},
    "BertForPreTraining": {},
    "BertForNextSentencePrediction": {},
    "BertForSequenceClassification": {"num_labels": 3},
    "BertForTokenClassification": {"num_labels": 5},
    "BertForQuestionAnswering": {},
}

FILL_MASK = [("the cat sat on the [MASK] .", 5), ("the [MASK] ran to the [MASK] !", 3)]

# Two sequences of 7 tokens; the second padded after 5, with a second segment.
INPUTS = {
    "input_ids": [[2, 17, 45, 98, 3, 60, 4], [2, 8, 91, 4, 33, 0, 0]],
    "attention_mask": [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]],
    "token_type_ids": [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0, 0]],
}


def main():
    torch.manual_seed(0)
    for i, (arch, extra) in enumerate(HEADS.items()):
        config = transformers.BertConfig(
            vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=40, type_vocab_size=2,
            hidden_act="gelu", layer_norm_eps=1e-12, architectures=[arch], **extra,
        )
        # The eager implementation is the one that returns attention probabilities.
        config._attn_implementation = "eager"
        model = getattr(transformers, arch)(config).eval()
        randomize(model, seed=i)
        out_dir = os.path.join(OUT, arch)
        names = write_fixture(model, out_dir, INPUTS)
        tokenizer = write_bert_vocab(out_dir)
        if arch == "BertForMaskedLM":
            fill = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, device="cpu")
            cases = [{"text": text, "top_k": k, "result": fill(text, top_k=k)} for text, k in FILL_MASK]
            with open(os.path.join(out_dir, "fill_mask.json"), "w") as f:
                json.dump(cases, f, indent=1)
        print(arch, names)


if __name__ == "__main__":
    main()
