r"""BLEU of a CoVe translation model on a TSV of sentence pairs: `sesame translate` (greedy)
on each source, scored against the target with sacrebleu (`pip install sacrebleu==2.4.3`).
The model reads and writes lower-cased words split as the `Whitespace` pre-tokenizer splits
them (`\w+|[^\w\s]+`), so the references are lower-cased and split the same way, and BLEU
is computed on those tokens (sacrebleu's tokenize="none"): tokenized, case-insensitive BLEU.

    python3 scripts/score-translations.py --model runs/cove-mt-gettext --data runs/data/gettext-en-de/test.tsv
"""

import argparse
import re
import subprocess

import sacrebleu

WORDS = re.compile(r"\w+|[^\w\s]+")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--sesame", default="target/release/sesame")
    parser.add_argument("--chunk", type=int, default=100)
    parser.add_argument("--show", type=int, default=8, help="print this many translations")
    args = parser.parse_args()
    pairs = [line.rstrip("\n").split("\t") for line in open(args.data, encoding="utf-8") if line.strip()]
    hypotheses = []
    for start in range(0, len(pairs), args.chunk):
        command = [args.sesame, "--adapter", "host", "translate", "--model", args.model]
        for source, _ in pairs[start:start + args.chunk]:
            command += ["--text", source]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        # A line a source (an empty translation is an empty line).
        hypotheses += out.split("\n")[:-1]
    assert len(hypotheses) == len(pairs), (len(hypotheses), len(pairs))
    references = [" ".join(WORDS.findall(target.lower())) for _, target in pairs]
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="none")
    for (source, target), hypothesis in list(zip(pairs, hypotheses))[: args.show]:
        print(f"{source}\n  reference: {target}\n  sesame:    {hypothesis}")
    print(f"{len(pairs)} pairs: {bleu}")


if __name__ == "__main__":
    main()
