"""The whole run on the project's own fixture: exact values for every output."""

import asyncio
import gc
import json
import re
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from distributed import futures_of, get_task_stream

from curate.cluster import document_too_large, memory_blocksize, worker_specs
from curate.config import load_config
from curate.dedup.keys import in_order
from curate.dedup.resolve import AccountingError, resolve
from curate.io.files import expand_paths, record_bytes
from curate.pipeline import cache_input, check_accounting, dedup
from curate.runner import Runner, Stats, task_times
from tests.conftest import realignments

try:  # tests/ is on sys.path under pytest's default (prepend) import mode
    import reference as ref
except ImportError:  # pragma: no cover
    from tests import reference as ref


def run(tmp_path, inputs, **overrides):
    out = tmp_path / "out"
    summary = dedup([str(i) for i in inputs], str(out), load_config(None, overrides))
    return out, summary


@pytest.fixture(scope="module")
def fixture_run(client, tmp_path_factory):
    """One run on the fixture with the default configuration, its stages kept, and the names of
    the passes its runner computed and the frames Dask realigned (:func:`tests.conftest.realignments`):
    read by the tests below, which assert on different parts of it."""
    out = tmp_path_factory.mktemp("fixture") / "out"
    passes, call = [], Runner.__call__

    def record(self, stage, **collections):
        passes.append(stage)
        return call(self, stage, **collections)

    with pytest.MonkeyPatch.context() as patch, realignments() as found:
        patch.setattr(Runner, "__call__", record)
        summary = dedup(["tests/data/docs.jsonl"], str(out), load_config(), keep_stages=True)
    return out, summary, passes, found


def test_fixture_end_to_end(fixture_run, fixture_docs):
    out, summary, _, _ = fixture_run
    removed = pd.read_parquet(out / "removed.parquet")
    # a3, a12: copies of a1; a8: second empty doc; a4, a7: near duplicates (J = 0.84, 0.83).
    text = {d["id"]: d["text"] for d in fixture_docs}
    assert removed.drop(columns="jaccard").to_dict("list") == {
        "id": ["a3", "a4", "a7", "a8", "a12"],
        "kind": ["exact", "fuzzy", "fuzzy", "exact", "exact"],
        "representative": ["a1", "a1", "a2", "a6", "a1"],
    }
    # the similarity with the representative, against brute force over the 24-character shingles
    assert removed.jaccard.tolist() == [
        1.0,
        ref.jaccard(text["a4"], text["a1"], 24),
        ref.jaccard(text["a7"], text["a2"], 24),
        1.0,
        1.0,
    ]
    assert removed.jaccard.round(2).tolist() == [1.0, 0.84, 0.83, 1.0, 1.0]
    kept = [
        json.loads(line) for f in sorted((out / "deduplicated").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    assert [d["id"] for d in kept] == ["a1", "a2", "a5", "a6", "a9", "a10", "a11"]
    assert kept == [
        d for d in fixture_docs if d["id"] in {"a1", "a2", "a5", "a6", "a9", "a10", "a11"}
    ]  # all columns, unchanged
    duplicates = pd.read_parquet(out / "duplicates.parquet")
    assert set(zip(duplicates.id, duplicates.group, duplicates.kind, duplicates.kept)) == {
        ("a1", "a1", "exact", True),
        ("a3", "a1", "exact", False),
        ("a12", "a1", "exact", False),
        ("a6", "a6", "exact", True),
        ("a8", "a6", "exact", False),
        ("a1", "a1", "fuzzy", True),
        ("a4", "a1", "fuzzy", False),
        ("a2", "a2", "fuzzy", True),
        ("a7", "a2", "fuzzy", False),
    }
    similar = dict(zip(removed.id, removed.jaccard))
    assert all(row.jaccard == (1.0 if row.kept else similar[row.id]) for row in duplicates.itertuples())
    # each member's place in the input: the byte offset of its line
    lines = Path("tests/data/docs.jsonl").read_bytes().splitlines(keepends=True)
    offsets = {json.loads(line)["id"]: offset for line, offset in zip(lines, np.cumsum([0] + [len(x) for x in lines]))}
    assert set(duplicates.source) == {"docs.jsonl"}
    assert duplicates.position.tolist() == [offsets[i] for i in duplicates.id]
    counts = json.loads((out / "summary.json").read_text())["counts"]
    assert counts["input"] == {"documents": 12, "empty": 2, "longest": 305, "partitions": 1}
    assert counts["exact"] == {"groups": 2, "removed": 3}
    assert counts["fuzzy"]["removed"] == 2 and counts["fuzzy"]["groups"] == 2
    assert counts["output"] == {"kept": 7, "removed": 5, "rejected": 0}
    assert summary["counts"] == counts


def test_keep_longest_and_max_column(sync, tmp_path):
    longest_out, _ = run(tmp_path / "a", ["tests/data/docs.jsonl"], keep="longest", mode="fuzzy")
    removed = pd.read_parquet(longest_out / "removed.parquet")
    # a4 and a7 are the longer versions, so they are kept and a1's copies / a2 are removed.
    assert dict(zip(removed.id, removed.representative))["a2"] == "a7"
    assert dict(zip(removed.id, removed.representative))["a1"] == "a4"
    max_out, _ = run(tmp_path / "b", ["tests/data/docs.jsonl"], keep="max:source", mode="exact")
    removed = pd.read_parquet(max_out / "removed.parquet")
    # among a1 (river), a3 (river-copy), a12 (river-copy-2) the largest source string is kept;
    # a6 and a8 tie ("empty"), so input order decides.
    assert dict(zip(removed.id, removed.representative)) == {"a1": "a12", "a3": "a12", "a8": "a6"}


def test_no_verify_keeps_whole_components(sync, tmp_path):
    out, summary = run(tmp_path, ["tests/data/docs.jsonl"], mode="fuzzy", fuzzy={"verify": False})
    # Nothing was verified: summary.json said every candidate edge was.
    assert "verified_edges" not in summary["counts"]["fuzzy"] and summary["counts"]["fuzzy"]["candidate_edges"] > 0
    assert set(pd.read_parquet(out / "removed.parquet").id) >= {"a3", "a12"}
    # Mode fuzzy hashes nothing for exact dedup: its read pass was timed as "read+exact".
    assert "read" in summary["seconds"] and "read+exact" not in summary["seconds"]


def test_output_dir_with_previous_run(sync, tmp_path):
    run(tmp_path, ["tests/data/docs.jsonl"])
    with pytest.raises(FileExistsError, match="overwrite"):
        run(tmp_path, ["tests/data/docs.jsonl"])


def test_short_documents_not_collapsed_and_empty_counted(sync, tmp_path):
    from tests.conftest import write_jsonl

    words = [f"w{i:03d}x" for i in range(300)]  # distinct, all shorter than the 24-character width
    records = [{"id": i, "text": w} for i, w in enumerate(words)] + [{"id": 1000 + i, "text": ""} for i in range(5)]
    path = write_jsonl(tmp_path / "short.jsonl", records)
    out, summary = run(tmp_path, [path])
    removed = pd.read_parquet(out / "removed.parquet")
    assert summary["counts"]["fuzzy"]["removed"] == 0
    assert removed.to_dict("list") == {
        "id": [1001, 1002, 1003, 1004],
        "kind": ["exact"] * 4,
        "representative": [1000] * 4,
        "jaccard": [1.0] * 4,
    }
    assert summary["counts"]["input"]["empty"] == 5


def test_accounting_errors():
    removed = pd.DataFrame({"_doc": [1, 2], "id": ["b", "c"], "kind": "exact", "representative": ["a", "b"]})
    with pytest.raises(AccountingError, match=r"1 representative\(s\) were removed themselves, e.g. \['b'\]"):
        check_accounting(3, 1, dd.from_pandas(removed, npartitions=2))
    with pytest.raises(AccountingError, match=r"4 input records != 1 kept \+ 1 removed \+ 0 rejected"):
        check_accounting(4, 1, dd.from_pandas(removed.iloc[:1], npartitions=1))
    with pytest.raises(AccountingError, match="1 document\\(s\\) removed twice"):
        check_accounting(4, 1, dd.from_pandas(pd.concat([removed.iloc[:1]] * 2), npartitions=1))
    assert check_accounting(5, 2, dd.from_pandas(removed.iloc[:1], npartitions=1), n_rejected=2) == 1


@pytest.mark.parametrize("ids", [["e2", "e5", "e9"], [2**62 + 2, 2**62 + 5, 2**62 + 9]], ids=["str", "int"])
def test_resolve_chains_exact_to_fuzzy_representative(ids):
    e2, e5, e9 = ids  # integer ids beyond 2**53 must survive the joins exactly (no float round trip)
    exact = pd.DataFrame({"_doc": [5, 9], "_rep": [5, 5], "_id": [e5, e9], "_rep_id": [e5, e5], "_jaccard": 1.0})
    fuzzy = pd.DataFrame({"_doc": [2, 5], "_rep": [2, 2], "_id": [e2, e5], "_rep_id": [e2, e2], "_jaccard": [1.0, 0.9]})
    divisions = (0, 4, 8, 10)  # three document partitions: keys 0-3, 4-7, 8-10
    removed, duplicates = resolve(dd.from_pandas(exact, npartitions=2), dd.from_pandas(fuzzy, npartitions=1), divisions)
    assert removed.npartitions == duplicates.npartitions == 3
    removed = removed.compute()
    # e9, a copy of e5, inherits e5's representative and its similarity with it
    assert removed.to_dict("list") == {
        "_doc": [5, 9],
        "id": [e5, e9],
        "kind": ["fuzzy", "exact"],
        "representative": [e2, e2],
        "jaccard": [0.9, 0.9],
    }
    duplicates = duplicates.compute()
    assert duplicates.drop(columns="_doc").to_dict("list") == {
        "id": [e2, e5, e5, e9],
        "group": [e2, e5, e2, e5],
        "kind": ["fuzzy", "exact", "fuzzy", "exact"],
        "kept": [True, False, False, False],
        "jaccard": [1.0, 1.0, 0.9, 1.0],
    }


def test_in_order_ranges_and_repeats(client):
    keys = np.random.default_rng(0).integers(0, 10**6, 5000)
    frame = dd.from_pandas(pd.DataFrame({"_doc": keys, "x": -keys}), npartitions=7)
    divisions = (0, 10**5, 4 * 10**5, 4 * 10**5 + 1, 9 * 10**5, 10**6)
    computed = [p.compute() for p in in_order(frame, divisions).to_delayed()]
    assert len(computed) == 5 and sum(map(len, computed)) == 5000
    for part, lo, hi in zip(computed, divisions, divisions[1:]):  # each partition holds its documents' range
        assert part._doc.between(lo, hi - 1).all() or part.empty
    assert pd.concat(computed)._doc.tolist() == sorted(keys.tolist())
    assert pd.concat(computed).x.tolist() == (-np.sort(keys)).tolist()
    same = in_order(dd.from_pandas(pd.DataFrame({"_doc": [7] * 10}), npartitions=3), (0, 10)).compute()
    assert same._doc.tolist() == [7] * 10


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_list_columns_ride_along(sync, tmp_path, fixture_docs, output_format):
    # Regression: a list column (like Reuters' topics) broke the stage files and the output.
    from tests.conftest import write_jsonl

    records = [{**d, "tags": [d["source"], "x"]} for d in fixture_docs]
    path = write_jsonl(tmp_path / "tags.jsonl", records)
    out, summary = run(tmp_path, [path], io={"output_format": output_format})
    assert summary["counts"]["output"] == {"kept": 7, "removed": 5, "rejected": 0}
    if output_format == "parquet":
        kept = pd.read_parquet(out / "deduplicated")
        assert [list(t) for t in kept.tags] == [[d["source"], "x"] for d in records if d["id"] in set(kept.id)]
    else:
        kept = [
            json.loads(line)
            for f in sorted((out / "deduplicated").glob("*.jsonl"))
            for line in f.read_text().splitlines()
        ]
        assert kept == [d for d in records if d["id"] in {k["id"] for k in kept}] and len(kept) == 7


def test_jsonl_to_parquet_stages_hold_only_the_fields_they_use(sync, tmp_path, fixture_docs, monkeypatch):
    # JSONL to Parquet read every field into the stages' partitions (onto the device, on a GPU),
    # though only the final write needs them; all are still checked, as that write converts them.
    from curate import pipeline
    from tests.conftest import write_jsonl

    reads, read_documents = [], pipeline.read_documents
    monkeypatch.setattr(pipeline, "read_documents", lambda *a, **k: reads.append(read_documents(*a, **k)) or reads[-1])
    records = [{**d, "meta": {"n": i}} for i, d in enumerate(fixture_docs)]
    records[3]["meta"] = "late"  # another type after the first record: its JSON text, no bad record
    out, summary = run(tmp_path, [write_jsonl(tmp_path / "m.jsonl", records)], io={"output_format": "parquet"})
    assert [list(r.columns) for r in reads] == [["_doc", "id", "text"], ["_doc", *records[0]]]
    assert summary["counts"]["output"] == {"kept": 7, "removed": 5, "rejected": 0}
    kept = pd.read_parquet(out / "deduplicated")
    assert list(kept.meta) == [json.dumps(r["meta"]) for r in records if r["id"] in set(kept.id)]


def test_bad_input_leaves_no_output(sync, tmp_path):
    with pytest.raises(FileNotFoundError):
        run(tmp_path, [tmp_path / "missing.jsonl"])
    assert not (tmp_path / "out").exists()


def test_distributed_components_path_gives_the_same_result(sync, fixture_run, tmp_path):
    local = fixture_run[0]  # the default: one task solves the fixture's graph
    spread, _ = run(tmp_path / "spread", ["tests/data/docs.jsonl"], fuzzy={"local_components_max_edges": 0})
    assert (local / "removed.parquet").read_bytes() == (spread / "removed.parquet").read_bytes()
    assert len(pd.read_parquet(spread / "removed.parquet")) == 5


def test_word_ngrams(sync, tmp_path):
    # word 5-grams: J(a1, a4) = 0.836, J(a2, a7) = 0.842 (pure-Python reference)
    out, summary = run(tmp_path, ["tests/data/docs.jsonl"], mode="fuzzy", fuzzy={"ngram": "word", "width": 5})
    removed = pd.read_parquet(out / "removed.parquet")
    assert dict(zip(removed.id, removed.representative)) == {"a3": "a1", "a4": "a1", "a7": "a2", "a12": "a1"}


def test_normalisation_finds_case_and_spacing_variants(sync, tmp_path, fixture_docs):
    from tests.conftest import write_jsonl

    texts = {d["id"]: d["text"] for d in fixture_docs}
    # The exact copy "a-copy" is dropped before fuzzy dedup, so the partition's index has a gap:
    # normalisation once mixed up rows then (regression).
    records = [
        {"id": "a", "text": texts["a1"]},
        {"id": "a-copy", "text": texts["a1"]},
        {"id": "orig", "text": texts["a5"]},
        {"id": "loud", "text": "  " + texts["a5"].upper().replace(" ", " \t ")},
        {"id": "b", "text": texts["a2"]},
    ]
    path = write_jsonl(tmp_path / "variants.jsonl", records)
    plain, _ = run(tmp_path / "plain", [path])
    assert pd.read_parquet(plain / "removed.parquet").id.tolist() == ["a-copy"]
    normalised, _ = run(tmp_path / "norm", [path], fuzzy={"lowercase": True, "collapse_whitespace": True})
    assert pd.read_parquet(normalised / "removed.parquet").to_dict("list") == {
        "id": ["a-copy", "loud"],
        "kind": ["exact", "fuzzy"],
        "representative": ["a", "orig"],
        "jaccard": [1.0, 1.0],  # similarity of the normalised texts: "loud" equals "orig" once normalised
    }


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="per-stage peaks need Linux's clear_refs")
def test_stage_peaks_restart_per_stage():
    stats = Stats()
    with stats.timed("big"):
        block = np.ones(300_000_000, dtype=np.uint8)  # 300 MB touched in this process
        del block
    with stats.timed("small"):
        pass
    big, small = stats.peaks["big"]["client"], stats.peaks["small"]["client"]
    assert big > small + 250e6
    assert stats.overall["client"] == big


def test_counts_are_computed_with_the_stages_and_match_their_tables(fixture_run):
    out, summary, passes, _ = fixture_run
    # One pass per stage: the counts come with the stages' writes, no stage is read again for them.
    assert passes == [
        "read+exact", "exact", "minhash+lsh", "select", "verify", "member_pairs",
        "verify_members", "components", "groups", "removed", "duplicates", "write",
    ]  # fmt: skip
    stages, counts = out / "_stages", summary["counts"]

    def rows(stage: str) -> int:
        return len(pd.read_parquet(stages / stage))

    def groups(stage: str) -> dict:
        table = pd.read_parquet(stages / stage)
        return {"groups": int((table._doc == table._rep).sum()), "removed": int((table._doc != table._rep).sum())}

    scored = pd.read_parquet(stages / "verify")
    passed = int((scored.jaccard >= summary["config"]["fuzzy"]["threshold"]).sum())
    assert counts["exact"] == groups("exact") == {"groups": 2, "removed": 3}
    assert counts["fuzzy"] == {
        "candidate_edges": rows("minhash+lsh/edges"),
        "verified_edges": passed + rows("verify_members"),
        "member_pairs": rows("member_pairs/pairs"),
        "member_edges": rows("verify_members"),
        "component_nodes": rows("components"),
        **groups("groups"),
        "buckets_over_cap": 0,
    }
    assert passed > 0 and counts["fuzzy"]["removed"] == 2


def test_no_stage_aligns_frames_by_their_index(fixture_run):
    # Index labels repeat across curate's partitions: a realignment pairs rows of other
    # documents (see tests/test_api.py for the verification filter that did).
    assert fixture_run[3] == []


def test_a_local_scheduler_set_in_dask_config_runs_the_stages_and_writes_the_same_bytes(client, fixture_run, tmp_path):
    # Dask's precedence: dask.config's scheduler before the default client. The run computes in
    # this process (disk shuffles, no P2P: the client's workers are not its) and writes what the
    # cluster's run wrote.
    with dask.config.set(scheduler="sync"), get_task_stream(client) as tasks:
        out, summary = run(tmp_path, ["tests/data/docs.jsonl"])
    assert tasks.data == [] and summary["peak_rss_bytes"]["workers"] == {}
    cluster = fixture_run[0]
    files = sorted(p.relative_to(cluster) for p in cluster.rglob("*") if p.is_file() and "_stages" not in p.parts)
    assert [str(f) for f in files if f.suffix != ".json"] == [
        "deduplicated/part.00000.jsonl",
        "duplicates.parquet",
        "removed.parquet",
    ]
    for name in files:
        if name.suffix != ".json":
            assert (out / name).read_bytes() == (cluster / name).read_bytes(), name
    assert summary["counts"] == fixture_run[1]["counts"]


def test_a_partition_for_every_worker_thread_with_the_same_bytes(client, fixture_run, tmp_path, monkeypatch):
    # The fixture (2,445 bytes) is one partition; with a floor of 1,000 bytes it is cut for the
    # session's two worker threads, and the run writes what the one-partition run wrote (the
    # kept documents in two files). The partitions are part of the read stage's key.
    monkeypatch.setattr("curate.io.plan.SPREAD_FLOOR", 1000)
    out, summary = run(tmp_path, ["tests/data/docs.jsonl"])
    cluster, one = fixture_run[0], fixture_run[1]
    assert one["counts"]["input"]["partitions"] == 1 and summary["counts"]["input"]["partitions"] == 2
    for name in ("removed.parquet", "duplicates.parquet"):
        assert (out / name).read_bytes() == (cluster / name).read_bytes(), name
    kept = sorted((out / "deduplicated").iterdir())
    assert [p.name for p in kept] == ["part.00000.jsonl", "part.00001.jsonl"]
    assert b"".join(p.read_bytes() for p in kept) == (cluster / "deduplicated" / "part.00000.jsonl").read_bytes()
    marker = json.loads((cluster / "_stages" / "read" / "_marker.json").read_text())
    assert marker["made_of"]["partitions"] == "1 partition"


def test_partitions_are_no_larger_than_the_workers_memory_holds_unless_given(
    client, fixture_run, tmp_path, monkeypatch, caplog
):
    # Workers of 1 GB were restarted in verification until the run stopped, at the default 64 MB
    # partitions (of a corpus of books and edited copies; 32 MB finished). Each worker here has
    # one thread and the limit LocalCluster gives it.
    (limit,) = {w["memory_limit"] for w in client.scheduler_info(n_workers=-1)["workers"].values()}
    workers = worker_specs(client)
    assert memory_blocksize(workers, gpu=False) == max(4_000_000, int((limit - 300_000_000) / 24))
    assert memory_blocksize(workers, gpu=True) is None and memory_blocksize({}, gpu=False) is None
    # Records of 100 bytes take 8 KB each at 28 bands (4 KB measured, and a margin) beside 24 times
    # their bytes: workers of 1 GB were restarted in MinHash + LSH on 29 MB partitions of lines
    # (a user's trial), and reached 90-96 % on 11 MB ones (another's).
    lines = {"a": {"memory_limit": 1_000_000_000, "nthreads": 1}}
    assert memory_blocksize(lines, gpu=False) == 29_166_666
    assert memory_blocksize(lines, gpu=False, record_bytes=100, num_bands=28) == 6_725_595  # 700 MB / (24 + 80.08)
    assert memory_blocksize(lines, gpu=False, record_bytes=100, num_bands=476) == 4_000_000  # --num-perm 10000
    assert memory_blocksize(lines, gpu=False, record_bytes=100_000, num_bands=28) == 29_069_670  # books
    assert record_bytes(*expand_paths(["tests/data/docs.jsonl"])[:2], "jsonl") == pytest.approx(2445 / 12)
    # As if that were 1,000 bytes: the fixture (2,445 bytes) in 3 partitions, the same outputs.
    monkeypatch.setattr("curate.pipeline.memory_blocksize", lambda workers, gpu, record_bytes, num_bands: 1000)
    out, summary = run(tmp_path, ["tests/data/docs.jsonl"])
    assert summary["counts"]["input"]["partitions"] == 3 and summary["config"]["io"]["blocksize"] == 1000
    # The workers it ran on, whose limit the config does not give (its memory_limit is "auto").
    addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
    assert summary["workers"] == {a: {"nthreads": 1, "memory_limit": limit} for a in addresses}
    assert len(addresses) == 2 and summary["config"]["cluster"]["memory_limit"] == "auto"
    for name in ("removed.parquet", "duplicates.parquet"):
        assert (out / name).read_bytes() == (fixture_run[0] / name).read_bytes(), name
    kept = sorted((out / "deduplicated").iterdir(), key=lambda p: int(p.name.split(".")[1]))
    assert b"".join(p.read_bytes() for p in kept) == (fixture_run[0] / "deduplicated" / "part.00000.jsonl").read_bytes()
    # A blocksize given is the user's, the default's value included; larger than the rule's, a
    # warning says so before the workers are restarted (it said nothing).
    with caplog.at_level("WARNING", logger="curate"):
        _, given = run(tmp_path / "given", ["tests/data/docs.jsonl"], io={"blocksize": "64MB"})
    assert given["counts"]["input"]["partitions"] == 1 and given["config"]["io"]["blocksize"] == 64_000_000
    assert [r.getMessage() for r in caplog.records if "blocksize" in r.getMessage()] == [
        "blocksize 64MB is more than the workers' memory limits hold (about 0.001MB a partition): workers may be "
        "restarted until the run stops; leave it out (partitions are then cut to fit) or raise the memory limit"
    ]
    # Resumed with more memory (the stop's advice), a run cut its input in larger partitions and
    # computed every finished stage again; it now cuts it as the run it resumes did.
    stages = tmp_path / "stages"
    dedup(["tests/data/docs.jsonl"], str(stages), load_config(None, {}), keep_stages=True)
    monkeypatch.setattr("curate.pipeline.memory_blocksize", lambda workers, gpu, record_bytes, num_bands: 2000)
    resumed = dedup(["tests/data/docs.jsonl"], str(stages), load_config(None, {}), resume=True, keep_stages=True)
    assert resumed["counts"]["input"]["partitions"] == 3 and resumed["config"]["io"]["blocksize"] == 1000
    assert len(resumed["reused_stages"]) == 11


def test_a_document_larger_than_a_worker_holds_is_warned_of(client, tmp_path, monkeypatch, caplog):
    # A document is not split as partitions are: records of 150 MB restarted workers of 3 GB
    # until the run stopped (a user's trial), advising a smaller --blocksize, which cannot help.
    lines = Path("tests/data/docs.jsonl").read_text().splitlines()
    longest = max(len(json.loads(line)["text"]) for line in lines)
    one = {"a": {"memory_limit": 3_000_000_000, "nthreads": 1}}
    assert document_too_large(one, False, 150_000_000) == 28 * 150_000_000  # 4.2 GB > 2.7 GB
    assert document_too_large(one, False, 90_000_000) is None  # 2.52 GB fit
    assert document_too_large({"a": {"memory_limit": 3_000_000_000, "nthreads": 2}}, False, 50_000_000) is not None
    assert document_too_large(one, True, 150_000_000) is None and document_too_large({}, False, 10**9) is None
    # The run counts the longest document (characters), and says so where it does not fit.
    _, summary = run(tmp_path / "fits", ["tests/data/docs.jsonl"])
    assert summary["counts"]["input"]["longest"] == longest
    assert "longest document" not in caplog.text
    monkeypatch.setattr("curate.cluster.DOCUMENT_PEAK", 10**9)  # as if each character took 1 GB
    with caplog.at_level("WARNING", logger="curate"):
        run(tmp_path / "large", ["tests/data/docs.jsonl"])
    assert f"the longest document holds {longest:,} characters: MinHash and verification take about" in caplog.text
    assert "workers may be restarted until the run stops" in caplog.text


def test_summary_lists_the_workers_lost_while_the_run_computed(client, tmp_path, monkeypatch):
    # A worker lost (its tasks run again) was said in a warning only: a script reading the
    # summary.json of a run that finished saw nothing. Those lost in the caller's earlier runs
    # on the same client are not this run's.
    calls = iter([["tcp://earlier"], ["tcp://earlier", "tcp://10.0.0.2:4242"]])
    monkeypatch.setattr("curate.pipeline.workers_left", lambda client: next(calls))
    _, summary = run(tmp_path, ["tests/data/docs.jsonl"])
    assert summary["workers_left"] == ["tcp://10.0.0.2:4242"]


def test_a_run_resumed_on_another_number_of_threads_reuses_its_stages_if_its_partitions_are_alike(
    client, tmp_path, monkeypatch, caplog
):
    # A run resumed on a cluster of another size (a node lost, restarted with fewer workers)
    # computed every stage again: the worker threads were part of the stages' key, though the
    # fixture is one partition either way.
    out, inputs = tmp_path / "out", ["tests/data/docs.jsonl"]
    monkeypatch.setattr("curate.pipeline.partition_slots", lambda workers, gpu: 1)
    first = dedup(inputs, str(out), load_config(None, {}), keep_stages=True)
    monkeypatch.setattr("curate.pipeline.partition_slots", lambda workers, gpu: 2)
    second = dedup(inputs, str(out), load_config(None, {}), resume=True, keep_stages=True)
    assert second["reused_stages"] == [
        *("read", "exact", "minhash+lsh", "select", "verify", "member_pairs", "verify_members"),
        *("components", "groups", "removed", "duplicates"),
    ]
    assert second["counts"] == first["counts"]
    # Partitions that differ are computed again, and the warning says so (it said "min_partitions: 1 -> 2").
    monkeypatch.setattr("curate.io.plan.SPREAD_FLOOR", 1000)
    third = dedup(inputs, str(out), load_config(None, {}), resume=True, keep_stages=True)
    assert third["reused_stages"] == [] and third["counts"]["input"]["partitions"] == 2
    assert re.search(
        r"options \(partitions: 1 partition -> 2 partitions, cut at file 1 byte \d+ \(the worker threads changed",
        caplog.text,
    )


def test_summary_lists_input_files_and_stage_peaks(client, fixture_run):
    _, summary, _, _ = fixture_run
    path = Path("tests/data/docs.jsonl").resolve()
    assert [(Path(f["path"]), f["size"]) for f in summary["input_files"]] == [(path, path.stat().st_size)]
    peaks = summary["stage_peak_rss_bytes"]
    assert set(peaks) == set(summary["seconds"]) - {"total"}
    workers = set(client.scheduler_info()["workers"])
    for stage, peak in peaks.items():
        assert set(peak["workers"]) == workers and peak["client"] > 0, stage
        assert peak["total"] <= summary["peak_rss_bytes"]["total"]
    assert summary["peak_device_bytes"] is None and summary["stage_peak_device_bytes"] == {}  # no GPU worker
    assert summary["device_spilled_bytes"] is None
    # Where each stage's time went: compute seconds per kind of task, within the stage's wall
    # time on all the cluster's threads. The fixture is one partition: one read task per pass.
    tasks = summary["stage_task_seconds"]
    assert set(tasks) == set(summary["seconds"]) - {"total"}
    # A fused task's kind names its steps, first first (Dask's own name would be "read").
    (read,) = [t for kind, t in tasks["read+exact"].items() if kind.split("+")[0] == "read-documents"]
    assert read["tasks"] == 1 and read["seconds"] > 0
    threads = sum(worker["nthreads"] for worker in client.scheduler_info()["workers"].values())
    for stage, kinds in tasks.items():
        assert 0 < sum(kind["seconds"] for kind in kinds.values()) <= summary["seconds"][stage] * threads, stage


def test_task_times_sum_compute_spans_by_kind_of_task():
    spans = lambda *pairs: [{"action": a, "start": s, "stop": e} for a, s, e in pairs]  # noqa: E731
    records = [
        {"key": ("read-documents-0123456789abcdef0123456789abcdef", 0), "startstops": spans(("compute", 1.0, 3.5))},
        {"key": ("read-documents-0123456789abcdef0123456789abcdef", 1), "startstops": spans(("compute", 2.0, 2.25))},
        {
            "key": "host-split-fedcba9876543210fedcba9876543210",
            "startstops": spans(("transfer", 0, 9), ("compute", 4, 7)),
        },
    ]
    assert task_times(records) == {
        "host-split": {"tasks": 1, "seconds": 3.0},
        "read-documents": {"tasks": 2, "seconds": 2.75},
    }


def test_a_dictionary_encoded_keep_column_orders_by_its_values(sync, tmp_path):
    # A Parquet column pandas wrote from a categorical is dictionary-encoded: --keep min:COLUMN
    # stopped the run (the read stage's file could not be read back with its type), and the
    # Python API kept by the codes, each file's own order of first appearance ("y" before "x").
    import pyarrow as pa
    import pyarrow.parquet as pq

    import curate

    (tmp_path / "in").mkdir()
    for name, texts, cats in [("a", ["one", "one", "two"], ["y", "x", "z"]), ("b", ["two", "one"], ["a", "w"])]:
        table = pa.table({"text": texts, "cat": pa.array(cats).dictionary_encode()})
        pq.write_table(table, tmp_path / "in" / f"{name}.parquet")
    out = tmp_path / "out"
    dedup([str(tmp_path / "in")], str(out), load_config(None, {"mode": "exact", "keep": "min:cat"}))
    removed = pd.read_parquet(out / "removed.parquet")
    assert sorted(zip(removed.id, removed.representative)) == [  # "w" < "x" < "y"; "a" < "z"
        ("a.parquet:0", "b.parquet:1"),
        ("a.parquet:1", "b.parquet:1"),
        ("a.parquet:2", "b.parquet:0"),
    ]
    kept = pq.read_table(out / "deduplicated")
    assert pa.types.is_dictionary(kept.schema.field("cat").type)  # the output keeps the input's type
    docs = curate.read_documents([str(tmp_path / "in" / "a.parquet")])
    kept, _, _ = curate.deduplicate(docs, mode="exact", keep="min:cat").compute()
    assert kept.cat.astype(str).tolist() == ["x", "z"]


def test_cache_input_reads_the_input_once_for_the_stages_and_writes_the_same_bytes(client, fixture_run, tmp_path):
    # Without it, MinHash and the candidates' texts read the input again (a task of the reader
    # in those stages); with it (by default where the workers' memory holds the input four
    # times, as here), the first read's partitions stay in the workers and serve them.
    out, summary = run(tmp_path, ["tests/data/docs.jsonl"], io={"cache_input": False})
    reads = lambda run_summary: {  # noqa: E731
        stage: sum(t["tasks"] for kind, t in kinds.items() if "read-documents" in kind.split("+"))  # fused or not
        for stage, kinds in run_summary["stage_task_seconds"].items()
        if stage in ("minhash+lsh", "select")
    }
    assert (summary["cache_input"], fixture_run[1]["cache_input"]) == (False, True)
    assert reads(summary) == {"minhash+lsh": 1, "select": 1}
    assert reads(fixture_run[1]) == {"minhash+lsh": 0, "select": 0}
    cached = fixture_run[0]
    for name in ["deduplicated/part.00000.jsonl", "duplicates.parquet", "removed.parquet"]:
        assert (out / name).read_bytes() == (cached / name).read_bytes(), name
    assert summary["counts"] == fixture_run[1]["counts"]


def test_the_input_kept_in_memory_is_released_before_the_write(client, tmp_path, monkeypatch):
    # The copy stayed in the workers until the run ended: the gutenberg write, the run's peak,
    # held it too (2.54 GB against 2.10 without it).
    import curate.pipeline as pipeline

    persisted, held = [], []
    persist, read_for_output = Runner.persist, pipeline._read_for_output

    hints = []

    def keep(self, stage, frame):
        hints.append(self.hint)
        frame = persist(self, stage, frame)
        persisted.extend(future.key for future in futures_of(frame))  # keys: a Future would hold it
        return frame

    def at_the_write(*args, **kwargs):
        gc.collect()
        # A Future dropped is released by a callback on the client's event loop (Future.release):
        # a round trip there runs it first. Checked at once, the key was still listed whenever the
        # loop's thread had not run yet (the full suite, under load).
        client.sync(asyncio.sleep, 0)
        held.extend(key for key in persisted if key in client.futures)
        return read_for_output(*args, **kwargs)

    monkeypatch.setattr(Runner, "persist", keep)
    monkeypatch.setattr(pipeline, "_read_for_output", at_the_write)
    _, summary = run(tmp_path, ["tests/data/docs.jsonl"])
    assert summary["cache_input"] and len(persisted) == 1 and held == []
    # Workers out of memory were told of --memory-limit and --blocksize, not of the copy they held
    # (a user's trial: its workers at 96 %).
    assert hints[0].endswith(
        "or lower the partition size (--blocksize, now 64MB), or read the input again for each stage "
        "(--no-cache-input); finished stages are kept for --resume"
    ), hints


class _Workers:
    """A client's stand-in: workers with these memory limits (bytes; 0: none)."""

    def __init__(self, *limits):
        self.limits = limits

    def scheduler_info(self, n_workers):
        return {"workers": {f"tcp://w{i}": {"memory_limit": limit} for i, limit in enumerate(self.limits)}}


def test_the_input_is_cached_by_default_where_the_workers_memory_holds_it_four_times():
    files = [("a.jsonl", 100, "t"), ("b.jsonl.zst", 100, "t"), ("c.parquet", 50, "t")]  # 100 + 600 + 300 bytes
    auto = lambda client, mode="both", gpu=False, resume=False: cache_input(  # noqa: E731
        None, mode, client, files, gpu=gpu, resume=resume
    )
    assert auto(_Workers(2000, 2000)) and auto(_Workers(4000), mode="fuzzy")
    assert not auto(_Workers(2000, 1999))  # 3,999 bytes hold the input's 1,000 less than 4 times
    assert not auto(_Workers(8000, 0))  # a worker without a limit: nothing to go by
    assert not auto(_Workers())
    assert not auto(None)  # no client: Dask's local scheduler, nothing to persist into
    assert not auto(_Workers(8000), mode="exact")  # only the read stage reads the documents
    assert not auto(_Workers(8000), gpu=True) and not auto(_Workers(8000), resume=True)
    assert cache_input(True, "exact", None, files, gpu=True, resume=True)  # as given
    assert not cache_input(False, "both", _Workers(8000), files, gpu=False, resume=False)


def test_an_unreachable_storage_is_no_changed_input(monkeypatch):
    # S3 gone mid-run: the check for changed inputs listed the bucket again while the read's
    # error was handled, and its own traceback came second; a listing that fails for another
    # reason than a missing file cannot tell a change, so the read's error stands.
    from curate import pipeline

    files = [("s3://b/a.jsonl", 10, "t")]

    def fingerprint(error):
        def raising(inputs):
            raise error

        return raising

    monkeypatch.setattr(pipeline, "input_fingerprint", fingerprint(ConnectionError("s3://b: unreachable")))
    assert pipeline._changed_input(["s3://b/"], files) is None
    monkeypatch.setattr(pipeline, "input_fingerprint", fingerprint(FileNotFoundError("s3://b/ matches no file")))
    assert pipeline._changed_input(["s3://b/"], files) == "s3://b/a.jsonl"
