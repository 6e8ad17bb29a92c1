"""Candidate recall that does not depend on which document anchors an LSH bucket (issue 16, item 6).

A bucket links its members to its smallest document (the anchor). When the anchor is not
similar to them, verification drops those edges, and two members similar to each other were
never compared: they both stayed in the output, or not, depending on the input order. The
second round (:func:`curate.dedup.edges.member_pairs`) compares them.
"""

import importlib.util
import json
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from curate.config import load_config
from curate.dedup.components import components_local
from curate.dedup.edges import buckets_over_cap, member_pairs
from curate.dedup.keys import add_doc_keys, select
from curate.dedup.minhash import lsh_buckets
from curate.dedup.verify import score_edges
from curate.pipeline import dedup
from tests import reference
from tests.conftest import FIXTURES, write_jsonl
from tests.lsh_truth import bucket_sharing_duplicates, expected_components, run_components

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def task_shuffles():
    # These tests compute on the synchronous scheduler; while the session's distributed client
    # exists (another test file made it) Dask would pick P2P shuffles, which need workers.
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        yield


def templated_documents(**kwargs) -> list[dict]:
    spec = importlib.util.spec_from_file_location(
        "make_templated_corpus", ROOT / "scripts" / "make_templated_corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.templated_documents(**kwargs)


def buckets_of(texts: list[str], config) -> list[set[int]]:
    """Each text's set of LSH bucket ids."""
    frame = pd.DataFrame({"_doc": np.arange(len(texts), dtype="int64"), "text": pd.Series(texts, dtype="str")})
    with dask.config.set(scheduler="sync"):
        buckets = lsh_buckets(dd.from_pandas(frame, npartitions=1), "text", config).compute()
    return [set(buckets[buckets._doc == i]._bucket) for i in range(len(texts))]


def star_rows(buckets: dict[int, list[int]]) -> pd.DataFrame:
    rows = [(b, min(docs), d, len(docs)) for b, docs in buckets.items() for d in sorted(docs)[1:]]
    return pd.DataFrame(rows, columns=["_bucket", "u", "v", "_members"]).astype({"_bucket": "uint64"})


def pairs_of(frame: dd.DataFrame) -> list[tuple[int, int]]:
    with dask.config.set(scheduler="sync"):
        pairs = frame.compute()
    assert (pairs.u < pairs.v).all()
    return sorted(zip(pairs.u.tolist(), pairs.v.tolist()))


def test_member_pairs_of_buckets_where_a_member_failed():
    # At t = 0.8. Bucket 1: anchor 0; 1 and 3 fail against it, 2, 4, 5 pass. Bucket 2: anchor 0
    # again, members 3 and 4 (their pair also comes from bucket 1). Bucket 3: anchor 10, all
    # pass. Bucket 4: anchor 20, member 22 fails; 21-22 is already the star edge of bucket 5.
    # Bucket 6: a near-duplicate cluster (30, 31, 32) and an unrelated member, 33. Buckets 7
    # and 8 connect 1 to 2 through 50, so 1 is in the component of 0, 2, 4 and 5.
    buckets = {
        1: [0, 1, 2, 3, 4, 5],
        2: [0, 3, 4],
        3: [10, 11, 12],
        4: [20, 21, 22],
        5: [21, 22],
        6: [30, 31, 32, 33],
        7: [1, 50],
        8: [2, 50],
    }
    similarity = {(0, 1): 0.75, (0, 2): 0.85, (0, 3): 0.7, (0, 4): 0.9, (0, 5): 0.95, (10, 11): 0.9, (10, 12): 0.9,
                  (20, 21): 0.9, (20, 22): 0.7, (21, 22): 0.3, (30, 31): 0.95, (30, 32): 0.96, (30, 33): 0.3,
                  (1, 50): 0.9, (2, 50): 0.9}  # fmt: skip
    scored = pd.DataFrame([(u, v, j) for (u, v), j in similarity.items()], columns=["u", "v", "jaccard"])
    passed = scored[scored.jaccard >= 0.8]
    node, component = components_local(passed.u.to_numpy(), passed.v.to_numpy())
    components = dd.from_pandas(pd.DataFrame({"node": node, "component": component}), npartitions=2)
    stars, scored = dd.from_pandas(star_rows(buckets), npartitions=2), dd.from_pandas(scored, npartitions=2)
    # F x F and F x P of bucket 1, once, less 1-2, 1-4, 1-5 (already in one component) and 3-5:
    # |J(0, 3) - J(0, 5)| = 0.25 > 1 - 0.8, so J(3, 5) < 0.8 (Jaccard distance is a metric);
    # 3-4 stays, at exactly 0.2. Bucket 6: 33 is 0.65 away from the others' similarity to 30.
    assert pairs_of(member_pairs(stars, scored, components, 0.8, 100)) == [(1, 3), (2, 3), (3, 4)]
    # In as many partitions as the verified edges: the concatenations it shuffles added theirs
    # up (2 + 2 star rows and edges, then 4 + 2 pairs and edges: 6), and the second round's
    # stages ran that many tasks.
    assert member_pairs(stars, scored, components, 0.8, 100).npartitions == scored.npartitions == 2
    # Bucket 1 has 7 such pairs: over a cap of 6 its smallest failed member (1) is its one extra
    # anchor (6 // 4 = 1), so 2-3 is not compared; bucket 2 still gives 3-4.
    assert pairs_of(member_pairs(stars, scored, components, 0.8, 6)) == [(1, 3), (3, 4)]
    with dask.config.set(scheduler="sync"):
        assert [buckets_over_cap(stars, scored, components, 0.8, cap).compute() for cap in (6, 7)] == [1, 0]
    with pytest.raises(ValueError, match="max_pairs must be >= 1"):
        member_pairs(stars, scored, components, 0.8, 0)


def test_pair_behind_a_dissimilar_anchor_is_found(sync, tmp_path):
    records = [json.loads(line) for line in (FIXTURES / "anchor_trio.jsonl").read_text().splitlines()]
    a, b, c = (r["text"] for r in records)
    config = load_config()
    # The case: b and c are near duplicates, a is within 0.8 of neither, and a is in
    # every bucket that b and c share, before them: the anchor of each.
    assert reference.jaccard(b, c, 24) >= 0.8 > max(reference.jaccard(a, b, 24), reference.jaccard(a, c, 24))
    in_a, in_b, in_c = buckets_of([a, b, c], config.fuzzy)
    assert in_b & in_c and in_b & in_c <= in_a
    for order in ([0, 1, 2], [1, 2, 0]):  # a first (lost before), b first (found before)
        path = write_jsonl(tmp_path / "trio.jsonl", [records[i] for i in order])
        summary = dedup([str(path)], str(tmp_path / "out"), config, overwrite=True)
        removed = pd.read_parquet(tmp_path / "out" / "removed.parquet")
        assert removed[["id", "kind", "representative"]].to_dict("records") == [
            {"id": "c", "kind": "fuzzy", "representative": "b"}
        ]
        assert summary["counts"]["fuzzy"]["member_pairs"] == (1 if order[0] == 0 else 0)


def test_input_order_changes_no_component_and_no_kept_pair_shares_a_bucket(sync, tmp_path):
    records = templated_documents(docs=200, pairs=10, seed=1)
    config = load_config()
    texts, ids = [r["text"] for r in records], [r["id"] for r in records]
    expected = {frozenset(ids[i] for i in group) for group in expected_components(texts, config.fuzzy)}
    duplicates = bucket_sharing_duplicates(texts, config.fuzzy)
    # The corpus holds the case: a true pair each of whose shared buckets has a
    # smaller document that is no duplicate of one of the two (a failing anchor).
    buckets, hidden = buckets_of(texts, config.fuzzy), 0
    similar = set(zip(duplicates.left, duplicates.right))
    for left, right in zip(duplicates.left, duplicates.right):
        anchors = [
            min(i for i in range(len(texts)) if bucket in buckets[i]) for bucket in buckets[left] & buckets[right]
        ]
        hidden += all(a not in (left, right) and not {(a, left), (a, right)} <= similar for a in anchors)
    assert hidden >= 2
    for name, order in [
        ("given", np.arange(len(records))),
        ("permuted", np.random.default_rng(5).permutation(len(records))),
    ]:
        out = tmp_path / name
        path = write_jsonl(tmp_path / f"{name}.jsonl", [records[i] for i in order])
        summary = dedup([str(path)], str(out), config, keep_stages=True)  # run_components reads them
        assert run_components(out) == expected
        removed = set(pd.read_parquet(out / "removed.parquet").id)
        kept_pairs = [
            (ids[i], ids[j])
            for i, j in zip(duplicates.left, duplicates.right)
            if ids[i] not in removed and ids[j] not in removed
        ]
        assert kept_pairs == []
        assert summary["counts"]["fuzzy"]["member_pairs"] > 0 and summary["counts"]["fuzzy"]["buckets_over_cap"] == 0


def test_each_edge_partition_asks_for_a_document_once(monkeypatch):
    # Verification moves each text to the edge partitions that compare it. The frame that asks
    # for them had a row per edge end: a star names its anchor once per member, and a corpus of
    # one template (5.9 million member pairs among 10,000 documents) shuffled 11.8 million rows
    # to select 10,000 texts (2.2 GB in a worker of the Python API's own cluster).
    texts = [r["text"] for r in templated_documents(docs=60, pairs=5, seed=2)]
    docs = add_doc_keys(dd.from_pandas(pd.DataFrame({"text": pd.Series(texts, dtype="str")}), npartitions=2))
    keys = [i for p in (0, 1) for i in (p << 40) + np.arange(30)]
    star = [(keys[0], k) for k in keys[1:]]  # an anchor and every other document
    clique = [(keys[a], keys[b]) for a in range(30, 50) for b in range(a + 1, 50)]
    edges = dd.from_pandas(pd.DataFrame(star + clique, columns=["u", "v"]), npartitions=3)
    asked = []

    def spy(docs, keys, **options):
        asked.append(keys)
        return select(docs, keys, **options)

    monkeypatch.setattr("curate.dedup.verify.select", spy)
    config = load_config().fuzzy
    with dask.config.set(scheduler="sync"):
        scored = score_edges(edges, docs, "text", config).compute()
        wanted = asked[0].compute()
    # One row per document and edge partition it appears in, from each end at most.
    assert set(wanted._doc) == set(keys) and wanted.groupby(["_doc", "_part"]).size().max() <= 2
    expected = {
        (u, v): reference.jaccard(texts[keys.index(u)], texts[keys.index(v)], config.width) for u, v in star + clique
    }
    assert dict(zip(zip(scored.u, scored.v), scored.jaccard)) == pytest.approx(expected)


@pytest.mark.parametrize("base", [0, 2**60])  # _doc keys of input file 2**20 on: past 2**53
def test_members_of_different_components_are_compared_whatever_their_keys(base):
    # Bucket 1: anchor 0; members 1, 2 and 5 fail against it. 1 is in a component with 3, 2 with
    # 4, 5 in none. The left merge that gives each member its component made the labels float64
    # (5's is missing: NaN), which cannot tell 2**60 + 1 from 2**60 + 2: "already connected".
    buckets = {1: [base, base + 1, base + 2, base + 5], 2: [base + 1, base + 3], 3: [base + 2, base + 4]}
    similarity = {(0, 1): 0.5, (0, 2): 0.5, (0, 5): 0.5, (1, 3): 0.9, (2, 4): 0.9}
    scored = pd.DataFrame([(base + u, base + v, j) for (u, v), j in similarity.items()], columns=["u", "v", "jaccard"])
    passed = scored[scored.jaccard >= 0.8]
    node, component = components_local(passed.u.to_numpy(), passed.v.to_numpy())
    assert len(set(component)) == 2
    components = dd.from_pandas(pd.DataFrame({"node": node, "component": component}), npartitions=1)
    stars, scored = dd.from_pandas(star_rows(buckets), npartitions=1), dd.from_pandas(scored, npartitions=1)
    expected = [(base + 1, base + 2), (base + 1, base + 5), (base + 2, base + 5)]
    assert pairs_of(member_pairs(stars, scored, components, 0.8, 100)) == expected
