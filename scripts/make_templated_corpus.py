"""Build a corpus of templated documents with a few true near-duplicate pairs among them.

Why: documents filled in from one template (form letters, generated reports, product pages)
are similar enough to share many LSH buckets but not similar enough to be duplicates. A
bucket's anchor (its smallest document) is then usually such a dissimilar document, and a
true pair behind it is found only if verification does not stop at the anchor (issue 16,
item 6). This corpus reproduces that: every document is the template, a list of
``parts`` sentences of 8 words, with ``slots`` sentences replaced by random ones (with the
defaults, 40 and 3: about 2,000 characters, character 24-gram Jaccard between two documents
0.54 to 0.75 for 98% of the pairs, median 0.66, a few above 0.8), and ``pairs`` documents get
a copy with 3 more sentences replaced (Jaccard about 0.80 to 0.85 with the original, around
the default threshold 0.8). With 28 x 9 bands most documents share a bucket with dozens of
others. Documents are shuffled; ids are ``t00000``, ``t00001``, ... in file order, and
``twin`` holds the id of a copy's original (null otherwise). Words come from a fixed list of
40, so texts are ASCII.

Output: ``OUT`` (one JSONL file). The same arguments write the same bytes
(``numpy.random.default_rng(seed)``).

Usage: python scripts/make_templated_corpus.py OUT [--docs 400] [--pairs 12] [--seed 0]
"""

import argparse
import json
from pathlib import Path

import numpy as np

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra "
    "tango uniform victor whiskey xray yankee zulu amber basil cedar dune ember fern grove heath iris jade kelp lotus moss nettle"
).split()
SENTENCE_WORDS = 8
PAIR_EDITS = 3  # sentences replaced in a copy: Jaccard about 0.81 with 40 sentences


def templated_documents(docs: int = 400, pairs: int = 12, seed: int = 0, parts: int = 40, slots: int = 3) -> list[dict]:
    """``docs`` documents (``id``, ``text``, ``twin``) from one template; see the module docstring.

    Parameters
    ----------
    docs : int, default=400
        Documents in all, copies included.
    pairs : int, default=12
        Originals that get a near-duplicate copy (``2 * pairs <= docs``).
    seed : int, default=0
    parts, slots : int, default=40, 3
        Sentences in the template, and how many of them each document replaces.

    Raises
    ------
    ValueError
        If ``2 * pairs > docs`` or ``slots + PAIR_EDITS > parts``.
    """
    if 2 * pairs > docs or slots + PAIR_EDITS > parts:
        raise ValueError(
            f"need 2 * pairs <= docs and slots + {PAIR_EDITS} <= parts, got docs={docs} pairs={pairs} parts={parts} slots={slots}"
        )
    rng = np.random.default_rng(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS, SENTENCE_WORDS))

    def replace(sentences: list[str], k: int) -> list[str]:
        out = list(sentences)
        for i in rng.choice(len(out), k, replace=False):
            out[i] = sentence()
        return out

    template = [sentence() for _ in range(parts)]
    originals = [replace(template, slots) for _ in range(docs - pairs)]
    copies = [(i, replace(originals[i], PAIR_EDITS)) for i in range(pairs)]
    order = rng.permutation(docs)  # position in the file of each document (originals first, then copies)
    records: list[dict] = [{}] * docs
    for i, sentences in enumerate(originals):
        records[order[i]] = {"id": f"t{order[i]:05d}", "text": ". ".join(sentences) + ".", "twin": None}
    for k, (i, sentences) in enumerate(copies):
        at = order[len(originals) + k]
        records[at] = {"id": f"t{at:05d}", "text": ". ".join(sentences) + ".", "twin": f"t{order[i]:05d}"}
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w") as f:
        for record in templated_documents(args.docs, args.pairs, args.seed):
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
