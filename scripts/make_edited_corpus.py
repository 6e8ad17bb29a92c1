"""Build a large corpus full of real near-duplicates: gutenberg books repeated with random edits.

Why: memory-pressure and throughput runs need gigabytes of text whose duplicate structure is
known. Every book of ``../shared/data/gutenberg`` is written once unchanged, then as copies in
which a share of the words is edited (each edit, with equal chance, deletes a word, replaces it
with a word taken from elsewhere in the book, or inserts such a word). Copies cycle through the
edit rates 0 (an exact copy), 0.2 %, 1 %, 3 % and 10 %; with character 24-gram shingles these
give Jaccard similarities to the original of 1, about 0.97, 0.87, 0.65 and 0.3, so each book
yields exact, near and not-near duplicates.

Output: ``OUTDIR/part-NNNNN.jsonl`` (UTF-8, uncompressed, each at most ``--shard-bytes``), one
object per line with ``id`` (``<book id>`` for the original, ``<book id>~<copy>`` for copy
1, 2, ...), ``text``, ``source`` (the original's id) and ``edit_rate``. Rounds of copies are
added until the total text reaches ``--bytes``. The same arguments write the same bytes
(``numpy.random.default_rng(seed)``).

Usage: python scripts/make_edited_corpus.py OUTDIR [--bytes 4GB] [--seed 0] [--source DIR]
"""

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from dask.utils import parse_bytes

EDIT_RATES = (0.0, 0.002, 0.01, 0.03, 0.1)
WORD = re.compile(r"\S+")


def edit(text: str, rate: float, rng: np.random.Generator) -> str:
    """``text`` with ``rate`` of its words deleted, replaced or preceded by another of its words."""
    if rate == 0:
        return text
    spans = [m.span() for m in WORD.finditer(text)]
    chosen = np.flatnonzero(rng.random(len(spans)) < rate)
    if len(chosen) == 0:
        return text
    donors = rng.integers(0, len(spans), len(chosen))
    kinds = rng.integers(0, 3, len(chosen))  # 0 delete, 1 replace, 2 insert
    pieces, pos = [], 0
    for i, donor, kind in zip(chosen, donors, kinds):
        start, end = spans[i]
        word = text[slice(*spans[donor])]
        pieces.append(text[pos:start])
        pieces.append("" if kind == 0 else word if kind == 1 else f"{word} {text[start:end]}")
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--bytes", default="4GB", help="total text to write (default 4GB = 4e9 bytes)")
    parser.add_argument("--shard-bytes", default="256MB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--source", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "gutenberg"
    )
    args = parser.parse_args()
    target, shard_limit = parse_bytes(args.bytes), parse_bytes(args.shard_bytes)
    books = pd.concat(pd.read_json(f, lines=True, dtype={"id": str}) for f in sorted(args.source.glob("part-*.jsonl*")))
    rng = np.random.default_rng(args.seed)
    args.outdir.mkdir(parents=True, exist_ok=True)
    written, shard, shard_bytes, copy = 0, 0, 0, 0
    out = open(args.outdir / f"part-{shard:05d}.jsonl", "w", encoding="utf-8")
    while written < target:
        rate = EDIT_RATES[(copy - 1) % len(EDIT_RATES)] if copy else 0.0
        for book_id, text in zip(books["id"], books["text"]):
            if written >= target:
                break
            doc = {
                "id": f"{book_id}~{copy}" if copy else book_id,
                "text": edit(text, rate, rng),
                "source": book_id,
                "edit_rate": rate,
            }
            line = json.dumps(doc, ensure_ascii=False) + "\n"
            size = len(line.encode())
            if shard_bytes and shard_bytes + size > shard_limit:
                out.close()
                shard, shard_bytes = shard + 1, 0
                out = open(args.outdir / f"part-{shard:05d}.jsonl", "w", encoding="utf-8")
            out.write(line)
            shard_bytes += size
            written += len(doc["text"].encode())
        copy += 1
    out.close()
    print(f"{args.outdir}: {written / 1e9:.2f} GB of text in {shard + 1} shards, {copy} rounds")


if __name__ == "__main__":
    main()
