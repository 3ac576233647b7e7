"""Part-of-speech data for CVT's reference run (TRAINING.md), derived from WikiText-2:
silver tags from Lingua::EN::Tagger (a Penn Treebank-trained HMM tagger, Debian's
liblingua-en-tagger-perl), so the task is to learn that tagger from few labelled sentences,
with and without unlabelled text. No tagged corpus small enough ships in a package registry
here, hence the derivation.

  OUT/train.conll      the first --labelled sentences of wikitext-2/test.txt, `word TAG`
  OUT/unlabeled.txt    the rest of test.txt's sentences, a sentence a line (the tagger's words)
  OUT/dev.conll        the first --dev sentences of wikitext-2/valid.txt, but those with a tag
                       the labelled sentences never show

WikiText's ` @-@ `, ` @,@ ` and ` @.@ ` are joined back (`-`, `,`, `.`), headings skipped; the
tagger splits the words and sentences end at its sentence-final tags (`.`, `!`, `?`).

    python3 scripts/make-cvt-pos-data.py --data ../shared/data/wikitext-2 --out runs/cvt-pos
"""

import argparse
import os
import re
import subprocess

TAGGER = r"""
use Lingua::EN::Tagger;
binmode STDIN, ":encoding(UTF-8)";
binmode STDOUT, ":encoding(UTF-8)";
my $tagger = Lingua::EN::Tagger->new(stem => 0);
$| = 1;
while (my $line = <STDIN>) { print $tagger->add_tags($line) // "", "\n"; }
"""
TAGGED = re.compile(r"<([a-z$]+)>([^<]*)</\1>")


def paragraphs(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("="):
                continue
            yield line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")


def tagged_sentences(path):
    lines = list(paragraphs(path))
    out = subprocess.run(["perl", "-e", TAGGER], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        sentence = []
        for tag, word in TAGGED.findall(line):
            sentence.append((word, tag.upper()))
            if tag == "pp" and word in (".", "!", "?"):
                yield sentence
                sentence = []
        if sentence:
            yield sentence


def write_conll(path, sentences):
    with open(path, "w", encoding="utf-8") as f:
        for s in sentences:
            f.write("".join(f"{w} {t}\n" for w, t in s) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/wikitext-2")
    parser.add_argument("--out", default="runs/cvt-pos")
    parser.add_argument("--labelled", type=int, default=1000)
    parser.add_argument("--dev", type=int, default=2000)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    train = [s for s in tagged_sentences(os.path.join(args.data, "test.txt")) if all(" " not in w for w, _ in s)]
    dev = [s for s in tagged_sentences(os.path.join(args.data, "valid.txt")) if all(" " not in w for w, _ in s)][: args.dev]
    write_conll(os.path.join(args.out, "train.conll"), train[: args.labelled])
    with open(os.path.join(args.out, "unlabeled.txt"), "w", encoding="utf-8") as f:
        f.writelines(" ".join(w for w, _ in s) + "\n" for s in train[args.labelled :])
    # A tag the labelled sentences never show cannot be learnt: dev sentences with one are left out.
    known = {t for s in train[: args.labelled] for _, t in s}
    kept = [s for s in dev if all(t in known for _, t in s)]
    write_conll(os.path.join(args.out, "dev.conll"), kept)
    print(f"{args.out}: {min(args.labelled, len(train))} labelled, {max(0, len(train) - args.labelled)} unlabelled, {len(kept)} dev sentences "
          f"({len(dev) - len(kept)} left out for a tag the labelled ones lack); {len(known)} tags")


if __name__ == "__main__":
    main()
