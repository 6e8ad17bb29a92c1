"""Document keys and the key-range joins of :mod:`curate.dedup.keys`, against pandas."""

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask.dataframe.dispatch import concat_dispatch

from curate.dedup.keys import DOC, add_doc_keys, doc_divisions, drop, fixed_partitions, in_order, select
from curate.dedup.resolve import resolve
from curate.io import read_documents
from tests.conftest import write_jsonl


@pytest.fixture(autouse=True)
def sync_tasks():
    # Small frames: the synchronous scheduler, with task shuffles (P2P needs workers).
    with dask.config.set({"scheduler": "sync", "dataframe.shuffle.method": "tasks"}):
        yield


def frame_of(rows: int, npartitions: int) -> dd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"text": [f"doc {i}" for i in range(rows)], "score": rng.random(rows)}, index=rng.permutation(rows) + 100
    )
    return dd.from_pandas(frame, npartitions=npartitions, sort=False)


def test_read_documents_divisions_hold_each_partitions_keys(tmp_path):
    # An uncompressed file split into byte ranges: each range's keys (byte offsets of its lines)
    # must lie in its division, or joins by key range would look in the wrong partition.
    path = write_jsonl(tmp_path / "a.jsonl", [{"id": i, "text": "x" * (i % 37)} for i in range(3000)])
    write_jsonl(tmp_path / "b.jsonl", [{"id": 5000 + i, "text": "y"} for i in range(10)])
    docs = read_documents([str(path), str(tmp_path / "b.jsonl")], blocksize=4096)
    assert docs.npartitions > 10 and docs.known_divisions
    divisions = docs.divisions
    for i, part in enumerate(docs.to_delayed()):
        keys = part.compute()[DOC]
        last = i == docs.npartitions - 1
        assert keys.is_monotonic_increasing and (keys >= divisions[i]).all()
        assert (keys <= divisions[i + 1]).all() if last else (keys < divisions[i + 1]).all()
    assert len(docs.compute()) == 3010


def test_add_doc_keys_numbers_partitions_and_rows():
    docs = add_doc_keys(frame_of(10, 3))
    assert docs.divisions == (0, 1 << 40, 2 << 40, (3 << 40) - 1)
    keys = docs[DOC].compute()
    sizes = frame_of(10, 3).map_partitions(len).compute().tolist()
    expected = [(p << 40) + r for p, size in enumerate(sizes) for r in range(size)]
    assert keys.tolist() == expected and docs.index.compute().tolist() == expected
    assert list(docs.columns) == [DOC, "text", "score"]
    with pytest.raises(ValueError, match="already has a '_doc' column"):
        add_doc_keys(docs)


def test_doc_divisions_refuses_frames_without_key_ranges():
    with pytest.raises(ValueError, match="_doc"):
        doc_divisions(frame_of(10, 2))
    shuffled = add_doc_keys(frame_of(10, 2)).shuffle("text")
    with pytest.raises(ValueError, match="divisions"):
        doc_divisions(shuffled)


@pytest.mark.parametrize("key_partitions", [1, 4])
def test_select_drop_and_in_order_equal_pandas(key_partitions):
    docs = add_doc_keys(frame_of(200, 7))
    every = docs.compute()
    rng = np.random.default_rng(1)
    picked = rng.choice(every[DOC].to_numpy(), 60, replace=True)  # repeats included
    keys = pd.DataFrame({DOC: picked, "tag": np.arange(60)})
    table = dd.from_pandas(keys, npartitions=key_partitions, sort=False)

    selected = select(docs, table).compute()
    assert selected[DOC].tolist() == [k for k in every[DOC] if k in set(picked)]
    with_first = select(docs, table, columns=("tag",)).compute()
    first_tag = keys.drop_duplicates(DOC).set_index(DOC).tag
    assert with_first[DOC].tolist() == selected[DOC].tolist()
    assert with_first.tag.tolist() == first_tag.loc[with_first[DOC]].tolist()
    every_row = select(docs, table, columns=("tag",), repeats=True).compute()
    assert sorted(zip(every_row[DOC], every_row.tag)) == sorted(zip(keys[DOC], keys.tag))
    # A document and tag asked for many times (an anchor's text, once per edge) comes once.
    asked = dd.from_pandas(pd.concat([keys] * 5), npartitions=key_partitions, sort=False)
    once = select(docs, asked, columns=("tag",), repeats=True).compute()
    assert sorted(zip(once[DOC], once.tag)) == sorted(zip(keys[DOC], keys.tag))

    kept = drop(docs, table)
    assert kept.npartitions == docs.npartitions and kept.divisions == docs.divisions
    pd.testing.assert_frame_equal(kept.compute(), every[~every[DOC].isin(picked)])

    ordered = in_order(table, docs.divisions, by=[DOC, "tag"]).compute()
    assert list(zip(ordered[DOC], ordered.tag)) == sorted(zip(keys[DOC], keys.tag))


def cudf_concat(frames, **options):
    """pandas' concat under cudf's rule (``cudf.DataFrame._concat`` in RAPIDS 26.10): the index is
    concatenated as a column unless every frame has a RangeIndex, and the non-null columns at
    one position must all be numeric or all have one dtype (pandas finds a common one)."""
    columns = [
        ([] if all(isinstance(f.index, pd.RangeIndex) for f in frames) else [f.index]) + list(f.items()) for f in frames
    ]
    for position in zip(*columns):
        dtypes = [
            (c[1] if isinstance(c, tuple) else c).dtype
            for c in position
            if (c[1] if isinstance(c, tuple) else c).notna().any()
        ]
        if not all(pd.api.types.is_numeric_dtype(d) for d in dtypes) and len(set(map(str, dtypes))) > 1:
            raise ValueError("All columns must be the same type")
    return original_concat(frames, **options)


original_concat = concat_dispatch.dispatch(pd.DataFrame)


@pytest.mark.parametrize("docs_partitions", [1, 3])
def test_in_order_takes_tables_whose_partitions_differ_from_their_meta(monkeypatch, docs_partitions):
    # The removed table concatenates rows from the exact and the fuzzy stage, and on the GPU
    # their pieces met in one concat with string columns of different dtypes or indexes of
    # different kinds, which cudf refuses ("All columns must be the same type": the first H200
    # run of a corpus with both kinds of duplicates). Here the pieces differ from their meta
    # as they did there, and concat follows cudf's rule.
    docs = add_doc_keys(frame_of(30, docs_partitions))
    keys = docs.compute()[DOC].to_numpy()
    exact = pd.DataFrame({DOC: keys[[4, 20]], "id": ["e4", "e20"], "kind": "exact"})
    fuzzy = pd.DataFrame({DOC: keys[[2, 25, 9]], "id": ["f2", "f25", "f9"], "kind": "fuzzy"})
    meta = exact.iloc[:0].astype({"id": "str", "kind": "str"})
    # The exact piece's strings are objects, the fuzzy piece is indexed by its ids.
    pieces = [
        dd.from_pandas(exact, npartitions=1).map_partitions(lambda p: p.astype({"id": object}), meta=meta),
        dd.from_pandas(fuzzy, npartitions=1).map_partitions(lambda p: p.set_index(p.id.rename(None)), meta=meta),
    ]
    monkeypatch.setitem(concat_dispatch._lookup, pd.DataFrame, cudf_concat)
    with pytest.raises(ValueError, match="same type"):
        cudf_concat([p.compute() for p in pieces])  # the rule holds: pandas alone would take them
    ordered = in_order(dd.concat(pieces), docs.divisions).compute()
    assert ordered.id.tolist() == ["f2", "e4", "f9", "e20", "f25"]
    assert ordered.kind.tolist() == ["fuzzy", "exact", "fuzzy", "exact", "fuzzy"]


def test_resolve_takes_group_tables_whose_partitions_differ_from_their_meta(monkeypatch):
    # The same kind in the result stages: the removed and duplicates tables concatenate the
    # exact and the fuzzy group tables' rows, and the duplicates table's merge shuffles them.
    docs = add_doc_keys(frame_of(30, 3))
    k = docs.compute()[DOC].to_numpy()

    def groups(rows):  # (doc, representative, jaccard) by row number, ids from the kind's letter
        return pd.DataFrame(
            {
                "_doc": [k[d] for d, _, _, _ in rows],
                "_rep": [k[r] for _, r, _, _ in rows],
                "_id": [f"{x}{d}" for d, _, _, x in rows],
                "_rep_id": [f"{x}{r}" for _, r, _, x in rows],
                "_jaccard": [j for _, _, j, _ in rows],
            }
        ).astype({"_id": "str", "_rep_id": "str"})

    exact = groups([(4, 4, 1.0, "e"), (20, 4, 1.0, "e"), (7, 7, 1.0, "e"), (27, 7, 1.0, "e")])
    fuzzy = groups([(2, 2, 1.0, "f"), (25, 2, 0.9, "f"), (9, 9, 1.0, "f"), (12, 9, 0.85, "f")])
    exact, fuzzy = dd.from_pandas(exact, npartitions=2), dd.from_pandas(fuzzy, npartitions=2)
    expected = [table.compute() for table in resolve(exact, fuzzy, docs.divisions)]
    # The exact table's ids held as objects, the fuzzy table indexed by its ids, as pieces may be on a device.
    odd = resolve(
        exact.map_partitions(lambda p: p.astype({"_id": object}), meta=exact._meta),
        fuzzy.map_partitions(lambda p: p.set_index(p._id.rename(None)), meta=fuzzy._meta),
        docs.divisions,
    )
    monkeypatch.setitem(concat_dispatch._lookup, pd.DataFrame, cudf_concat)
    removed, duplicates = (table.compute() for table in odd)
    assert removed.id.tolist() == ["f12", "e20", "f25", "e27"]
    pd.testing.assert_frame_equal(removed, expected[0])
    pd.testing.assert_frame_equal(duplicates, expected[1])


def test_joins_keep_a_documents_frame_lazy():
    # Building a join computes nothing (the documents' divisions are known, not sampled).
    docs = add_doc_keys(frame_of(50, 3))
    calls = []
    with dask.config.set(scheduler=lambda dsk, keys, **kw: calls.append(keys)):
        drop(docs, dd.from_pandas(pd.DataFrame({DOC: [1 << 40]}), npartitions=1))
        select(docs, dd.from_pandas(pd.DataFrame({DOC: [0]}), npartitions=1), columns=())
    assert calls == []


def test_fixed_partitions_leaves_dask_config_alone(monkeypatch):
    # It switched Dask's string conversion off in dask.config, which is the whole process's:
    # two threads deduplicating at once left it off for good (every later frame's strings were
    # of another dtype), and other threads' frames were made without it meanwhile.
    with dask.config.set({"dataframe.convert-string": False}):  # lists ride along as lists
        frame = dd.from_pandas(pd.DataFrame({"tags": [["a"], ["b", "c"]], "text": ["x", "y"]}), npartitions=2)
    before = dask.config.get("dataframe.convert-string", None)
    changes = []
    monkeypatch.setattr(dask.config, "set", lambda *args, **kwargs: changes.append(args))
    fixed = fixed_partitions(frame)
    monkeypatch.undo()
    assert changes == [] and dask.config.get("dataframe.convert-string", None) == before
    assert fixed.compute(scheduler="sync").tags.tolist() == [["a"], ["b", "c"]] and fixed.npartitions == 2
