import dask
import dask.dataframe as dd
import pandas as pd
import pyarrow as pa
import pytest

import curate
from curate.dedup import ExactDedup, FuzzyDedup, KeepPolicy
from curate.io import read_documents
from tests.conftest import FIXTURES, write_jsonl


@pytest.fixture(autouse=True)
def task_shuffle():
    # These compute with the sync scheduler; with a distributed client alive (the session
    # fixture, once another test file used it) Dask would pick P2P shuffles, which need workers.
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        yield


def test_digest_collision_never_merges_different_texts(monkeypatch):
    # Every text gets the same "digest": only byte-equal texts may still be grouped.
    monkeypatch.setattr("curate.dedup.exact.md5_hex", lambda text: pd.Series("0" * 32, index=text.index, dtype="str"))
    docs = read_documents(str(FIXTURES / "docs.jsonl"))
    groups = ExactDedup()(docs).compute(scheduler="sync").sort_values("_doc")
    assert dict(zip(groups._id, groups._rep_id)) == {"a1": "a1", "a3": "a1", "a12": "a1", "a6": "a6", "a8": "a6"}


def test_md5_and_length_match_but_sha256_differs(monkeypatch, tmp_path):
    # Same md5 and same byte length (a1's text, reversed): the SHA-256 of the bytes tells them apart.
    monkeypatch.setattr("curate.dedup.exact.md5_hex", lambda text: pd.Series("0" * 32, index=text.index, dtype="str"))
    text = "the same bytes in another order"
    records = [{"id": "x", "text": text}, {"id": "y", "text": text[::-1]}, {"id": "z", "text": text}]
    docs = read_documents(str(write_jsonl(tmp_path / "d.jsonl", records)))
    groups = ExactDedup(keep=KeepPolicy("longest"))(docs).compute(scheduler="sync")
    assert dict(zip(groups._id, groups._rep_id)) == {"x": "x", "z": "x"}


@pytest.mark.parametrize("rule", ["max", "min"])
def test_a_nan_keep_value_ranks_last_as_a_null_does(rule):
    # An Arrow float column (the CPU read of Parquet) sorted NaN above every number and apart
    # from nulls; the host copy of a cuDF column is numpy float64, NaN for both: a GPU run kept
    # another representative.
    scores = pa.array([float("nan"), 1.0, None, 2.0])
    part = pd.DataFrame(
        {"group": [7] * 4, "score": pd.array(scores, dtype=pd.ArrowDtype(scores.type)), "_doc": range(4)}
    )
    keep = KeepPolicy(rule, "score")
    on_cpu = keep.sort(part, ["group"])["_doc"].tolist()
    on_gpu = keep.sort(part.assign(score=scores.to_numpy(zero_copy_only=False)), ["group"])["_doc"].tolist()
    assert on_cpu == on_gpu == ([3, 1, 0, 2] if rule == "max" else [1, 3, 0, 2])


def test_keep_column_may_be_the_id_column():
    docs = read_documents(str(FIXTURES / "docs.jsonl"))
    groups = ExactDedup(keep=KeepPolicy("max", "id"))(docs).compute(scheduler="sync")
    # string ids: "a3" > "a12" > "a1"
    assert dict(zip(groups._id, groups._rep_id)) == {"a1": "a3", "a3": "a3", "a12": "a3", "a6": "a8", "a8": "a8"}
    # The policy's spec, as deduplicate() takes it: "max:id" failed with "'str' object has no attribute 'columns'".
    spelled = ExactDedup(keep="max:id")(docs).compute(scheduler="sync")
    assert spelled.equals(groups) and FuzzyDedup(keep="longest").keep == KeepPolicy("longest")


def test_fuzzy_dedup_given_a_whole_config_says_which_part():
    # A RunConfig (as load_config gives) failed in the first stage: no attribute 'num_hashes'.
    from curate.config import load_config

    with pytest.raises(TypeError, match=r"^FuzzyDedup takes a FuzzyConfig, got RunConfig \(a RunConfig: pass its "):
        FuzzyDedup(load_config(None))
    assert FuzzyDedup(load_config(None).fuzzy).config.threshold == 0.8
    with pytest.raises(TypeError, match=r"^keep must be a KeepPolicy or a string such as 'longest'"):
        ExactDedup(keep=None)


@pytest.mark.parametrize("stage", [ExactDedup(), FuzzyDedup()])
def test_a_stage_names_the_keys_a_frame_lacks(stage):
    # A frame without curate's keys failed with pandas' KeyError "['_doc'] not in index".
    frame = dd.from_pandas(pd.DataFrame({"id": ["a"], "text": ["some words"]}), npartitions=1)
    with pytest.raises(
        ValueError, match=r"^docs has no column '_doc' \(columns: \['id', 'text'\]\); '_doc' comes from"
    ):
        stage(frame)
    assert len(stage(curate.add_doc_keys(frame)).compute(scheduler="sync")) == 0


def _shuffled_bytes(client) -> int:
    metrics = client.run_on_scheduler(lambda dask_scheduler: dict(dask_scheduler.cumulative_worker_metrics))
    return int(metrics.get(("p2p", "foreground", "shards", "bytes"), 0))


def test_no_text_is_shuffled(client, tmp_path):
    # 300 documents of 20 kB, a third of them copies: digests, lengths, keys and ids are
    # shuffled, some 240 bytes a document in P2P shards (1% of these 20 kB texts); no text is.
    import random

    rng = random.Random(0)
    texts = ["".join(rng.choice("abcdefgh ") for _ in range(20_000)) for _ in range(200)]
    records = [{"id": f"d{i}", "text": texts[i % 200]} for i in range(300)]
    docs = read_documents(str(write_jsonl(tmp_path / "docs.jsonl", records)), blocksize="1MB")
    text_bytes = sum(len(r["text"]) for r in records)
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        before = _shuffled_bytes(client)
        groups = ExactDedup().run(docs).compute()
        shuffled = _shuffled_bytes(client) - before
    assert sorted(groups._doc) == sorted(docs._doc.compute()[[i % 200 < 100 for i in range(300)]])
    assert len(set(groups._rep)) == 100
    # Before, the copies' texts (4 MB, two thirds of the corpus) were shuffled to be compared.
    assert shuffled < text_bytes / 50
