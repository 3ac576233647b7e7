"""Helpers shared by the fixture scripts (torch 2.15.0, transformers 5.23.0)."""

import json
import os

import torch
from safetensors.torch import save_file

OUTPUT_NAMES = ["logits", "prediction_logits", "seq_relationship_logits", "start_logits",
                "end_logits", "last_hidden_state", "pooler_output"]


def randomize(model, seed):
    """Weights of order 1 (transformers' init, std 0.02, would leave every layer near zero
    and make the comparison weak); LayerNorm gains near 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name or (".ln_" in name and name.endswith("weight")):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def write_fixture(model, out_dir, inputs):
    """Saves the checkpoint, inputs.json and reference.safetensors (every output of a
    forward pass with hidden states and attentions, named as the output object's fields)."""
    model.save_pretrained(out_dir, safe_serialization=True)
    with open(os.path.join(out_dir, "inputs.json"), "w") as f:
        json.dump(inputs, f)
    tensors = {k: torch.tensor(v) for k, v in inputs.items()}
    with torch.no_grad():
        result = model(**tensors, output_hidden_states=True, output_attentions=True)
    outputs = {}
    for name in OUTPUT_NAMES:
        value = getattr(result, name, None)
        if value is not None:
            outputs[name] = value.float().clone()
    for j, h in enumerate(result.hidden_states):
        outputs[f"hidden_states.{j}"] = h.float().clone()
    for j, a in enumerate(result.attentions):
        outputs[f"attentions.{j}"] = a.float().clone()
    save_file(outputs, os.path.join(out_dir, "reference.safetensors"))
    return sorted(outputs)
