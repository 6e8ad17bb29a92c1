"""The Python API (issue 13): ``curate.deduplicate`` keeps what ``curate dedup`` keeps, builds its
graph without computing, computes each stage once, and names a wrong option or column."""

import gzip
import itertools
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dask.callbacks import Callback
from distributed import get_task_stream

import curate
import curate.backend
from curate.config import load_config
from curate.io import read_documents, write_documents
from curate.params import optimal_bands
from curate.pipeline import dedup
from curate.schema import REJECT_COLUMNS, WORKING_COLUMNS
from tests.conftest import FIXTURES, realignments, shared_corpus, write_jsonl

ROOT = Path(__file__).resolve().parents[1]


def lines_of(corpus: str, shard: int = 0):
    """The records of a shared corpus' shard, parsed one by one."""
    path = sorted(shared_corpus(corpus).glob("part-*.jsonl.gz"))[shard]
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        yield from map(json.loads, lines)


def mixed_slice(path: Path) -> Path:
    """A few hundred records of three corpora, as one JSONL file (id, text, corpus).

    Near duplicates: Enron spam campaigns (mails sent with small edits), Genesis 1-10 in the
    KJV and its modernised spelling (AKJV); each set split in two halves with 20news posts
    (no two alike) between, so groups span partitions; then exact copies of the first records.
    With ``keep="longest"``, some groups keep a later document than the first.
    """
    spam = list(itertools.islice((r for r in lines_of("enron_spam", 2) if r["label"] == "spam"), 5501, 5701))
    genesis = [r for r in lines_of("bible/chapters") if r["book"] == 1 and r["chapter"] <= 10]
    akjv, kjv = [r for r in genesis if r["version"] == "akjv"], [r for r in genesis if r["version"] == "kjv"]
    news = list(itertools.islice(lines_of("20news"), 100))
    records = [
        {"id": r["id"], "text": r["text"], "corpus": corpus}
        for corpus, part in [
            ("enron_spam", spam[0::2]),
            ("bible", akjv),
            ("20news", news),
            ("enron_spam", spam[1::2]),
            ("bible", kjv),
        ]
        for r in part
    ]
    records += [{**r, "id": f"copy-{r['id']}"} for r in records[:10]]
    return write_jsonl(path, records)


def kept_ids(out: Path) -> list:
    return [
        json.loads(line)["id"]
        for part in sorted(out.glob("deduplicated/part.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
        for line in part.open()
    ]


OPTIONS = {"threshold": 0.7, "keep": "longest"}


@pytest.fixture(scope="module")
def cli_run(client, tmp_path_factory):
    """The mixed slice and ``curate dedup``'s run on it in three partitions (``OPTIONS``),
    shared by the frames that must keep what it kept."""
    path = mixed_slice(tmp_path_factory.mktemp("api") / "mixed.jsonl")
    out = path.parent / "out"
    blocksize = path.stat().st_size // 3 + 1
    config = {"keep": OPTIONS["keep"], "fuzzy": {"threshold": OPTIONS["threshold"]}, "io": {"blocksize": blocksize}}
    summary = dedup([str(path)], str(out), load_config(None, config))["counts"]
    # What makes it a test: both kinds of duplicates, several partitions, and groups whose
    # longest document (kept) is not their first.
    assert summary["input"]["partitions"] == 3 and summary["exact"]["removed"] > 0 and summary["fuzzy"]["removed"] > 0
    removed = pd.read_parquet(out / "removed.parquet")
    position = pd.read_parquet(out / "duplicates.parquet").drop_duplicates("id").set_index("id")["position"]
    assert (position[removed.representative].to_numpy() > position[removed.id].to_numpy()).any()
    return path, blocksize, summary, kept_ids(out)


# Curate's frame on the cluster, the users' frames on the synchronous scheduler: what the frames
# change is the documents' keys, not where they are computed (conftest.sync).
@pytest.mark.parametrize("frame, scheduler", [("read_documents", None), ("read_json", "sync"), ("from_pandas", "sync")])
def test_kept_ids_equal_the_cli_run(cli_run, frame, scheduler):
    path, blocksize, summary, expected = cli_run
    if frame == "read_documents":  # curate's own keys (file and offset)
        docs = read_documents(str(path), blocksize=blocksize)
    elif frame == "read_json":  # a frame of the user's: keys made in the call
        docs = dd.read_json(str(path), lines=True, blocksize=blocksize * 9 // 10)  # other boundaries
    else:
        docs = dd.from_pandas(pd.read_json(path, lines=True, dtype=False), npartitions=3)
    assert docs.npartitions >= 3
    with dask.config.set({"scheduler": scheduler} if scheduler else {}):
        result = curate.deduplicate(docs, **OPTIONS)
        kept, removed, _ = result.compute()
    assert kept.id.tolist() == expected  # the same documents, in input order
    assert result.counts["removed"] == summary["output"]["removed"] > 0
    assert result.counts["exact_removed"] == summary["exact"]["removed"]
    assert result.counts["fuzzy_removed"] == summary["fuzzy"]["removed"]
    assert set(removed.id).isdisjoint(expected) and set(removed.representative) <= set(expected)


class Tasks(Callback):
    """Counts the tasks the synchronous scheduler runs, and the calls of the per-partition kernels."""

    def __init__(self):
        super().__init__()
        self.tasks = 0

    def _pretask(self, key, dsk, state):
        self.tasks += 1


def fixture_frame(npartitions: int = 3) -> dd.DataFrame:
    return dd.from_pandas(pd.read_json(FIXTURES / "docs.jsonl", lines=True, dtype=False), npartitions=npartitions)


def test_copies_with_format_characters_are_found_with_strip_format():
    # A crawl's copies with zero-width spaces, soft hyphens and a BOM sprinkled in shared almost
    # no shingle with their originals (Jaccard 0.003-0.009 in a user's trial) under every
    # normalisation there was: NFKC keeps them.
    docs = pd.read_json(FIXTURES / "docs.jsonl", lines=True, dtype=False)
    docs = docs[docs.id.isin(["a1", "a2", "a5", "a11"])]  # no two alike
    invisible = ["\u200b", "\u00ad", "\u200d", "\ufeff"]
    copies = docs.assign(
        id=docs.id.astype(str) + "-copy",
        text=["".join(c + invisible[i % 4] if i % 3 == 0 else c for i, c in enumerate(t)) for t in docs.text],
    )
    frame = dd.from_pandas(pd.concat([docs.assign(id=docs.id.astype(str)), copies], ignore_index=True), npartitions=2)
    with dask.config.set(scheduler="sync"):
        _, missed, _ = curate.deduplicate(frame, mode="fuzzy", collapse_whitespace=True, nfkc=True).compute()
        _, removed, _ = curate.deduplicate(frame, mode="fuzzy", strip_format=True).compute()
    assert missed.empty
    assert sorted(removed.id) == sorted(copies.id) and (removed.jaccard == 1.0).all()
    assert sorted(removed.representative) == sorted(docs.id.astype(str))


def test_copies_without_accents_are_found_with_strip_accents():
    # Copies of French, Vietnamese, Greek and Arabic texts without their diacritics scored
    # 0.00-0.53 with every other flag on, in a user's trial; datatrove folds them by default.
    originals = [
        "Le cœur a ses raisons que la raison ne connaît point; on le sait en mille choses. " * 3,
        "Tôi yêu tiếng nước tôi từ khi mới ra đời, người ơi! Mẹ hiền ru những câu xa vời. " * 3,
        "Η γλώσσα μου δόθηκε ελληνική· το σπίτι φτωχικό στις αμμουδιές του Ομήρου. " * 3,
        "كَتَبَ الطَّالِبُ الدَّرْسَ فِي الْمَدْرَسَةِ، ثُمَّ ذَهَبَ إِلَى الْبَيْتِ مَسْرُورًا. " * 3,
    ]
    bare = ["".join(c for c in unicodedata.normalize("NFD", t) if unicodedata.category(c) != "Mn") for t in originals]
    ids = [f"o{i}" for i in range(4)] + [f"c{i}" for i in range(4)]
    frame = dd.from_pandas(pd.DataFrame({"id": ids, "text": originals + bare}), npartitions=2)
    with dask.config.set(scheduler="sync"):
        _, missed, _ = curate.deduplicate(frame, mode="fuzzy", lowercase=True, nfkc=True).compute()
        _, removed, _ = curate.deduplicate(frame, mode="fuzzy", strip_accents=True).compute()
    assert missed.empty
    assert sorted(removed.id) == ids[4:] and (removed.jaccard == 1.0).all()
    assert sorted(removed.representative) == ids[:4]


def test_kept_persists_and_deduplicates_again():
    # Dask rebuilt an expression above a substituted one once per path to it: result.kept of
    # mode both or fuzzy (167 expressions, 54,874 paths) never finished persist(), optimize()
    # or a second deduplicate(), at full CPU; compute() finished.
    import threading

    outcome = {}

    def work():
        with dask.config.set(scheduler="sync"):
            kept = curate.deduplicate(fixture_frame(), threshold=0.5, width=3).kept.persist()
            again = curate.deduplicate(kept, threshold=0.5, width=3)
            outcome["kept"], outcome["removed again"] = len(kept), len(again.compute()[1])

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "result.kept.persist() and a second deduplicate did not finish in 120 s"
    assert outcome == {"kept": 6, "removed again": 0}


@pytest.mark.parametrize("read", [False, True])
def test_reference_documents_are_kept_as_curate_dedup_keeps_them(tmp_path, read):
    # The API had no reference: a priority column with keep="max:COLUMN" ranked the published
    # documents first, but removed a3 and a4, published copies of a1. As curate dedup --reference
    # (test_cli_reference_documents_are_kept_and_not_written): frames of its own, or read ones.
    records = [json.loads(line) for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]
    if read:
        published = read_documents(str(write_jsonl(tmp_path / "p.jsonl", records[:6])))
        new = read_documents(str(write_jsonl(tmp_path / "n.jsonl", records[6:])))
    else:
        published = dd.from_pandas(pd.DataFrame(records[:6]), npartitions=2)
        new = dd.from_pandas(pd.DataFrame(records[6:]), npartitions=2)
    with dask.config.set(scheduler="sync"):
        result = curate.deduplicate(new, reference=published, keep="longest")
        kept, removed, _ = result.compute()
    assert kept.id.tolist() == ["a9", "a10", "a11"] and list(kept.columns) == ["id", "text", "source"]
    assert removed[["id", "representative"]].values.tolist() == [["a7", "a2"], ["a8", "a6"], ["a12", "a1"]]
    assert (result.counts["documents"], result.counts["reference"], result.counts["kept"]) == (12, 6, 3)
    # An empty week against the reference compares nothing: its copies of one another (a3, a4 of
    # a1) stay whatever they share, so their buckets are left out (a trial's empty week verified
    # 7,346 pairs of published documents).
    with dask.config.set(scheduler="sync"):
        empty = curate.deduplicate(new.partitions[:1].head(0, npartitions=1, compute=False), reference=published)
        assert len(empty.compute()[0]) == 0
    assert (empty.counts["candidate_edges"], empty.counts["reference"], empty.counts["removed"]) == (0, 6, 0)
    with pytest.raises(ValueError, match=r"text_field='text': no such column in reference \(columns: \['body'\]\)"):
        curate.deduplicate(new, reference=dd.from_pandas(pd.DataFrame({"body": ["x"]}), npartitions=1))


def test_building_runs_no_task_and_compute_runs_each_stage_once(monkeypatch):
    calls = {"md5": 0, "minhash": 0}

    def counted(name, function):
        def run(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return run

    monkeypatch.setitem(curate.backend.md5_hex._lookup, pd.Series, counted("md5", curate.backend.md5_hex_pandas))
    monkeypatch.setitem(
        curate.backend.minhash_signatures._lookup,
        pd.Series,
        counted("minhash", curate.backend.minhash_signatures_pandas),
    )
    docs = fixture_frame()
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}), Tasks() as tasks:
        result = curate.deduplicate(docs, threshold=0.5, width=3)
        assert tasks.tasks == 0  # building the graph ran nothing
        kept, removed, duplicates = result.compute()
    assert tasks.tasks > 0 and result.counts["removed"] > 0
    # md5 once per partition (the meta is built from an empty frame, without the backend);
    # MinHash once per partition of what exact dedup kept.
    assert calls == {"md5": docs.npartitions, "minhash": docs.npartitions}
    assert len(kept) + len(removed) == result.counts["documents"] == len(docs)


def test_compute_with_writes_and_counts_in_one_pass(monkeypatch, tmp_path):
    # A pipeline writes the tables rather than bring them to the client: result.counts stayed
    # empty (only compute() filled it) and nothing checked the accounting.
    calls = {"minhash": 0}

    def counted(*args, **kwargs):
        calls["minhash"] += 1
        return curate.backend.minhash_signatures_pandas(*args, **kwargs)

    monkeypatch.setitem(curate.backend.minhash_signatures._lookup, pd.Series, counted)
    docs = fixture_frame()
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        expected = curate.deduplicate(docs, threshold=0.5, width=3)
        kept, removed, _ = expected.compute()
        calls["minhash"] = 0
        result = curate.deduplicate(docs, threshold=0.5, width=3)
        written = result.compute_with(
            result.kept.to_parquet(tmp_path / "kept", compute=False, write_index=False),
            result.removed.to_parquet(tmp_path / "removed", compute=False, write_index=False),
            result.removed.map_partitions(len, meta=(None, "int64")).sum(),
            write_documents(result.kept, str(tmp_path / "jsonl"), "jsonl"),  # the README's JSONL recipe
        )
    assert calls["minhash"] == docs.npartitions  # each stage once, writes and counts together
    assert result.counts == expected.counts and result.counts["removed"] == written[2] == len(removed) > 0
    assert written[:2] == (None, None) and written[3] == len(kept)
    parts = sorted((tmp_path / "jsonl").glob("part.*.jsonl"), key=lambda part: int(part.name.split(".")[1]))
    lines = [json.loads(line) for part in parts for line in part.open()]
    assert [(line["id"], line["text"]) for line in lines] == list(zip(kept.id, kept.text))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "kept"), kept.reset_index(drop=True))
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "removed"), removed.reset_index(drop=True))
    # Another result's write was computed with these counts (a trial's 18,612 kept written beside
    # counts of 18,762); to_json's delayed objects ran the stages twice.
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        other = curate.deduplicate(docs, threshold=0.9, width=3)
        with pytest.raises(ValueError, match="collection 1 is made from none of this result's frames"):
            result.compute_with(
                result.kept.to_parquet(tmp_path / "a", compute=False),
                other.kept.to_parquet(tmp_path / "b", compute=False),
            )
        with pytest.raises(TypeError, match="collection 0 is a list, not a Dask DataFrame collection"):
            result.compute_with(result.kept.to_json(tmp_path / "json", compute=False))


def test_counts_without_verification_name_no_verified_edges():
    # counts["verified_edges"] was every candidate edge though none was verified (verify=False).
    with dask.config.set(scheduler="sync"):
        checked = curate.deduplicate(fixture_frame(), mode="fuzzy", threshold=0.5, width=3)
        unchecked = curate.deduplicate(fixture_frame(), mode="fuzzy", threshold=0.5, width=3, verify=False)
        checked.compute(), unchecked.compute()
    assert 0 < checked.counts["verified_edges"] <= checked.counts["candidate_edges"]
    assert "verified_edges" not in unchecked.counts
    assert unchecked.counts["candidate_edges"] == checked.counts["candidate_edges"]


def test_no_frames_are_aligned_by_their_index_and_every_shuffle_method_agrees():
    # Verification's filter used to be frame[frame.jaccard >= t] on a frame made from two frames:
    # Dask shuffled frame and mask apart on their repeated index labels, and under the
    # synchronous scheduler's disk shuffle the two came back in different orders
    # (IndexError, or other rows kept, in about a third of the runs).
    results = {}
    for method in ("tasks", "disk"):
        with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": method}), realignments() as found:
            kept, removed, _ = curate.deduplicate(fixture_frame(), threshold=0.5, width=3).compute()
        assert found == [] and len(removed) > 0
        results[method] = (kept.id.tolist(), removed.id.tolist(), removed.representative.tolist())
    assert results["disk"] == results["tasks"]


def test_a_local_scheduler_set_in_dask_config_beside_a_client(client):
    # Dask picks P2P shuffles wherever a client exists, even under dask.config's scheduler, and
    # P2P needs the client's workers ("No worker found"): curate shuffles on disk there.
    with get_task_stream(client) as tasks, dask.config.set(scheduler="sync"):
        kept, removed, _ = curate.deduplicate(fixture_frame(), threshold=0.5, width=3).compute()
    assert tasks.data == [] and len(removed) > 0
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        expected = curate.deduplicate(fixture_frame(), threshold=0.5, width=3).compute()
    assert kept.id.tolist() == expected[0].id.tolist()
    pd.testing.assert_frame_equal(removed, expected[1])
    # Built for the client, computed elsewhere: Dask's P2P error said nothing of the cause.
    with pytest.raises(ValueError, match=r"build it there too"):
        curate.deduplicate(fixture_frame(), threshold=0.5, width=3).compute(scheduler="sync")


def test_a_result_built_before_any_client_computes_on_a_local_scheduler_beside_one():
    # Built where no client was, Dask picks the shuffle method when it computes: P2P, now that a
    # client exists, which failed on the local scheduler ("P2P ... failed during transfer phase").
    code = f"""
import json, logging, dask.dataframe as dd, pandas as pd, curate
from distributed import Client
logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)
docs = dd.from_pandas(pd.read_json({str(FIXTURES / "docs.jsonl")!r}, lines=True, dtype=False), npartitions=2)
result = curate.deduplicate(docs, threshold=0.8)
with Client(processes=False, n_workers=1, dashboard_address=None):
    kept, removed, _ = result.compute(scheduler="sync")
print(json.dumps(sorted(removed["id"])))
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    with dask.config.set(scheduler="sync"):
        _, expected, _ = curate.deduplicate(fixture_frame(), threshold=0.8).compute()
    assert json.loads(run.stdout.splitlines()[-1]) == sorted(expected["id"]) != []


def test_a_frame_without_ids_keeps_the_same_rows_and_names_removals_by_key():
    # Exact dedup took the id column and the key column both as `_doc`, and failed on every frame without ids.
    docs = fixture_frame()
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        expected = curate.deduplicate(docs, threshold=0.5, width=3).compute()
        kept, removed, _ = curate.deduplicate(docs[["text"]], threshold=0.5, width=3).compute()
    assert kept.index.tolist() == expected[0].index.tolist()
    assert set(removed.kind) == {"exact", "fuzzy"}
    assert removed.id.tolist() == removed._doc.tolist()
    # The same documents as by id: keys number partition and row (curate.add_doc_keys).
    by_id = curate.add_doc_keys(docs).compute().set_index("id")._doc
    assert removed.id.tolist() == by_id[expected[1].id].tolist()
    assert removed.representative.tolist() == by_id[expected[1].representative].tolist()


def test_parquet_reads_with_merged_partitions_keep_their_keys(tmp_path):
    # dask-expr merges a Parquet read's small files once later steps read fewer columns; keys
    # made from partition numbers must survive it (they used to point at lost partitions).
    frame = pd.read_json(FIXTURES / "docs.jsonl", lines=True, dtype=False).assign(extra="x" * 500)
    for i, part in enumerate(range(0, len(frame), 4)):
        frame.iloc[part : part + 4].to_parquet(tmp_path / f"part.{i}.parquet")
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        expected = curate.deduplicate(
            dd.from_pandas(frame[["id", "text"]], npartitions=3), threshold=0.5, width=3
        ).compute()[0]
        kept = curate.deduplicate(dd.read_parquet(tmp_path, columns=["id", "text"]), threshold=0.5, width=3).compute()[
            0
        ]
    assert kept.id.tolist() == expected.id.tolist() and len(kept) < len(frame)


def test_options_and_columns_are_checked_at_the_call():
    docs = fixture_frame()
    with pytest.raises(
        TypeError, match=r"unknown option thresold= \(did you mean threshold=\?\); options are mode=, config=, keep="
    ):
        curate.deduplicate(docs, thresold=0.8)
    with pytest.raises(
        TypeError, match=r"unknown option char_ngrams= \(char_ngrams in NeMo Curator is width= in curate; "
    ):
        curate.deduplicate(docs, char_ngrams=24)  # "did you mean ngram=?", the word/char choice
    with pytest.raises(
        TypeError,
        match=r"\(n_grams in datatrove is width= with ngram='word' in curate; all of datatrove's MinHash "
        r"settings: config=curate.config.load_config\('datatrove'\)\)",
    ):
        curate.deduplicate(docs, n_grams=5)
    with pytest.raises(TypeError, match=r"blocksize= configures reading or writing files"):
        curate.deduplicate(docs, blocksize="1MB")
    with pytest.raises(TypeError, match=r"identify_only= configures reading or writing files"):
        curate.deduplicate(docs, identify_only=True)  # the removed table is the API's list
    # Each says what a pipeline does instead (it said only what the option was for).
    for option, instead in [
        (
            {"backend": "gpu"},
            'backend= configures the partitions\' library, which the Python API leaves to you: give cudf partitions (dask.config.set({"dataframe.backend": "cudf"}) as the frame is made)',
        ),
        (
            {"on_error": "skip"},
            'on_error= configures reading or writing files, which the Python API leaves to you: read_documents(..., on_error="skip") rejects bad records and the result lists them',
        ),
        (
            {"identify_only": True},
            "identify_only= configures reading or writing files, which the Python API leaves to you: dask.compute(result.removed, result.duplicates) computes the tables alone",
        ),
        (
            {"n_workers": 2},
            "n_workers= configures the cluster, which the Python API leaves to you: start your own distributed.Client (LocalCluster, LocalCUDACluster) before computing",
        ),
        (
            {"output_format": "jsonl"},
            "output_format= configures reading or writing files, which the Python API leaves to you: write the frames with result.compute_with(result.kept.to_parquet(..., compute=False), ...)",
        ),
    ]:
        with pytest.raises(TypeError) as err:
            curate.deduplicate(docs, **option)
        assert str(err.value) == f"deduplicate() option {instead}"
    with pytest.raises(ValueError, match=r"text_field='body': no such column"):
        curate.deduplicate(docs, text_field="body")
    with pytest.raises(ValueError, match=r"id_field='key': no such column"):
        curate.deduplicate(docs, id_field="key")
    with pytest.raises(ValueError, match=r"keep='max:score': no column 'score'"):
        curate.deduplicate(docs, keep="max:score")
    with pytest.raises(ValueError, match=r"threshold"):
        curate.deduplicate(docs, threshold=1.5)


def test_a_skip_mode_read_rejects_what_the_cli_rejects(tmp_path):
    # Its unreadable records and an id's later occurrence were deduplicated as documents (null
    # text: exact copies of the empty one), kept, or named as representatives.
    text = "The quick brown fox jumps over the lazy dog near the river bank every single morning at dawn. " * 3
    lines = [
        {"id": "a", "text": text},
        {"id": "b", "text": text},
        '{"id": "c", "text": "broken json',
        {"id": "d", "text": 5},
        {"id": "e"},
        {"id": "a", "text": "repeated id a " * 10},
        {"id": "f", "text": text + "!"},
        {"id": "g", "text": None},
        {"id": "h", "text": ""},
    ]
    path = tmp_path / "in" / "bad.jsonl"
    path.parent.mkdir()
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    with dask.config.set(scheduler="sync"):
        dedup([str(path)], str(tmp_path / "out"), load_config(None, {"io": {"on_error": "skip"}}))
        result = curate.deduplicate(read_documents(str(path), on_error="skip"))
        kept, removed, _ = result.compute()
        rejected = result.rejected.compute()
    cli_removed = pd.read_parquet(tmp_path / "out" / "removed.parquet")
    cli_rejected = pd.read_parquet(tmp_path / "out" / "rejected")
    columns = ["id", "kind", "representative"]
    assert removed[columns].values.tolist() == cli_removed[columns].values.tolist() == [
        ["b", "exact", "a"], ["f", "fuzzy", "a"], ["h", "exact", "g"]
    ]  # fmt: skip
    assert kept.id.tolist() == ["a", "g"] and "_kind" not in kept.columns
    # g's null text stays null, as the CLI writes it back (read_documents had read it as "")
    cli_kept = [
        json.loads(line) for line in (tmp_path / "out" / "deduplicated" / "part.00000.jsonl").read_text().splitlines()
    ]
    assert kept.text.isna().tolist() == [cli["text"] is None for cli in cli_kept] == [False, True]
    assert rejected._kind.tolist() == cli_rejected.kind.tolist() == [
        "invalid-json", "wrong-type", "missing-field", "duplicate-id"
    ]  # fmt: skip
    assert rejected._line.tolist() == cli_rejected.line.tolist() == [3, 4, 5, 6]
    assert rejected._record.tolist() == cli_rejected.record.tolist()
    assert rejected._reason.iloc[-1] == "duplicate id 'a': first at _doc 0"
    # Where they are, as rejected/ and its reasons say (the API's table named no file).
    where = curate.io.locate([str(path)], rejected._doc)
    assert where == [f"bad.jsonl:{line}" for line in cli_rejected.line] and curate.io.locate([str(path)], [0]) == [
        "bad.jsonl:1"
    ]
    assert cli_rejected.source.tolist() == ["bad.jsonl"] * 4
    assert result.counts["documents"] == 9 and result.counts["rejected"] == 4 and result.counts["kept"] == 2
    cli_counts = json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]
    assert result.counts["empty"] == cli_counts["input"]["empty"] == 2  # g (null) and h ("")


def test_concatenated_skip_mode_reads_keep_their_rejected_records_rejected(tmp_path):
    # Sources of two shapes, read each with its own text field, concatenated and keyed anew (as
    # doc_divisions' error advises): the rejected rows came back as kept documents (null text,
    # invented ids), with _line/_kind riding along in kept, and no rejected count.
    text = "The quick brown fox jumps over the lazy dog near the river bank every single morning at dawn. " * 3
    news = write_jsonl(tmp_path / "news.jsonl", [{"id": "n1", "text": text}, {"id": "n2", "text": "news two " * 9}])
    with open(news, "a") as f:
        f.write('{"id": "n3", "text": "cut off\n')
    books = write_jsonl(
        tmp_path / "books.jsonl",
        [
            {"id": "b1", "content": text},
            {"id": "n2", "content": "a book " * 9},
            {"id": "b3"},
            {"id": "b4", "content": "b4 " * 9},
        ],
    )
    with dask.config.set(scheduler="sync"):
        parts = [
            read_documents([str(news)], on_error="skip"),
            read_documents([str(books)], text_field="content", on_error="skip").rename(columns={"content": "text"}),
        ]
        with pytest.raises(ValueError, match="key ranges per partition are unknown"):
            curate.deduplicate(dd.concat(parts))
        result = curate.deduplicate(dd.concat(parts).drop(columns="_doc"))
        kept, removed, _ = result.compute()
        rejected = result.rejected.compute()
    assert kept.id.tolist() == ["n1", "n2", "b4"] and not set(REJECT_COLUMNS) & set(kept.columns)
    assert removed[["id", "kind", "representative"]].values.tolist() == [["b1", "exact", "n1"]]
    assert rejected._kind.tolist() == ["invalid-json", "duplicate-id", "missing-field"]
    assert rejected._line.tolist() == [3, 2, 3]
    assert rejected._record.tolist()[0] == b'{"id": "n3", "text": "cut off'
    assert result.counts["documents"] == 7 and result.counts["rejected"] == 3 and result.counts["kept"] == 3


def test_bad_ids_and_columns_are_errors():
    text = ["the quick brown fox jumps over the lazy dog near the river bank " * 3] * 3 + ["another text"]
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "text": text, "n": [1, 2, 3, 4]})
    with dask.config.set(scheduler="sync"):
        # Repeated and null ids made removed rows name themselves, or nothing, as representative.
        with pytest.raises(
            ValueError,
            match=r"id_field='id': ids appear more than once, e.g. 'a' \(at row 0 of partition 0 and row 1 of "
            r"partition 0\); ids must be unique",
        ):
            curate.deduplicate(dd.from_pandas(frame.assign(id=["a", "a", "b", "c"]), npartitions=2)).compute()
        with pytest.raises(ValueError, match=r"id_field='id': 1 null id\(s\), e.g. at row 0 of partition 1"):
            curate.deduplicate(dd.from_pandas(frame.assign(id=["a", "b", None, "c"]), npartitions=2)).compute()
    docs = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(ValueError, match=r"text_field='n': the column holds int64, not strings"):
        curate.deduplicate(docs, text_field="n")  # failed on the workers
    with pytest.raises(ValueError, match=r"holds category, not strings \(\.astype\(str\) makes them strings\)$"):
        curate.deduplicate(docs.assign(text=docs.text.astype("category")))
    dictionary = pd.ArrowDtype(pa.dictionary(pa.int32(), pa.string()))  # dtype_backend="pyarrow" reads
    with pytest.raises(ValueError, match=r"not strings \(\.astype\(str\) makes them strings\)$"):
        curate.deduplicate(docs.assign(text=docs.text.astype(dictionary)))
    with pytest.raises(
        ValueError, match=r"^deduplicate\(\): keep='max:text' ranks documents by their text field[^\n]*$"
    ):
        curate.deduplicate(docs, keep="max:text")  # a KeyError on the workers; then pydantic's many lines
    with pytest.raises(ValueError, match=r"docs has a column '_doc' of .*: that name is curate's int64 key"):
        curate.deduplicate(docs.assign(_doc=docs.id))  # a merge error deep in exact dedup


def test_a_read_documents_frame_names_repeated_ids_by_keys_that_locate_finds(tmp_path):
    # The ids alone were named: the file and line of each occurrence could not be found.
    text = "words enough to make a document of some length here"
    records = [{"id": i, "text": f"{text} {i}"} for i in ("a", "b", "a", "c")]
    path = write_jsonl(tmp_path / "a.jsonl", records)
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError) as raised:
        curate.deduplicate(read_documents([str(path)])).compute()
    message = str(raised.value)
    keys = [int(k) for k in re.findall(r"_doc (\d+)", message)]
    assert message.startswith("id_field='id': ids appear more than once, e.g. 'a' (at _doc ") and len(keys) == 2
    assert message.endswith("; curate.io.locate(paths, keys) gives the file and line of read_documents' keys")
    assert curate.io.locate([str(path)], keys) == ["a.jsonl:1", "a.jsonl:3"]


def test_readme_example_runs(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    data = tmp_path / "data" / "bible"
    data.mkdir(parents=True)
    with (data / "part-00000.jsonl").open("w") as genesis:  # Genesis in the seven versions
        for shard in sorted(shared_corpus("bible/chapters").glob("part-*.jsonl.gz")):
            genesis.writelines(
                line for line in gzip.open(shard, "rt", encoding="utf-8") if json.loads(line)["book"] == 1
            )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = eval(re.search(r"^\{'documents'.*\}$", run.stdout, re.M).group(0))
    assert counts["documents"] == 7 * 50 and counts["kept"] + counts["removed"] == 350 and counts["fuzzy_removed"] > 0


def test_a_configuration_file_means_what_it_means_to_the_cli(tmp_path):
    # A config's mode was ignored (the signature's default "both" overrode it): fuzzy
    # duplicates were removed where `curate dedup --config` runs exact dedup only.
    (tmp_path / "exact.yaml").write_text("mode: exact\nfuzzy:\n  threshold: 0.5\n  width: 3\n")
    config = load_config(str(tmp_path / "exact.yaml"))
    with dask.config.set(scheduler="sync"):
        result = curate.deduplicate(fixture_frame(), config=config)
        _, removed, _ = result.compute()
        assert result.config.mode == "exact" and set(removed.kind) == {"exact"}
        assert curate.deduplicate(fixture_frame(), config=config, mode="both").config.mode == "both"
    with pytest.raises(TypeError, match=r"config must be a RunConfig or FuzzyConfig .*, got dict"):
        curate.deduplicate(fixture_frame(), config={"fuzzy": {"threshold": 0.7}})  # an AttributeError
    # A file shared with the CLI: what configures its files and cluster is said to go unread
    # (identify_only still returned the kept frame, without a word).
    (tmp_path / "cli.yaml").write_text("io:\n  identify_only: true\n  id_field: id\ncluster:\n  n_workers: 4\n")
    with pytest.warns(UserWarning) as caught:
        curate.deduplicate(fixture_frame(), config=load_config(str(tmp_path / "cli.yaml")))
    assert [str(w.message) for w in caught] == [
        "deduplicate(): config's io.identify_only, cluster.n_workers not read: they configure curate dedup's "
        "files and cluster, which the Python API leaves to you"
    ]
    assert caught[0].filename == __file__  # shown at the caller's line
    # The shipped config, or a `curate config show` copy, holds every key at its default: each was
    # named as not read. Only values that differ from the defaults are.
    import warnings

    from curate.config import shipped_configs

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        curate.deduplicate(fixture_frame(), config=load_config("default"))
    copy = shipped_configs()["default"].read_text().replace("rmm_pool_size: null #", "rmm_pool_size: 8GB #")
    (tmp_path / "mine.yaml").write_text(copy)
    with pytest.warns(UserWarning, match=r"^deduplicate\(\): config's cluster\.gpu\.rmm_pool_size not read: "):
        curate.deduplicate(fixture_frame(), config=load_config(str(tmp_path / "mine.yaml")))
    with pytest.warns(
        UserWarning, match=r"^fp_weight= configures fuzzy dedup, which mode='exact' does not run$"
    ) as said:
        curate.deduplicate(fixture_frame(), mode="exact", fp_weight=0.5)
    assert said[0].filename == __file__  # shown at the caller's line, whatever decorates deduplicate


@pytest.mark.parametrize("column", WORKING_COLUMNS)
def test_a_column_named_as_one_the_stages_add_is_refused(column):
    # An id column named _md5 came back as digests in removed.id (the stages' own _md5 column
    # overwrote it); one named component failed in a shuffle with Dask's KeyError.
    frame = pd.DataFrame({"id": ["a", "b"], "text": ["same words here", "same words here"], "n": [1, 2]})
    for renamed, options in [("id", {"id_field": column}), ("n", {"keep": f"max:{column}"})]:
        docs = dd.from_pandas(frame.rename(columns={renamed: column}), npartitions=1)
        setting = next(iter(options))
        with pytest.raises(
            ValueError,
            match=rf"^deduplicate\(\): {setting}='{options[setting]}': curate adds a column '{column}' while it works",
        ):
            curate.deduplicate(docs, **options)


def test_a_pandas_frame_is_refused_saying_how_to_wrap_it():
    frame = pd.DataFrame({"id": [1], "text": ["a"]})
    with pytest.raises(TypeError, match=r"^docs must be a dask DataFrame, got DataFrame \(dask.dataframe.from_pandas"):
        curate.deduplicate(frame)
    with pytest.raises(TypeError, match=r"^docs must be a dask DataFrame, got Series$"):
        curate.deduplicate(frame.text)
    docs = dd.from_pandas(frame, npartitions=1)
    assert docs.known_divisions and not curate.deduplicate(docs).kept.known_divisions  # as the docstring says


def test_a_configuration_file_leaves_the_bands_to_a_new_threshold():
    # `curate config show` writes num_bands: null; loaded, the bands chosen for its threshold
    # counted as given, and deduplicate(config=..., threshold=0.5) kept 0.8's 28 x 9.
    config = load_config("default")
    fuzzy = config.fuzzy
    assert (fuzzy.threshold, fuzzy.num_bands, fuzzy.rows_per_band) == (0.8, *optimal_bands(0.8, 260, 0.01, 0.99))
    given = curate.deduplicate(fixture_frame(), config=config, threshold=0.5).config.fuzzy
    assert given == curate.deduplicate(fixture_frame(), threshold=0.5).config.fuzzy
    assert (given.num_bands, given.rows_per_band, given.num_perm) == (*optimal_bands(0.5, 260, 0.01, 0.99), 260)
    # bands given in the file stay what they are
    config = load_config(None, {"fuzzy": {"num_bands": 10, "rows_per_band": 5}})
    given = curate.deduplicate(fixture_frame(), config=config, threshold=0.5).config.fuzzy
    assert (given.num_bands, given.rows_per_band, given.num_perm) == (10, 5, 50)


def test_columns_of_python_objects_ride_along_and_are_checked(tmp_path):
    # Keying a frame (add_doc_keys) went through Dask's string conversion: a list column came back
    # as its text ("['x']") in kept, and an object text or keep column of numbers and strings
    # was read as text rather than refused.
    text = ["the same words in all of these records here"] * 3
    pq.write_table(
        pa.table({"id": ["a", "b", "c"], "text": text, "topics": [["x"], ["p", "q"], []]}), tmp_path / "a.parquet"
    )
    with dask.config.set(scheduler="sync"):
        docs = dd.read_parquet(tmp_path / "a.parquet")
        kept, _, _ = curate.deduplicate(docs).compute()
        assert [list(v) for v in kept.topics] == [["x"]]
    frame = pd.DataFrame({"id": ["a", "b", "c"], "text": text, "score": [1000, "999", 5]}).astype(object)
    with dask.config.set({"scheduler": "sync", "dataframe.convert-string": False}):
        docs = dd.from_pandas(frame, npartitions=1)
        assert curate.deduplicate(docs).compute()[0].id.tolist() == ["a"]  # object text of strings
        with pytest.raises(
            ValueError, match=r"keep='max:score': column 'score' holds int, str values, which do not order"
        ):
            curate.deduplicate(docs, keep="max:score").compute()  # "999" was kept
        # bytes order (as Arrow's binary does): they were refused as values that do not order
        raw = dd.from_pandas(frame.assign(raw=[b"b", b"c", b"a"]).astype(object), npartitions=1)
        assert curate.deduplicate(raw, keep="min:raw").compute()[0].id.tolist() == ["c"]
        with pytest.raises(
            ValueError, match=r"text column 'text' holds int 12345 \(row 0 of partition 0\): texts must be strings"
        ):
            numbers = frame.assign(text=[12345, "12345", b"12345"]).astype(object)  # all three were "12345"
            curate.deduplicate(dd.from_pandas(numbers, npartitions=1)).compute()


def test_a_keep_column_of_several_types_is_named_on_the_cluster_too(client):
    # P2P shuffles convert partitions to Arrow before the keep policy sees them: a column of an
    # int and a str stopped as "P2P ... failed during transfer phase" (one partition) or "...
    # unpack phase" (an int partition and a str one), naming no column.
    text = "the same words in all of these records here"
    within = pd.DataFrame({"id": list("abc"), "text": [text] * 3, "score": [1000, "999", 5]})
    across = pd.DataFrame({"id": list("abcd"), "text": [text] * 4, "score": [1, 2, "z", "y"]})
    for frame, npartitions in ((within, 1), (across, 2)):
        with dask.config.set({"dataframe.convert-string": False}):
            docs = dd.from_pandas(frame.astype(object), npartitions=npartitions)
            with pytest.raises(
                ValueError, match=r"keep='max:score': column 'score' holds values of several types, which do not order"
            ):
                curate.deduplicate(docs, keep="max:score").compute()
    # A column of lists was said to hold "ndarray values": what the shuffle's Arrow round trip made of them.
    lists = within.assign(score=[["x"], ["p", "q"], []])
    with dask.config.set({"dataframe.convert-string": False}):
        docs = dd.from_pandas(lists.astype(object), npartitions=1)
        with pytest.raises(ValueError, match=r"keep='min:score': column 'score' holds list values, which do not order"):
            curate.deduplicate(docs, keep="min:score").compute()


def ids_of_two_types() -> dict[str, pd.DataFrame]:
    """Object id columns a P2P shuffle cannot convert to Arrow, and the message each gets."""
    text = [f"words enough to make a document of some length here {i}" for i in range(6)]
    text[3] = text[0]
    frame = pd.DataFrame({"text": text})
    return {
        r"holds int and str values \(row 1 of partition 0: 'b'\); ids must be of one type \(\.astype\('string'\) "
        r"makes them strings\)": frame.assign(id=[0, "b", 2, 3, 4, 5]),
        r"holds int and str values \(row 0 of partition 1: 'd', after int 0 at row 0 of partition 0\); "
        r"ids must be of one type \(\.astype\('string'\) makes them strings\)": frame.assign(
            id=[0, 1, 2, "d", "e", "f"]
        ),
        r"holds tuple values \(row 0 of partition [01]: \([03], 'a'\)\); ids must be strings, numbers or other "
        r"scalars, all of one type": frame.assign(id=[(i, "a") for i in range(6)]),
    }


@pytest.mark.parametrize("scheduler", ["client", "sync"])
def test_ids_of_several_types_are_refused_on_every_scheduler(scheduler, request):
    # A cluster's P2P shuffles convert the ids to Arrow: an object id column of ints and strings
    # (in one partition or across two) or of tuples stopped as "P2P ... failed during transfer
    # phase" (or "unpack phase"), naming no column, where the sync scheduler deduplicated them.
    if scheduler == "client":
        request.getfixturevalue("client")
    with dask.config.set({"dataframe.convert-string": False, **({"scheduler": "sync"} if scheduler == "sync" else {})}):
        for message, frame in ids_of_two_types().items():
            docs = dd.from_pandas(frame.astype({"id": object}), npartitions=2, sort=False)
            with pytest.raises(ValueError, match=rf"^id column 'id' {message}$"):
                curate.deduplicate(docs).compute()


def test_messages_quote_a_short_part_of_a_long_value():
    # A text of a megabyte of bytes (or a list of 10,000 strings) was quoted whole, so that
    # "texts must be strings" came after a megabyte, and no row was named; a repeated long id too.
    text = [f"words enough to make a document of some length here {i}" for i in range(6)]
    frame = pd.DataFrame({"id": list("abcdef"), "text": text}).astype(object)
    with dask.config.set({"scheduler": "sync", "dataframe.convert-string": False}):
        for value, shown in ((b"x" * 1_000_000, "b'x"), (["x" * 100] * 10_000, "['x")):
            frame.at[3, "text"] = value
            with pytest.raises(ValueError) as raised:
                curate.deduplicate(dd.from_pandas(frame, npartitions=2, sort=False)).compute()
            message = str(raised.value)
            assert len(message) < 200 and message.endswith("… (row 0 of partition 1): texts must be strings")
            assert message.startswith(f"text column 'text' holds {type(value).__name__} {shown}"), message
        frame = frame.assign(text=text, id=["y" * 100_000] * 2 + list("cdef"))
        with pytest.raises(ValueError, match=r"^id_field='id': ids appear more than once, e.g. 'y{40}'… \(at row 0"):
            curate.deduplicate(dd.from_pandas(frame, npartitions=2, sort=False)).compute()
        # An id of 39 characters is quoted whole: its closing quote was cut, and the id read as cut.
        frame = frame.assign(id=["z" * 39] * 2 + list("cdef"))
        with pytest.raises(ValueError, match=r"e.g. 'z{39}' \(at row 0"):
            curate.deduplicate(dd.from_pandas(frame, npartitions=2, sort=False)).compute()


def test_a_result_whose_client_was_closed_says_so():
    # It said "to compute it on a local scheduler, build it there too", where none was asked for.
    code = f"""
import logging, dask.dataframe as dd, pandas as pd, curate
from distributed import Client
logging.getLogger("distributed").setLevel(logging.CRITICAL)
docs = dd.from_pandas(pd.read_json({str(FIXTURES / "docs.jsonl")!r}, lines=True, dtype=False), npartitions=2)
with Client(processes=False, n_workers=1, dashboard_address=None):
    result = curate.deduplicate(docs, threshold=0.8)
try:
    result.compute()
except ValueError as err:
    print(err)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines()[-1].startswith(
        "this result was built for a distributed client, which is now closed"
    ), run.stdout


def test_ids_keys_and_frames_that_lost_their_keys():
    frame = fixture_frame(npartitions=2)
    with dask.config.set(scheduler="sync"):
        # id_field=None: name documents by their keys, whatever the id column holds (was refused).
        repeated = frame.assign(id="same")
        kept, removed, _ = curate.deduplicate(repeated, id_field=None, threshold=0.5, width=3).compute()
        _, expected, _ = curate.deduplicate(frame.drop(columns="id"), threshold=0.5, width=3).compute()
        assert removed.id.tolist() == expected.id.tolist() and len(removed) > 0
        with pytest.raises(ValueError, match=r"^id_field='text' is the text column"):
            curate.deduplicate(frame, id_field="text")  # a KeyError
        # A _doc column of the user's own: a "document numbers must be in [0, 4)" deep in a stage.
        own = frame.assign(_doc=frame.index.to_series().map(lambda i: 7 - i, meta=("_doc", "int64")))
        with pytest.raises(
            ValueError, match=r"docs' '_doc' column is not curate's key \(in partition \d, .*drop the column"
        ):
            curate.deduplicate(own, threshold=0.5, width=3).compute()
    docs = read_documents(str(FIXTURES / "docs.jsonl"))
    with pytest.raises(
        ValueError, match=r"concatenations do not\), or drop its '_doc' column \(docs.drop\(columns='_doc'\)\)"
    ):
        curate.deduplicate(dd.concat([docs, docs]))
    from curate import AccountingError  # named in Deduplication.compute's Raises

    assert issubclass(AccountingError, Exception)


THREADS = """
import sys
from concurrent.futures import ThreadPoolExecutor
import curate
from distributed import Client, LocalCluster

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1) as cluster, Client(cluster):
        def run(path):
            return len(curate.deduplicate(curate.read_documents(path), threshold=0.5, width=3).compute()[1])
        with ThreadPoolExecutor(2) as pool:
            print(list(pool.map(run, sys.argv[1:])), flush=True)
"""


def test_two_threads_deduplicate_at_once(tmp_path):
    # On Python 3.11 two threads of a pipeline computing results at once waited for each other
    # for ever (Dask's metas behind cached_property's one lock per property).
    (tmp_path / "run.py").write_text(THREADS)
    other = write_jsonl(
        tmp_path / "b.jsonl", [json.loads(line) for line in (FIXTURES / "docs.jsonl").read_text().splitlines()[:6]]
    )
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run.py"), str(FIXTURES / "docs.jsonl"), str(other)],
        capture_output=True, text=True, timeout=150, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    with dask.config.set(scheduler="sync"):
        _, removed, _ = curate.deduplicate(read_documents(str(other)), threshold=0.5, width=3).compute()
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == f"[6, {len(removed)}]", done.stderr[-3000:]


@pytest.mark.parametrize("ordered", [False, True])
def test_a_categorical_keep_column_orders_by_the_frames_categories(sync, ordered):
    # Partition 0 listed the categories otherwise than the frame: the shuffled partition that was
    # sorted joined its pieces' categories as they came (in arrival order, or as plain strings:
    # max:tier kept "gold", last alphabetically, over the frame's greatest, "bronze"), so which
    # document was kept changed from run to run; ordered, pandas refused to join them.
    frame = pd.DataFrame(
        {
            "id": ["a0", "a1", "b0", "b1"],
            "text": ["same text here", "other one", "same text here", "other two"],
            "tier": ["bronze", "gold", "gold", "bronze"],
        }
    )
    frame_dtype = pd.CategoricalDtype(["gold", "bronze"], ordered=ordered)
    other_order = pd.CategoricalDtype(["bronze", "gold"], ordered=ordered)

    def categorised(part, odd):  # the partition whose first id is odd lists the categories otherwise
        return part.assign(tier=part.tier.astype(other_order if part.id.iloc[0] == odd else frame_dtype))

    meta = frame.iloc[:0].assign(tier=pd.Series([], dtype=frame_dtype))
    for odd in ("a0", "b0"):  # which pieces arrive first depends on the scheduler: both layouts
        docs = dd.from_pandas(frame, npartitions=2, sort=False).map_partitions(categorised, odd, meta=meta)
        for keep, kept in [("max:tier", "a0"), ("min:tier", "b0")]:
            # (the removals alone: kept holds both partitions as given, which pandas cannot join if ordered)
            removed = curate.deduplicate(docs, keep=keep, mode="exact").removed.compute()
            assert removed[["id", "representative"]].values.tolist() == [[{"b0": "a0", "a0": "b0"}[kept], kept]]
    # A value outside the frame's categories, and categories Dask does not know, are named.
    stray = docs.assign(tier=docs.tier.cat.add_categories("iron").mask(docs.id == "b1", "iron"))
    stray = stray.map_partitions(lambda part: part, meta=meta)
    with pytest.raises(ValueError, match=r"keep='max:tier': column 'tier' holds 'iron' in partition 1, not among"):
        curate.deduplicate(stray, keep="max:tier", mode="exact").removed.compute()
    with pytest.raises(ValueError, match=r"categories unknown to Dask, which order it; docs\['tier'\].cat.as_known()"):
        curate.deduplicate(docs.assign(tier=docs.tier.cat.as_unknown()), keep="max:tier")


def test_groups_take_the_verified_edges_similarities_instead_of_computing_them_again():
    # The split of components into groups reads a member's similarity with its component's label
    # (here the first document) from their verified edge: three unrelated texts whose edges say
    # 0.9 and 0.85 form one group at those values. Without the edges, or where the label is not
    # its group's first row (keep longest), the split compares the texts: three singletons.
    from curate.config import FuzzyConfig
    from curate.dedup.fuzzy import FuzzyDedup

    texts = ["alpha beta gamma", "delta epsilon", "zeta eta theta iota"]
    docs = curate.add_doc_keys(dd.from_pandas(pd.DataFrame({"id": [1, 2, 3], "text": texts}), npartitions=2))
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):  # (a client may exist)
        keys = docs["_doc"].compute().tolist()
        components = dd.from_pandas(pd.DataFrame({"node": keys, "component": [keys[0]] * 3}), npartitions=1)
        edges = pd.DataFrame({"u": [keys[0]] * 2, "v": keys[1:], "jaccard": [0.9, 0.85]})
        edges = dd.from_pandas(edges, npartitions=2)
        fuzzy = FuzzyDedup(FuzzyConfig(threshold=0.8, width=3))
        given = fuzzy.groups(components, docs, edges).compute().sort_values("_doc")
        computed = fuzzy.groups(components, docs).compute()
        longest = FuzzyDedup(FuzzyConfig(threshold=0.8, width=3), keep="longest").groups(components, docs, edges)
        longest = longest.compute()
    assert given["_rep"].tolist() == [keys[0]] * 3 and given["_jaccard"].tolist() == [1.0, 0.9, 0.85]
    assert computed.empty and longest.empty
