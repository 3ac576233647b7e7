"""Writes the BERT parity fixtures under tests/fixtures/bert/: for each head, a tiny
random-weight checkpoint in the Hugging Face layout (config.json, model.safetensors), the
inputs (inputs.json, as a tokenizer returns them) and transformers' outputs
(reference.safetensors: every output the Rust side compares, named as the output object's
attributes: logits, last_hidden_state, pooler_output, hidden_states.{i}, attentions.{i}, ...).

Made with: torch 2.15.0, transformers 5.23.0, safetensors (see requirements.txt beside this).
Run from the repository root:  python tests/reference/make_bert_fixtures.py
"""

import json
import os

import torch
import transformers
from safetensors.torch import save_file

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

# Two sequences of 7 tokens; the second padded after 5, with a second segment.
INPUTS = {
    "input_ids": [[2, 17, 45, 98, 3, 60, 4], [2, 8, 91, 4, 33, 0, 0]],
    "attention_mask": [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]],
    "token_type_ids": [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0, 0]],
}


def randomize(model, seed):
    """Weights of order 1 (transformers' init, std 0.02, would leave every layer near zero
    and make the comparison weak); LayerNorm gains near 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


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
        model.save_pretrained(out_dir, safe_serialization=True)
        with open(os.path.join(out_dir, "inputs.json"), "w") as f:
            json.dump(INPUTS, f)
        tensors = {k: torch.tensor(v) for k, v in INPUTS.items()}
        with torch.no_grad():
            result = model(**tensors, output_hidden_states=True, output_attentions=True)
        outputs = {}
        for name in ["logits", "prediction_logits", "seq_relationship_logits", "start_logits",
                     "end_logits", "last_hidden_state", "pooler_output"]:
            value = getattr(result, name, None)
            if value is not None:
                outputs[name] = value.float().clone()
        for j, h in enumerate(result.hidden_states):
            outputs[f"hidden_states.{j}"] = h.float().clone()
        for j, a in enumerate(result.attentions):
            outputs[f"attentions.{j}"] = a.float().clone()
        save_file(outputs, os.path.join(out_dir, "reference.safetensors"))
        print(arch, sorted(outputs))


if __name__ == "__main__":
    main()
