"""English→German sentence pairs for CoVe's translation run (TRAINING.md), derived from the
German message catalogs (gettext .mo files) that this machine's Debian packages install under
/usr/share/locale/de/LC_MESSAGES: each program message and its human translation. No
parallel corpus small enough ships in a registry reachable here (CoVe's own, WMT 2016
English–German, is 4.5M pairs), hence the derivation; the pairs are software messages, a
narrow domain, and their number depends on the packages installed (27,000-odd on the
project's machines: about 23,000 from 93 catalogs; the script prints both).

Kept: messages of 2 to 25 words without format directives or markup (% { } < > \\ $ @ _ & |
or a URL), not starting with '-', without option syntax ([ =), translated (not the same
text); whitespace collapsed; the first translation of each English message. Contexts and
plural forms are skipped.

  OUT/train.tsv, OUT/valid.tsv, OUT/test.tsv    english<TAB>german, the pairs shuffled with a
                                                fixed seed, --held-out pairs each for valid/test

    python3 scripts/make-translation-pairs.py --out runs/data/gettext-en-de
"""

import argparse
import gettext
import glob
import hashlib
import os
import random
import re

SKIP = re.compile(r"[%{}<>\\$@_&|\[=]|https?:")


def catalog_pairs(pattern):
    pairs, catalogs = {}, 0
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog
        except (OSError, UnicodeDecodeError) as e:
            print(f"skipped {path}: {e}")
            continue
        catalogs += 1
        for source, target in catalog.items():
            # Plural forms are (msgid, n) keys; contexts are joined by \x04.
            if not isinstance(source, str) or not source or "\x04" in source or not isinstance(target, str):
                continue
            source, target = " ".join(source.split()), " ".join(target.split())
            if not target or source == target or source.startswith("-") or SKIP.search(source + target):
                continue
            if 2 <= len(source.split()) <= 25:
                pairs.setdefault(source, target)
    return pairs, catalogs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalogs", default="/usr/share/locale/de/LC_MESSAGES/*.mo")
    parser.add_argument("--out", required=True)
    parser.add_argument("--held-out", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    pairs, catalogs = catalog_pairs(args.catalogs)
    rows = sorted(pairs.items())
    random.Random(args.seed).shuffle(rows)
    n = args.held_out
    if len(rows) < 3 * n:
        raise SystemExit(f"only {len(rows)} pairs: too few for {n} held out twice")
    os.makedirs(args.out, exist_ok=True)
    splits = {"valid": rows[:n], "test": rows[n:2 * n], "train": rows[2 * n:]}
    for name, split in splits.items():
        text = "".join(f"{s}\t{t}\n" for s, t in split)
        with open(os.path.join(args.out, f"{name}.tsv"), "w") as f:
            f.write(text)
        print(f"{name}.tsv: {len(split)} pairs, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}")
    print(f"{len(rows)} pairs from {catalogs} catalogs")


if __name__ == "__main__":
    main()
