"""curate report and curate inspect on a small real run: Genesis in seven English versions.

The run: the 50 chapters of Genesis in each version (350 documents; KJV, AKJV and Webster's
revision are near copies of each other), plus exact copies of three chapters, in a plain and a
zstd-compressed JSONL file. Every figure the report shows is checked against ``summary.json``
and the Parquet tables, every pair against the input texts, and the page is rendered in
headless Chromium (``tests/browser.py``), which must show no console error. The screenshot is
kept under ``test-artifacts/``.
"""

import html
import importlib.util
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import zstandard
from click.testing import CliRunner

from curate.cli import main
from curate.config import load_config
from curate.pipeline import dedup
from curate.report import write_report
from curate.review import RunOutput, diff_blocks
from tests.browser import chromium, render
from tests.conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
COPIES = {"copy-kjv-01001": "kjv-01001", "copy-web-01002": "web-01002", "copy-akjv-01003": "akjv-01003"}


def genesis() -> list[dict]:
    spec = importlib.util.spec_from_file_location("make_bible_corpus", ROOT / "scripts" / "make_bible_corpus.py")
    bible = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bible)
    for version in bible.VERSIONS:
        pytest.importorskip(f"pythonbible_{version}", reason="pip install -e '.[bible]'")
    return [{"id": d["id"], "text": d["text"]} for version in bible.VERSIONS for d in bible.chapters(version) if d["book"] == 1]


@pytest.fixture(scope="module")
def run(client, tmp_path_factory):
    records = genesis()
    text = {r["id"]: r["text"] for r in records}
    records += [{"id": copy, "text": text[original]} for copy, original in COPIES.items()]
    folder = tmp_path_factory.mktemp("genesis")
    write_jsonl(folder / "in" / "a.jsonl", records[:200])
    lines = "".join(json.dumps(r) + "\n" for r in records[200:]).encode()
    (folder / "in" / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    out = folder / "out"
    dedup([str(folder / "in")], str(out), load_config(None, {}))
    return out, {r["id"]: r["text"] for r in records}


def test_run_has_exact_and_fuzzy_groups(run):
    removed = pd.read_parquet(run[0] / "removed.parquet")
    assert removed.kind.value_counts().to_dict() == {"fuzzy": 107, "exact": 3}


def test_report_counts_and_pairs(run):
    out, texts = run
    page = write_report(out).read_text()
    summary = json.loads((out / "summary.json").read_text())
    removed = pd.read_parquet(out / "removed.parquet")
    duplicates = pd.read_parquet(out / "duplicates.parquet")
    kept = sum(1 for f in (out / "deduplicated").glob("*.jsonl") for _ in f.open())
    shown = {key: int(value.replace(",", "")) for key, value in re.findall(r'data-count="(\w+)">([\d,]+)<', page)}
    assert summary["counts"]["input"]["documents"] == len(texts)
    assert shown == {
        "documents_in": len(texts),
        "exact_removed": (removed.kind == "exact").sum(),
        "fuzzy_removed": (removed.kind == "fuzzy").sum(),
        "rejected": 0,
        "kept": kept,
    }
    assert kept == summary["counts"]["output"]["kept"] == len(texts) - len(removed)
    # the largest groups, in order of size, from duplicates.parquet
    sizes = duplicates.groupby(["kind", "group"]).size().sort_values(ascending=False, kind="stable")
    heads = re.findall(r'<summary><span class="kind (\w+)">\w+</span> removed <b>([^<]+)</b> · kept <b>([^<]+)</b>.*? group of (\d+)', page)
    assert len(heads) == 20 + 20
    representative = dict(zip(removed.id, removed.representative))
    for (kind, doc, rep, size), ((group_kind, group), group_size) in zip(heads[:20], sizes.head(20).items()):
        members = duplicates[(duplicates.kind == group_kind) & (duplicates.group == group)]
        least = members[~members.kept].sort_values("jaccard", kind="stable").id.iloc[0]
        assert (kind, doc, int(size)) == (group_kind, least, group_size) and rep == representative[doc]
    sampled = [doc for _, doc, _, _ in heads[20:]]
    assert set(sampled) <= set(removed.id) and len(set(sampled)) == 20
    assert all(rep == representative[doc] for _, doc, rep, _ in heads[20:])
    assert not re.search(r'(src|href)="(https?:)?//', page)  # self-contained


def test_pairs_show_the_input_texts(run):
    out, texts = run
    pairs = RunOutput(out).sample(110)  # every removed document
    assert len(pairs) == 110
    for pair in pairs:
        assert pair.diff is not None and pair.diff.complete
        a = "".join(s.a for s in pair.diff.segments if s.kind != "gap")
        b = "".join(s.b for s in pair.diff.segments if s.kind != "gap")
        # the shown text is the input's, in order; a gap leaves out common words only
        assert _in_order(a, texts[pair.removed]) and _in_order(b, texts[pair.representative]), pair.removed
        if pair.kind == "exact" and pair.jaccard == 1.0:
            assert pair.diff.changed_a == pair.diff.changed_b == 0
    copy = next(p for p in pairs if p.removed == "copy-web-01002")
    assert (copy.kind, copy.representative, copy.jaccard) == ("exact", "web-01002", 1.0)


def _in_order(shown: str, text: str) -> bool:
    position = 0
    for piece in filter(None, re.split(r"\s+", shown)):
        position = text.find(piece, position)
        if position < 0:
            return False
        position += len(piece)
    return True


def test_changed_or_missing_input_gives_no_text(run, tmp_path):
    out, _ = run
    run_copy = RunOutput(out)
    files = run_copy.summary["input_files"]
    run_copy.summary = {**run_copy.summary, "input_files": [{**files[0], "size": files[0]["size"] + 1}, {**files[1], "path": str(tmp_path / "gone.jsonl.zst")}]}
    pairs = run_copy.sample(110)
    a_ids = set(pd.read_json(files[0]["path"], lines=True).id)
    for pair in pairs:
        assert pair.diff is None
        reasons = [("changed since the run" if doc in a_ids else "missing") for doc in (pair.removed, pair.representative)]
        assert all(reason in pair.unavailable for reason in reasons), pair.unavailable


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (Debian: apt-get install chromium)")
def test_report_renders_in_chromium_without_errors(run):
    page = write_report(run[0])
    screenshot = ARTIFACTS / "report_genesis.png"
    assert render(page, screenshot) == []
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 50_000


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (Debian: apt-get install chromium)")
def test_browser_check_reports_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><script>console.error("bad")</script><img src="https://example.com/x.png"></body></html>')
    errors = render(page, tmp_path / "bad.png")
    assert errors[0] == "bad" and "failed to load https://example.com/x.png: blocked" in errors[1]


def test_inspect_group_and_id(run):
    out, texts = run
    duplicates = pd.read_parquet(out / "duplicates.parquet")
    group = duplicates[duplicates.kind == "fuzzy"].groupby("group").size().idxmax()
    members = duplicates[(duplicates.group == group) & ~duplicates.kept].id.tolist()
    result = CliRunner().invoke(main, ["inspect", str(out), "--group", group, "--width", "240"])
    assert result.exit_code == 0, result.output
    assert f"showing {len(members)}" in result.output
    assert all(f"removed {m}" in result.output for m in members) and f"kept {group}" in result.output
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", "copy-kjv-01001", "--width", "240"])
    assert result.exit_code == 0 and "exact: removed copy-kjv-01001 · kept kjv-01001 · Jaccard 1.000" in result.output
    assert texts["kjv-01001"].split("\n")[0][:60] in result.output
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", "no-such-id"])
    assert result.exit_code == 1 and "'no-such-id' is in no duplicate group" in result.output


def test_dedup_report_flag_and_errors(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["dedup", "tests/data/docs.jsonl", "-o", str(out), "--report", "--n-workers", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert f"report: {out / 'report.html'}" in result.output
    assert 'data-count="kept">7<' in (out / "report.html").read_text()
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 1 and "no summary.json" in result.output
