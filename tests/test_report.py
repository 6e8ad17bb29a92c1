"""curate report and curate inspect on a small real run: Genesis in seven English versions.

The run: the 50 chapters of Genesis and the 80 verses of its chapters 1-3 in each version
(910 documents; versions share many verses word for word or nearly), plus exact copies of
three chapters, in a plain and a
zstd-compressed JSONL file. Every figure the report shows is checked against ``summary.json``
and the Parquet tables, every pair against the input texts, and the page is rendered in
headless Chromium (``tests/browser.py``): no console message, nothing requested. The screenshot is
kept under ``test-artifacts/``.
"""

import functools
import importlib.util
import itertools
import json
import os
import re
import shutil
from pathlib import Path

import dask
import pandas as pd
import pytest
import zstandard
from click.testing import CliRunner

from curate.cli import main, print_summary
from curate.config import load_config
from curate.pipeline import dedup
from curate.review.inspect import KeptAlone, RunOutput
from curate.review.report import write_report
from tests import reference as ref
from tests.browser import chromium, render
from tests.conftest import write_jsonl

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
COPIES = {"copy-kjv-01001": "kjv-01001", "copy-web-01002": "web-01002", "copy-akjv-01003": "akjv-01003"}


def genesis() -> list[dict]:
    """The 50 chapters of Genesis and the verses of its chapters 1-3, in every version."""
    spec = importlib.util.spec_from_file_location("make_bible_corpus", ROOT / "scripts" / "make_bible_corpus.py")
    bible = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bible)
    for version in bible.VERSIONS:
        pytest.importorskip(f"pythonbible_{version}", reason="pip install -e '.[bible]'")
    chapters = [
        {"id": d["id"], "text": d["text"]}
        for version in bible.VERSIONS
        for d in bible.chapters(version)
        if d["book"] == 1
    ]
    verses = [
        {"id": f"{version}-{verse}", "text": text}
        for version in bible.VERSIONS
        for verse, text in bible.verses(version)
        if text and 1_001_000 <= verse < 1_004_000
    ]
    return chapters + verses


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    records = genesis()
    text = {r["id"]: r["text"] for r in records}
    records += [{"id": copy, "text": text[original]} for copy, original in COPIES.items()]
    folder = tmp_path_factory.mktemp("genesis")
    write_jsonl(folder / "in" / "a.jsonl", records[:500])
    lines = "".join(json.dumps(r) + "\n" for r in records[500:]).encode()
    (folder / "in" / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    out = folder / "out"
    # The report reads a run's outputs, wherever they were computed (see conftest.sync).
    with dask.config.set(scheduler="sync"):
        dedup([str(folder / "in")], str(out), load_config(None, {}))
    return out, {r["id"]: r["text"] for r in records}


def test_run_has_exact_and_fuzzy_groups(run):
    removed = pd.read_parquet(run[0] / "removed.parquet")
    assert removed.kind.value_counts().to_dict() == {"exact": 94, "fuzzy": 30}


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
    # the largest groups, from duplicates.parquet: by size, the kinds taking turns, least similar first
    members = duplicates.groupby(["kind", "group"])
    least = members.jaccard.min()
    order = []
    for size in sorted(set(members.size()), reverse=True):
        by_kind = [
            sorted(
                (g for g in least.index if g[0] == kind and members.size()[g] == size), key=lambda g: (least[g], g[1])
            )
            for kind in ("exact", "fuzzy")
        ]
        order += [g for turn in itertools.zip_longest(*by_kind) for g in turn if g]
    heads = re.findall(
        r'<summary><span class="kind (\w+)">\w+</span> removed <b>([^<]+)</b>(?: \(exact copy of <b>[^<]+</b>, '
        r"itself removed as a near duplicate\))? · kept <b>([^<]+)</b>.*? group of (\d+)",
        page,
    )
    assert len(heads) == 20 + 20
    representative = dict(zip(removed.id, removed.representative))
    for (kind, doc, rep, size), (group_kind, group) in zip(heads[:20], order[:20]):
        group_members = duplicates[(duplicates.kind == group_kind) & (duplicates.group == group)]
        least_similar = group_members[group_members.id != group].sort_values("jaccard", kind="stable").id.iloc[0]
        assert (kind, doc, int(size)) == (group_kind, least_similar, len(group_members)) and rep == representative[doc]
    assert {kind for kind, _, _, _ in heads[:20]} == {"exact", "fuzzy"}
    sampled = [doc for _, doc, _, _ in heads[20:]]
    assert set(sampled) <= set(removed.id) and len(set(sampled)) == 20
    assert all(rep == representative[doc] for _, doc, rep, _ in heads[20:])
    assert not re.search(r'(src|href)="(https?:)?//', page)  # self-contained


def test_pairs_show_the_input_texts(run):
    out, texts = run
    pairs = RunOutput(out).sample(124)  # every removed document
    assert len(pairs) == 124
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


def test_changed_or_missing_input_gives_no_text(client, tmp_path, fixture_docs):
    (tmp_path / "in").mkdir()
    first, second = tmp_path / "in" / "a.jsonl", tmp_path / "in" / "b.jsonl"
    write_jsonl(first, fixture_docs[:6])
    write_jsonl(second, fixture_docs[6:])
    dedup([str(tmp_path / "in")], str(tmp_path / "out"), load_config(None, {}))
    pairs = RunOutput(tmp_path / "out").sample(5)
    assert [(p.removed, p.representative, p.unavailable) for p in pairs] == [
        ("a3", "a1", ""),
        ("a4", "a1", ""),
        ("a7", "a2", ""),
        ("a8", "a6", ""),
        ("a12", "a1", ""),
    ]
    os.utime(first, (1, 1))  # same bytes, another modification time: taken as changed
    second.unlink()
    result = CliRunner().invoke(main, ["report", str(tmp_path / "out")])
    assert (
        result.exit_code == 0
        and f"warning: {first}: changed since the run (size or modification time); its texts are not shown"
        in result.output
    )
    page = (tmp_path / "out" / "report.html").read_text()
    assert "2 input file(s) cannot be read as the run read them" in page
    # a report that exists is not replaced by one without texts unless asked
    (tmp_path / "out" / "report.html").write_text("earlier")
    result = CliRunner().invoke(main, ["report", str(tmp_path / "out")])
    assert (
        result.exit_code == 1
        and "is kept; pass --force" in result.output
        and (tmp_path / "out" / "report.html").read_text() == "earlier"
    )
    assert CliRunner().invoke(main, ["report", str(tmp_path / "out"), "--force"]).exit_code == 0
    assert (tmp_path / "out" / "report.html").read_text() == page
    pairs = RunOutput(tmp_path / "out").sample(5)
    changed, missing = (
        f"{first}: changed since the run (size or modification time)",
        f"{second}: missing (moved or deleted since the run)",
    )
    assert [(p.removed, p.diff, p.unavailable) for p in pairs] == [
        ("a3", None, changed),
        ("a4", None, changed),
        ("a7", None, f"{missing}; {changed}"),
        ("a8", None, f"{missing}; {changed}"),
        ("a12", None, f"{missing}; {changed}"),
    ]


def test_similarity_plot_draws_exact_copies_of_near_duplicates_at_their_similarity():
    # Every exact copy was counted "at 1.0", also one whose group went as a near duplicate
    # (removed.parquet: jaccard 0.92), or unverified (NaN); a --mode exact run got a threshold.
    import numpy as np

    from curate.review.report import _jaccard_plot

    def drawn(rows, threshold):
        ax = _jaccard_plot(pd.DataFrame(rows, columns=["kind", "jaccard"]), threshold).axes[0]
        legend = [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []
        return ax.get_title(), legend, [t.get_text() for t in ax.texts], sum(p.get_height() for p in ax.patches)

    title = "Removed documents by similarity (+ {} at 1.0)"
    rows = [("fuzzy", 0.9), ("exact", 1.0), ("exact", 0.92), ("exact", 1.0)]
    assert drawn(rows, 0.8) == (
        title.format("2 exact copies"),
        ["near duplicates (1)", "their exact copies (1)", "threshold 0.8"],
        [],
        2,
    )
    unverified = [("fuzzy", np.nan), ("exact", np.nan), ("exact", 1.0)]
    # no bars, no legend: it said "near duplicates (0)" beside 1,568 removed (--no-verify)
    assert drawn(unverified, 0.8) == (title.format("1 exact copy"), [], ["not computed: the run used --no-verify"], 0)
    nothing = _jaccard_plot(pd.DataFrame({"kind": [], "jaccard": []}), 0.8).axes[0]
    assert [t.get_text() for t in nothing.texts] == ["no document was removed"] and nothing.get_ylim()[0] == 0
    assert drawn([("exact", 1.0)], None) == (
        title.format("1 exact copy"),
        [],
        ["no near duplicates looked for: the run used --mode exact"],
        0,
    )


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (Debian: apt-get install chromium)")
def test_report_renders_in_chromium_without_errors(run):
    page = write_report(run[0])
    screenshot = ARTIFACTS / "report_genesis.png"
    assert render(page, screenshot) == []
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 50_000


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (Debian: apt-get install chromium)")
@pytest.mark.parametrize("fault", ["full disk", "ctrl-c"])
def test_a_full_disk_or_ctrl_c_leaves_no_half_report(run, monkeypatch, fault):
    # report.html.tmp was left half written, and the CLI printed a traceback; a Ctrl-C left it
    # too, with click's "Aborted!" and exit status 1 (curate dedup's is 130).
    out, _ = run
    real = Path.write_text

    def cut_short(self, text, *args, **kwargs):
        if self.name == "report.html.tmp":
            real(self, text[:100], *args, **kwargs)
            raise OSError(28, "No space left on device") if fault == "full disk" else KeyboardInterrupt
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", cut_short)
    result = CliRunner().invoke(main, ["report", str(out), "--force"])
    if fault == "full disk":
        assert result.exit_code == 1 and result.output == (
            f"Error: [Errno 28] cannot write {out / 'report.html.tmp'}: No space left on device\n"
        )
    else:
        assert result.exit_code == 130 and result.output == "interrupted\n"
    assert not (out / "report.html.tmp").exists()


def test_browser_check_reports_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><style>p { background: url("bg.png") }</style></head><body>'
        '<script>console.error("bad")</script><img src="https://example.com/x.png"><img srcset="a.png 1x, b.png 2x">'
        '<a href="#top">top</a><img src="data:image/png;base64,AAAA"><p>text with url(not-css)</p></body></html>'
    )
    errors = render(page, tmp_path / "bad.png")
    assert errors == [
        "bad",
        "requests bg.png",
        "requests https://example.com/x.png",
        "requests a.png",
        "requests b.png",
    ]
    assert (tmp_path / "bad.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_group_and_id(run):
    out, texts = run
    duplicates = pd.read_parquet(out / "duplicates.parquet")
    group = duplicates[duplicates.kind == "fuzzy"].groupby("group").size().idxmax()
    members = duplicates[(duplicates.group == group) & ~duplicates.kept].id.tolist()
    result = CliRunner().invoke(main, ["inspect", str(out), "--group", group, "--width", "240"])
    assert result.exit_code == 0, result.output
    assert f"showing {len(members)}" in result.output
    assert all(f"removed {m}" in result.output for m in members) and f"kept {group}" in result.output
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", "copy-web-01002", "--width", "240"])
    assert (
        result.exit_code == 0
        and "exact: removed copy-web-01002 · kept web-01002 · Jaccard 1.000 · exact group of 2 · 0 of 612 words differ (0 of 612 in the kept)"
        in result.output
    )
    assert texts["web-01002"].split("\n")[0][:60] in result.output
    # a copy of kjv-01001, which went as a near copy of akjv-01001: shown in its exact group, beside akjv-01001
    similarity = ref.jaccard(texts["kjv-01001"], texts["akjv-01001"], 24)
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", "copy-kjv-01001", "--width", "240"])
    assert (
        f"exact: removed copy-kjv-01001 (exact copy of kjv-01001, itself removed as a near duplicate) · kept akjv-01001 · "
        f"Jaccard {similarity:.3f} · exact group of 2"
    ) in result.output
    # An id in no group: "kept as unique, or not an input id" (exit 1) for both; the kept copy says which.
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", "no-such-id"])
    assert result.exit_code == 1 and result.output == (
        "Error: 'no-such-id' is not an input id: no duplicate group and no kept document has it\n"
    )
    alone = next(
        i for i in texts if i.startswith("web-") and i not in set(pd.read_parquet(out / "duplicates.parquet").id)
    )
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", alone])
    holds = [f for f in (out / "deduplicated").glob("part.*") if f'"id": "{alone}"' in f.read_text()]
    assert result.exit_code == 0 and result.output == f"{alone!r} was kept and is in no duplicate group: {holds[0]}\n"
    # not a terminal: differences marked as git diff --word-diff does (KJV "upon", AKJV "on")
    result = CliRunner().invoke(main, ["inspect", str(out), "--id", "kjv-01001", "--width", "240"])
    assert "darkness was [-upon-]" in result.output and "darkness was {+on+}" in result.output
    # the common text after the change starts on one line in both columns
    assert any(line.count("the face of the deep") == 2 for line in result.output.splitlines())
    # a kept document's group: everything removed in its favour, the exact copy of a member included
    removed = pd.read_parquet(out / "removed.parquet")
    result = CliRunner().invoke(main, ["inspect", str(out), "--group", "akjv-01001", "--width", "240"])
    favoured = removed[removed.representative == "akjv-01001"].id.tolist()
    assert "copy-kjv-01001" in favoured and f"showing {len(favoured)}" in result.output
    assert all(f"removed {doc}" in result.output for doc in favoured)
    result = CliRunner().invoke(main, ["inspect", str(out), "--group", "kjv-01036"])
    assert (
        result.exit_code == 1
        and "'kjv-01036' was removed (fuzzy, kept: 'akjv-01036'): try --id kjv-01036 or --group akjv-01036"
        in result.output
    )
    result = CliRunner().invoke(main, ["inspect", str(out), "--sample", "-1"])
    assert result.exit_code == 2 and "-1 is not in the range x>=0" in result.output


def test_inspect_of_a_large_group_shows_its_least_similar_and_says_how_many(sync, tmp_path):
    # A user trial (Gutenberg split into paragraphs): `inspect --group` of a licence paragraph
    # removed 3,210 times printed every pair, 25,858 lines. Now the 10 least similar, and how many.
    words = " ".join(f"word{i}" for i in range(120))
    records = [{"id": "kept", "text": words}]
    records += [{"id": f"copy{i:02d}", "text": words} for i in range(12)]
    records += [{"id": f"near{i}", "text": words.replace("word5 ", f"change{i} ")} for i in range(2)]
    write_jsonl(tmp_path / "in.jsonl", records)
    dedup([str(tmp_path / "in.jsonl")], str(tmp_path / "out"), load_config(None, {}))
    for flag in ("--group", "--id"):
        result = CliRunner().invoke(main, ["inspect", str(tmp_path / "out"), flag, "kept", "--width", "240"])
        assert result.exit_code == 0, result.output
        said = "15 documents in, 14 removed, 1 kept; showing 10 of the 14, the least similar (--sample N shows more)"
        assert said in result.output
        shown = re.findall(r"removed (\w+) ·", result.output)
        copies = {f"copy{i:02d}" for i in range(12)}
        assert shown[:2] == ["near0", "near1"] and len(shown) == 10 and set(shown[2:]) < copies
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "out"), "--group", "kept", "--sample", "20"])
    assert "; showing 14\n" in result.output and len(re.findall(r"removed \w+ ·", result.output)) == 14


def test_samples_nest_and_reports_repeat(run):
    out, _ = run
    output = RunOutput(out)
    assert {p.removed for p in output.sample(3, seed=5)} <= {p.removed for p in output.sample(20, seed=5)}
    # 94 exact copies and 30 near duplicates: a sample of 20 drew 15 exact and 5 near on average
    # (on reuters, 17 of 20 were pairs of empty documents); now each kind has its even share.
    for n, kinds in [(3, {"fuzzy": 2, "exact": 1}), (20, {"fuzzy": 10, "exact": 10}), (70, {"fuzzy": 30, "exact": 40})]:
        sample = output.sample(n, seed=5)
        assert pd.Series([p.kind for p in sample]).value_counts().to_dict() == kinds
        assert [p.removed for p in sample] == [i for i in output.removed.id if i in {p.removed for p in sample}]
        # one per representative first: Reuters' sample of 10 held 9 pairs of its one group of 2,535 empty texts
        for kind in ("fuzzy", "exact"):
            shown = [p.representative for p in sample if p.kind == kind]
            groups = output.removed.representative[output.removed.kind == kind].nunique()
            assert len(set(shown)) == min(len(shown), groups), (kind, shown)
    assert write_report(out, seed=5).read_bytes() == write_report(out, seed=5).read_bytes()
    assert "Drawn with seed 5 from the 30 fuzzy and 94 exact removed documents" in write_report(out, seed=5).read_text()


def test_dedup_report_flag_and_errors(tmp_path, joined):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["dedup", "tests/data/docs.jsonl", "-o", str(out), "--report", *joined])
    assert result.exit_code == 0, result.output
    assert f"report: {out / 'report.html'}" in result.output
    assert 'data-count="kept">7<' in (out / "report.html").read_text()
    result = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert result.exit_code == 1 and "no summary.json" in result.output


def _edit_summary(**changes):
    def edit(out: Path) -> None:
        summary = json.loads((out / "summary.json").read_text())
        for key, value in changes.items():  # "a__b": summary["a"]["b"]; None as a value removes the key
            *above, last = key.split("__")
            target = functools.reduce(lambda d, k: d[k], above, summary)
            target.pop(last) if value is None else target.__setitem__(last, value)
        (out / "summary.json").write_text(json.dumps(summary))

    return edit


def _write(name: str, content: bytes | None):
    return lambda out: (out / name).unlink() if content is None else (out / name).write_bytes(content)


def _table(name: str, edit):
    return lambda out: edit(pd.read_parquet(out / name)).to_parquet(out / name)


def test_damaged_outputs_are_named_with_the_fix(run, tmp_path):
    # An edited or cut-short summary.json was a KeyError ('versions'), a TypeError or an
    # IndexError traceback from inside the report; a missing table its bare path; a table without
    # its columns was blamed on a curate older than the one that wrote it.
    again = "; run curate dedup again with --overwrite"
    damages = [
        (_write("summary.json", b'{"counts": '), r"summary\.json is damaged \(Expecting value: line 1 column 12 \(char 11\)\)"),
        (_write("summary.json", b"[1, 2]"), r"summary\.json is damaged: it holds no JSON object"),
        (_edit_summary(counts={}), r"summary\.json is damaged: counts\.input: Field required"),
        (_edit_summary(counts="x"), r"summary\.json is damaged: counts: Input should be a valid dictionary.*"),
        (_edit_summary(config__io={}), r"summary\.json is damaged: config\.io\.text_field: Field required"),
        (_edit_summary(config=1), r"summary\.json is damaged: config: Input should be a valid dictionary.*"),
        (_edit_summary(input_files=[]), r"summary\.json is damaged: input_files: List should have at least 1 item.*"),
        (_edit_summary(seconds={"read": 1.0}), r"summary\.json is damaged: seconds: Value error, no total"),
        (_edit_summary(versions={}), r"summary\.json is damaged: versions\.curate: Field required"),
        (_write("removed.parquet", None), r"out: no removed\.parquet, so the run's outputs are incomplete"),
        (_write("duplicates.parquet", b"PAR1"), r"duplicates\.parquet is damaged \(.*\)"),
        (_table("removed.parquet", lambda t: t[["id"]]), r"removed\.parquet is damaged: it lacks the column\(s\) \['jaccard', 'kind', 'representative'\]"),
        (_table("duplicates.parquet", lambda t: t.drop(columns="source")), r"duplicates\.parquet is damaged: it lacks the column\(s\) \['source'\]"),
        (_table("duplicates.parquet", lambda t: t.assign(source="other.jsonl")), r"duplicates\.parquet names input files that summary\.json does not list \(e\.g\. 'other\.jsonl'\): the two are from different runs"),
    ]  # fmt: skip
    for damage, message in damages:
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(run[0], out)
        damage(out)
        for command in (
            ["report", "--force"],
            ["inspect"],
            ["inspect", "--id", "kjv-01001"],
            ["inspect", "--group", "x"],
        ):
            result = CliRunner().invoke(main, [*command, str(out)])
            assert result.exit_code == 1 and re.fullmatch(f"Error: .*{message}{again}\n", result.output), result.output
    # What a curate before 0.2 wrote is said to be that, not damage.
    _edit_summary(versions__curate="0.1.4", input_files=None)(out)
    result = CliRunner().invoke(main, ["inspect", str(out)])
    assert result.output.endswith(
        "was written by curate 0.1.4, which did not record ['input_files']; rerun it with curate >= 0.2 (--overwrite)\n"
    )


@pytest.mark.parametrize(
    "overrides, ids, shown",
    [
        (
            {"mode": "exact"},
            None,
            {"documents_in": 12, "exact_removed": 3, "rejected": 0, "kept": 9},  # no fuzzy card, as the CLI summary
        ),
        (
            {"fuzzy": {"verify": False}},
            None,
            {"documents_in": 12, "exact_removed": 3, "fuzzy_removed": 2, "rejected": 0, "kept": 7},
        ),
        ({}, {"a1", "a2", "a5"}, {"documents_in": 3, "exact_removed": 0, "fuzzy_removed": 0, "rejected": 0, "kept": 3}),
    ],
    ids=["exact-only", "no-verify", "nothing-removed"],
)
def test_report_of_other_runs(client, tmp_path, fixture_docs, overrides, ids, shown, capsys):
    path = write_jsonl(tmp_path / "docs.jsonl", [d for d in fixture_docs if ids is None or d["id"] in ids])
    dedup([str(path)], str(tmp_path / "out"), load_config(None, overrides))
    page = write_report(tmp_path / "out").read_text()
    assert {k: int(v) for k, v in re.findall(r'data-count="(\w+)">([\d,]+)<', page)} == shown
    assert page.count("<figure>") == (2 if overrides.get("mode") == "exact" else 3)  # no S-curve without fuzzy dedup
    # Exact mode listed the fuzzy settings it never used; output_compression was shown as None.
    assert ("fuzzy.threshold" in page) == (overrides.get("mode") != "exact")
    assert "<td>io.output_compression</td><td>none (default)</td>" in page
    # --cache-input unset was shown as None, whether the run kept the documents in memory or not.
    cached = "False" if overrides.get("mode") == "exact" else "True"
    assert f"<td>io.cache_input</td><td>{cached} (auto)</td>" in page
    if ids is None:  # it said "The 1 largest groups"
        assert "<h2>The largest group</h2>" in write_report(tmp_path / "out", groups=1).read_text()
    if overrides.get("fuzzy") == {"verify": False}:
        assert (
            page.count("Jaccard not computed (--no-verify)") == 2 + 2
            and "not computed: the run used --no-verify" in page
        )
        # Both said "N / N verified edges" of candidates nothing had verified.
        assert "no verified edges (--no-verify)" in page and page.count("verified edges") == 1
        print_summary(json.loads((tmp_path / "out" / "summary.json").read_text()), str(tmp_path / "out"))
        assert "not verified (--no-verify)" in capsys.readouterr().out
    if ids:
        assert "No duplicate groups." in page and "Nothing was removed." in page
        # --groups 0 / --sample 0 said "The 0 largest groups ... No duplicate groups.": no section at all now.
        page = write_report(tmp_path / "out", groups=0, sample=0).read_text()
        assert "largest groups" not in page and "at random" not in page
        result = CliRunner().invoke(main, ["inspect", str(tmp_path / "out"), "--width", "240"])
        assert result.exit_code == 0 and "3 documents in, 0 removed, 3 kept; showing 0" in result.output
        result = CliRunner().invoke(
            main, ["inspect", str(tmp_path / "out"), "--width", "0"]
        )  # it printed nothing, exit 0
        assert result.exit_code == 2 and "Invalid value for '--width': 0 is not in the range x>=40" in result.output


def test_inspect_sides_meet_again_after_a_change():
    # The removed side has a long insertion that wraps over several lines; the kept side does not.
    # The common text after it must start on the same line on both sides.
    from io import StringIO

    from rich.console import Console

    from curate.review.diff import word_diff
    from curate.review.inspect import Pair
    from curate.review.terminal import print_pair

    common = "alpha beta gamma delta " * 3
    kept = f"{common}short. MARKER and the rest of the text " + "omega " * 30
    removed = (
        f"{common}{'inserted words that only the removed side has ' * 6}short. MARKER and the rest of the text "
        + "omega " * 30
    )
    out = StringIO()
    print_pair(
        Console(file=out, width=80, color_system=None), Pair("r", "k", "fuzzy", 0.5, "k", 2, word_diff(removed, kept))
    )
    rows = [line for line in out.getvalue().splitlines() if "MARKER" in line]
    assert len(rows) == 1 and rows[0].count("MARKER") == 2, out.getvalue()


def test_inspect_headline_breaks_between_phrases():
    from io import StringIO

    from rich.console import Console

    from curate.review.diff import word_diff
    from curate.review.inspect import Pair
    from curate.review.terminal import print_pair

    text = "alpha beta gamma delta " * 40
    out = StringIO()
    pair = Pair("rwebster-16008", "akjv-16008", "fuzzy", 0.8125, "akjv-16008", 2, word_diff(text + "x", text + "y"))
    print_pair(Console(file=out, width=80, color_system=None), pair)
    head = [line.rstrip() for line in out.getvalue().splitlines()[:2]]
    assert head == [
        "fuzzy: removed rwebster-16008 · kept akjv-16008 · Jaccard 0.812",
        "fuzzy group of 2 · 1 of 161 words differ (1 of 161 in the kept)",
    ], head


def test_a_headline_says_when_only_whitespace_differs():
    # Reuters' "\n\n" against "\n": "Jaccard 0.942 · 0 of 288 words differ" and nothing marked.
    from curate.review.diff import word_diff
    from curate.review.inspect import Pair

    text = "alpha beta gamma delta " * 10

    def headline(a, b, jaccard):
        return Pair("r", "k", "fuzzy", jaccard, "k", 2, word_diff(a, b)).headline(str).split(" · ", 5)[-1]

    spaced = "0 of 40 words differ (0 of 40 in the kept), only spaces and line breaks differ"
    assert headline(text.replace("gamma ", "gamma\n\n", 3), text, 0.94) == spaced
    assert headline(text, text, 1.0) == "0 of 40 words differ (0 of 40 in the kept)"  # exact copies
    assert headline(text + "x", text + "y", 0.9) == "1 of 41 words differ (1 of 41 in the kept)"
    assert headline(text, text, float("nan")) == "0 of 40 words differ (0 of 40 in the kept)"  # --no-verify


def test_inspect_shows_control_characters_instead_of_sending_them():
    # A document's ESC [ 31 m reached the terminal as is: it recoloured the screen (and other
    # sequences clear it or retitle the window).
    from io import StringIO

    from rich.console import Console

    from curate.review.diff import word_diff
    from curate.review.inspect import Pair
    from curate.review.terminal import print_pair

    text = "alpha beta gamma delta " * 3 + "\x1b[31mRED\x1b[0m end\r\x07 \u202eright to left"
    out = StringIO()
    pair = Pair("r\x1b]0;x\x07", "k", "fuzzy", 0.9, "k", 2, word_diff(text + " one", text + " two"))
    print_pair(Console(file=out, width=200, color_system=None), pair)
    shown = out.getvalue()
    assert not any((ord(c) < 0x20 and c != "\n") or c == "\u202e" for c in shown), repr(shown)
    assert "\\x1b[31mRED\\x1b[0m" in shown and "end\\x0d\\x07" in shown and "removed: r\\x1b]0;x\\x07" in shown
    # An id's newline broke the headline and the column's header in two.
    out = StringIO()
    print_pair(Console(file=out, width=200, color_system=None), Pair("r\n1\t", "k", "fuzzy", 0.9, "k", 2, pair.diff))
    assert "removed r\\x0a1\\x09 · kept k" in out.getvalue() and "removed: r\\x0a1\\x09" in out.getvalue()


def test_report_shows_control_characters_instead_of_writing_them():
    # Reuters ends every article with U+0003, which the page drew as an empty box; a bidirectional
    # override reorders the rest of its line in the browser as in the terminal.
    from curate.review.diff import word_diff
    from curate.review.inspect import Pair
    from curate.review.report import _pairs

    text = "alpha beta gamma delta " * 3 + "end\r\x07 <b>\u202eright to left\x03"
    page = _pairs([Pair("r\x03", "k", "fuzzy", 0.9, "k", 2, word_diff(text + " one", text + " two"))])
    assert not any((ord(c) < 0x20 and c != "\n") or c == "\u202e" for c in page), repr(page)
    assert "end\\x0d\\x07 &lt;b&gt;\\u202eright to left\\x03" in page and "removed: r\\x03" in page


def test_invisible_characters_and_windows_line_ends():
    # A zero-width space, soft hyphen or BOM made two differing words look the same, one of
    # them marked changed; Gutenberg's CRLF line ends showed \x0d at the end of every line.
    from curate.review.inspect import visible

    assert visible("al\u200bpha be\u00adta \ufeffgamma") == "al\\u200bpha be\\u00adta \\ufeffgamma"
    assert visible("one\r\ntwo\rthree\n") == "one\ntwo\\x0dthree\n"  # a lone CR is still shown
    assert visible("\u202eright") == "\\u202eright" and visible("é 日本 🙂") == "é 日本 🙂"
    # One 2.7 MB base64 "word" was shown whole (a pair shows at least a word): a 10.8 MB page.
    assert visible("a " + "Q" * 5000 + " b") == "a " + "Q" * 1000 + "… (4,000 more characters) b"
    assert visible("Q" * 1000) == "Q" * 1000
    # Chinese or Japanese text has no spaces, and each of its characters is a word of the diff:
    # a paragraph of 5,000 was cut to its first 1,000 characters as if it were one long word.
    assert visible("中" * 5000 + "Q" * 1001) == "中" * 5000 + "Q" * 1000 + "… (1 more character)"
    # So is Thai, Lao, Myanmar or Khmer: its words are letters with their marks, never cut.
    assert visible("แมวนั่ง" * 1000) == "แมวนั่ง" * 1000 and visible("ខ្ញុំ" * 600) == "ខ្ញុំ" * 600


def test_the_end_of_a_shortened_diff_is_not_called_identical():
    # The words after max_chars were shown as "⋯ 132 identical words ⋯" though two of them had
    # changed (Bible chapters, word 5-grams); a Gutenberg book's 420,394 held 1,038 changes.
    from io import StringIO

    from rich.console import Console

    from curate.review.diff import word_diff
    from curate.review.inspect import Pair
    from curate.review.report import _pairs
    from curate.review.terminal import print_pair

    words = [f"w{i}" for i in range(300)]
    changed = [f"other{i}" if i % 20 == 19 else word for i, word in enumerate(words)]  # 15 changes
    diff = word_diff(" ".join(words), " ".join(changed), context=3, max_chars=60)
    assert diff.segments[-1].kind == "rest" and diff.changed_a == 15
    pair = Pair("r", "k", "fuzzy", 0.9, "k", 2, diff)
    page = _pairs([pair])
    out = StringIO()
    print_pair(Console(file=out, width=120, color_system=None), pair)
    for shown in (page, out.getvalue()):
        assert "more words, not shown" in shown and "identical words" not in shown.split("more words")[-1]


def test_an_id_that_is_not_an_integer_of_an_integer_run_is_named():
    # `curate inspect OUT --id abc` of a run with integer ids said "invalid literal for int() with base 10: 'abc'".
    from curate.review.inspect import RunOutput

    run = RunOutput.__new__(RunOutput)  # only its duplicates table is read
    run.duplicates = pd.DataFrame({"id": pd.Series([1, 2], dtype="int64")})
    assert run._id("7") == 7
    with pytest.raises(KeyError, match="'abc' is not an id of this run: its ids are integers"):
        run._id("abc")


def test_inspect_names_a_rejected_record_as_rejected(client, tmp_path):
    # `curate inspect --id c` of a record --on-error skip had rejected said "kept as unique, or
    # is not an input id".
    lines = [
        '{"id": "a", "text": "hello world one"}',
        '{"id": "b", "text": "hello world one"}',
        '{"id": "c", "text": 5}',
        '{"id": "a", "text": "a repeated id"}',
        '{"id": "d", "text": "not JSON',
    ]
    (tmp_path / "x.jsonl").write_text("\n".join(lines) + "\n")
    dedup([str(tmp_path / "x.jsonl")], str(tmp_path / "out"), load_config(None, {"io": {"on_error": "skip"}}))
    run = RunOutput(tmp_path / "out")
    assert run.rejected_as("c") == [("x.jsonl:3", "wrong-type")]
    assert run.rejected_as("a") == [("x.jsonl:4", "duplicate-id")]
    assert run.rejected_as("d") == [("x.jsonl:5", "invalid-json")]  # its id comes before the JSON breaks
    assert run.rejected_as("x.jsonl:3") == run.rejected_as("x.jsonl:5") == run.rejected_as("zz") == []  # with ids
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "out"), "--id", "c"])
    assert result.exit_code == 1 and result.output == (
        f"Error: 'c' was rejected, so not deduplicated: x.jsonl:3 (wrong-type) (listed in {tmp_path / 'out' / 'rejected'})\n"
    )
    assert [p.removed for p in run.document("a")[0]] == ["b"]  # its first occurrence's group
    with pytest.raises(KeyError, match=r"no duplicate group has representative 'c'; records with this id were "
                       r"rejected: x.jsonl:3 \(wrong-type\)"):  # fmt: skip
        run.group("c")
    # A kept id whose later repeat was rejected was said to be rejected itself.
    (tmp_path / "y.jsonl").write_text('{"id": "u", "text": "alone"}\n{"id": "u", "text": "again"}\n')
    dedup([str(tmp_path / "y.jsonl")], str(tmp_path / "out2"), load_config(None, {"io": {"on_error": "skip"}}))
    with pytest.raises(KeptAlone, match=r"'u' was kept and is in no duplicate group: .*part\.00000\.jsonl; records with "
                       r"this id were rejected: y.jsonl:2 \(duplicate-id\)"):  # fmt: skip
        RunOutput(tmp_path / "out2").document("u")


def test_inspect_finds_kept_ids_beside_their_rejected_records_and_ids_in_unreadable_records(sync, tmp_path):
    # A user trial (--on-error skip): `--id reuters-2`, kept and later repeated, exited 1 saying
    # "kept as unique" without its part file; `--id scraped-badutf8`, rejected for invalid UTF-8
    # in its text, was "not an input id": its id was read by parsing the record as strict UTF-8 JSON.
    lines = [
        b'{"id": "r", "text": "first of a repeated id"}',
        b'{"id": "r", "text": "a repeated id"}',
        b'{"id": "bad", "text": "caf\xe9 au lait"}',  # invalid UTF-8 after its id
        b"this is not json at all",
        b'{"id": "cut", "text": "cut off mid-wri',  # invalid JSON after its id
        b'{"id": "caf\xe9", "text": "invalid UTF-8 in the id"}',  # no id that can be read
        b'{"id": "w", "text": 5}',  # rejected before a record with its id that is kept
        b'{"id": "w", "text": "kept though its id was rejected before"}',
        b'{"id": "deep", "text": "t", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",  # past Python's recursion limit
        b'{"id": "d1", "text": "a text and its exact copy"}',
        b'{"id": "d2", "text": "a text and its exact copy"}',  # removed
        b'{"id": "d2", "text": "another record with the removed one\'s id"}',
    ]
    (tmp_path / "x.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "out"
    dedup([str(tmp_path / "x.jsonl")], str(out), load_config(None, {"io": {"on_error": "skip"}}))
    part, listed = out / "deduplicated" / "part.00000.jsonl", f"(listed in {out / 'rejected'})"

    def inspect(doc_id):
        return CliRunner().invoke(main, ["inspect", str(out), "--id", doc_id])

    for doc_id, where in [("r", "x.jsonl:2 (duplicate-id)"), ("w", "x.jsonl:7 (wrong-type)")]:
        result = inspect(doc_id)  # an answer, not an error
        assert result.exit_code == 0 and result.output == (
            f"{doc_id!r} was kept and is in no duplicate group: {part}; records with this id were rejected: "
            f"{where} {listed}\n"
        )
    for doc_id, where in [
        ("bad", "x.jsonl:3 (invalid-utf8)"),
        ("cut", "x.jsonl:5 (invalid-json)"),
        ("deep", "x.jsonl:9 (invalid-json)"),
        ("x.jsonl:4", "x.jsonl:4 (invalid-json)"),  # no id in it: its file and line
        ("x.jsonl:6", "x.jsonl:6 (invalid-utf8)"),
    ]:
        result = inspect(doc_id)
        assert result.exit_code == 1 and result.output == (
            f"Error: {doc_id!r} was rejected, so not deduplicated: {where} {listed}\n"
        )
    # A removed id's colliding record was not mentioned (one line, however long its path: rich
    # folded a long one mid-word).
    result = inspect("d2")
    assert result.exit_code == 0 and result.output.endswith(
        f"\nrecords with this id were also rejected: x.jsonl:12 (duplicate-id) {listed}\n"
    )
    result = inspect("zz")
    assert result.exit_code == 1 and result.output == (
        "Error: 'zz' is not an input id: no duplicate group and no kept document has it; 2 rejected records have no "
        f"readable id (not JSON, say): --id FILE:LINE finds one, e.g. --id x.jsonl:4 {listed}\n"
    )


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_inspect_finds_a_kept_id_in_the_kept_copy_however_its_json_writes_it(sync, tmp_path, fmt):
    # "kept as unique, or is not an input id" for every id in no group; now the kept copy is
    # searched. Ids as other writers put them: "\/" for "/", no spaces, a number, a nested
    # object's field of that name, which is not the record's id.
    lines = [
        '{"id":"a\\/b.x","text":"one text"}',
        '{"text": "two", "meta": {"id": "ghost"}, "id": 7}',
        '{"id": "x y", "text": "three texts"}',
        '{"id": "\\"q\\"", "text": "four"}',
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    dedup([str(tmp_path / "in.jsonl")], str(tmp_path / "out"), load_config(None, {"io": {"output_format": fmt}}))
    run = RunOutput(tmp_path / "out")
    part = tmp_path / "out" / "deduplicated" / f"part.00000.{fmt}"
    for kept in ("a/b.x", "7", "x y", '"q"'):
        with pytest.raises(KeptAlone) as found:
            run.document(kept)
        assert found.value.args[0] == f"{kept!r} was kept and is in no duplicate group: {part}"
    for absent in ("ghost", "a/b", "8", "x"):
        with pytest.raises(KeyError, match="is not an input id: no duplicate group and no kept document has it"):
            run.document(absent)
    dedup([str(tmp_path / "in.jsonl")], str(tmp_path / "ids"), load_config(None, {"io": {"identify_only": True}}))
    with pytest.raises(KeyError) as unsure:
        RunOutput(tmp_path / "ids").document("x y")
    assert unsure.value.args[0] == (
        "'x y' is in no duplicate group: it was kept as unique, or is not an input id (the run wrote no kept copy "
        "to search: --identify-only)"
    )


def test_inspect_says_which_text_was_null(sync, tmp_path):
    # A null text is read as empty, so it and "" are exact copies; inspect said "no words on
    # either side" and not that one side was null.
    lines = ['{"id": 1, "text": null}', '{"id": 2, "text": ""}', '{"id": 3, "text": null}', '{"id": 4, "text": "x"}']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    dedup([str(tmp_path / "in.jsonl")], str(tmp_path / "out"), load_config(None, {"mode": "exact"}))
    pairs = {pair.removed: pair for pair in RunOutput(tmp_path / "out").document(1)[0]}
    said = {doc: pair.headline(str).split(" · ", 5)[-1] for doc, pair in pairs.items()}
    assert said == {
        2: "no words on either side (the kept text is null, read as empty)",
        3: "no words on either side (both texts are null, read as empty)",
    }
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "out"), "--id", "2", "--width", "240"])
    assert result.exit_code == 0 and "(the kept text is null, read as empty)" in result.output, result.output
