"""Writes tests/fixtures/tokenizers/fastai_rules.json: texts and what fastai's text rules
(`defaults.text_proc_rules`, applied in order as its Tokenizer does before spaCy) make of them,
without the leading "xxbos " (Sesame's tokenizer.json template adds it). Edge cases: capitals,
all-caps words, character and word repetitions, HTML references, WikiText's marks, slashes and
hashes, runs of spaces, non-ASCII letters.

Made with fastai 2.7.18 (see make_awd_lstm_fastai_fixtures.py).
Run from the repository root:  python tests/reference/make_fastai_rules_fixtures.py
"""

import json
import os
import warnings

warnings.filterwarnings("ignore")
from fastai.text.core import defaults  # noqa: E402

TEXTS = [
    "The cat sat on the mat.",
    "I LOVE this movie!!! It is SOOOO good",
    "very very very good , and bad bad bad bad.",
    "ha ha ha!",
    "Tom &amp; Jerry said &quot;hi&quot; isn#39;t it<br />New line &#233;t&#xE9;",
    "The <unk> was well @-@ known in 1 @,@ 000 and 3 @.@ 5 ...",
    "Hello/World #tag back\\\\slash",
    "a  b   c\tD",
    "  Leading and trailing spaces  ",
    "Élan ÉCOLE naïve Über",
    "USA! U.S.A. McDonald iPhone A I",
    "xxbos already XXMAJ",
    "aaa bbb aa",
    "it's DON'T stop, won't you?",
    "",
]


def main():
    cases = []
    for text in TEXTS:
        t = text
        for rule in defaults.text_proc_rules:
            t = rule(t)
        assert t.startswith("xxbos"), t
        cases.append({"text": text, "ruled": t[len("xxbos"):].lstrip(" ")})
    out = os.path.join("tests", "fixtures", "tokenizers", "fastai_rules.json")
    with open(out, "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
    for c in cases:
        print(repr(c["text"]), "->", repr(c["ruled"]))


if __name__ == "__main__":
    main()
