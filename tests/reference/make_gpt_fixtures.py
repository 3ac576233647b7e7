"""Writes the GPT-2 and GPT (openai-gpt) parity fixtures under tests/fixtures/{gpt2,openai-gpt}/:
tiny random-weight checkpoints in the Hugging Face layout, a padded batch (inputs.json),
transformers' outputs (reference.safetensors) and, for the LM heads, 32 greedily generated
tokens (generation.json, from generate(do_sample=False)) and perplexities of two texts
(perplexity.json: one in a single window, one longer than the model's positions scored in
sliding windows as transformers' perplexity guide does); a word-level tokenizer.json.

Made with: torch 2.15.0, transformers 5.23.0 (requirements.txt beside this).
Run from the repository root:  python tests/reference/make_gpt_fixtures.py
"""

import json
import os

import torch
import transformers

from common import GPT_VOCAB, randomize, write_fixture, write_gpt_tokenizer

# Two sequences of 7 tokens; the second padded (pad id 0) after 5.
INPUTS = {
    "input_ids": [[5, 17, 45, 98, 3, 60, 4], [7, 8, 91, 4, 33, 0, 0]],
    "attention_mask": [[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]],
}
PROMPT = [[5, 17, 33, 2]]
NEW_TOKENS = 32
SHORT_TEXT = "the old dog sat by the river and watched the moon ."
LONG_TEXT = " ".join(GPT_VOCAB[5:75])  # 70 tokens: over n_positions = 48

MODELS = [
    ("gpt2", "GPT2Model", transformers.GPT2Config, {}),
    ("gpt2", "GPT2LMHeadModel", transformers.GPT2Config, {}),
    ("gpt2", "GPT2ForSequenceClassification", transformers.GPT2Config, {"num_labels": 3, "pad_token_id": 0}),
    ("openai-gpt", "OpenAIGPTModel", transformers.OpenAIGPTConfig, {}),
    ("openai-gpt", "OpenAIGPTLMHeadModel", transformers.OpenAIGPTConfig, {}),
]


def config_for(family, arch, cls, extra):
    # No end-of-text token: greedy generation runs its full 32 tokens.
    common = dict(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=48, architectures=[arch],
                  bos_token_id=None, eos_token_id=None, **extra)
    if family == "gpt2":
        return cls(n_inner=40, activation_function="gelu_new", **common)
    return cls(afn="gelu", **common)


def sliding_window_perplexity(model, ids, window, stride):
    """Every token after the first scored once, each window scoring the tokens the previous
    one did not (transformers' perplexity guide)."""
    nll_sum, scored, prev_end = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + window, len(ids))
        chunk = torch.tensor([ids[begin:end]])
        labels = chunk.clone()
        labels[:, : max(prev_end, 1) - begin] = -100  # scored before (or the first token)
        new = end - max(prev_end, 1)
        with torch.no_grad():
            loss = model(chunk, labels=labels).loss.item()
        nll_sum += loss * new
        scored += new
        prev_end = end
        if end == len(ids):
            break
    return torch.exp(torch.tensor(nll_sum / scored)).item(), scored


def perplexity_cases(model, tokenizer):
    cases = []
    for text, window, stride in [(SHORT_TEXT, None, None), (LONG_TEXT, 32, 12)]:
        ids = tokenizer(text)["input_ids"]
        if window is None:
            with torch.no_grad():
                loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
            ppl, scored = torch.exp(torch.tensor(loss)).item(), len(ids) - 1
        else:
            ppl, scored = sliding_window_perplexity(model, ids, window, stride)
        cases.append({"text": text, "ids": ids, "window": window, "stride": stride, "perplexity": ppl, "scored_tokens": scored})
    return cases


def main():
    torch.manual_seed(0)
    for i, (family, arch, cls, extra) in enumerate(MODELS):
        config = config_for(family, arch, cls, extra)
        # The eager implementation is the one that returns attention probabilities.
        config._attn_implementation = "eager"
        model = getattr(transformers, arch)(config).eval()
        randomize(model, seed=100 + i)
        out_dir = os.path.join("tests", "fixtures", family, arch)
        names = write_fixture(model, out_dir, INPUTS)
        tokenizer = write_gpt_tokenizer(out_dir)
        if arch.endswith("LMHeadModel"):
            with open(os.path.join(out_dir, "perplexity.json"), "w") as f:
                json.dump(perplexity_cases(model, tokenizer), f, indent=1)
            with torch.no_grad():
                ids = model.generate(torch.tensor(PROMPT), attention_mask=torch.ones(1, len(PROMPT[0]), dtype=torch.long),
                                     max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
            text_ids = tokenizer(SHORT_TEXT)["input_ids"]
            with torch.no_grad():
                from_text = model.generate(torch.tensor([text_ids]), attention_mask=torch.ones(1, len(text_ids), dtype=torch.long),
                                           max_new_tokens=8, do_sample=False, pad_token_id=1)
            with open(os.path.join(out_dir, "generation.json"), "w") as f:
                json.dump({"prompt": PROMPT[0], "greedy": ids[0, len(PROMPT[0]):].tolist(),
                           "text": SHORT_TEXT, "text_ids": from_text[0].tolist()}, f)
        print(family, arch, names)


if __name__ == "__main__":
    main()
