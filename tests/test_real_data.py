"""Correctness on real corpora from ../shared/data (skipped where that folder is absent)."""

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from curate.config import FuzzyConfig, load_config
from curate.dedup import ExactDedup
from curate.io import read_documents
from curate.pipeline import dedup
from tests import reference
from tests.conftest import shared_corpus, write_jsonl


@pytest.mark.parametrize("corpus", ["20news", "enron_spam"])
def test_exact_removes_what_pandas_drop_duplicates_removes(client, corpus):
    docs = read_documents(str(shared_corpus(corpus)))
    groups = ExactDedup()(docs).compute()
    frame = docs.compute()
    expected = frame.loc[frame.duplicated(subset="text", keep="first"), "_doc"]
    removed = groups.loc[groups._doc != groups._rep, "_doc"]
    assert sorted(removed) == sorted(expected)
    # every removed document's representative is the first occurrence of its text
    first = frame.drop_duplicates(subset="text", keep="first").set_index("text")["_doc"]
    text = frame.set_index("_doc")["text"]
    reps = groups[groups._doc != groups._rep]
    assert (first.loc[text.loc[reps._doc].to_numpy()].to_numpy() == reps._rep.to_numpy()).all()
    if corpus == "enron_spam":
        assert len(removed) == 6253 - 3031  # the corpus README: 3031 groups holding 6253 documents


def true_jaccard_matrix(texts: pd.Series, width: int) -> np.ndarray:
    """All-pairs Jaccard of the char-shingle sets (the shingle strings themselves, pure Python
    reference shingling), as a sparse incidence-matrix product."""
    vocab: dict[bytes, int] = {}
    sets = [{vocab.setdefault(s, len(vocab)) for s in reference.char_shingles(t, width)} if t else set() for t in texts]
    rows = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    cols = np.fromiter((c for s in sets for c in s), dtype=np.int64, count=len(rows))
    incidence = sp.csr_matrix((np.ones(len(cols), np.int32), (rows, cols)), shape=(len(sets), len(vocab)))
    common = (incidence @ incidence.T).toarray()
    sizes = np.array([len(s) for s in sets])
    union = sizes[:, None] + sizes[None, :] - common
    return np.where(union > 0, common / np.maximum(union, 1), 1.0)


def test_fuzzy_against_brute_force(client, tmp_path):
    # 20news has few near duplicates; Enron spam (campaigns sent with small edits) has many.
    news = read_documents(str(shared_corpus("20news"))).head(1500, npartitions=-1)
    enron = read_documents(str(shared_corpus("enron_spam")))
    enron = enron[enron.label == "spam"].head(1500, npartitions=-1)
    sample = pd.concat([news, enron], ignore_index=True)[["id", "text"]]
    path = write_jsonl(tmp_path / "sample.jsonl", sample.to_dict("records"))
    out = tmp_path / "out"
    dedup([str(path)], str(out), load_config(None, {"mode": "fuzzy"}))
    removed = pd.read_parquet(out / "removed.parquet")

    similarity = true_jaccard_matrix(sample.text, FuzzyConfig().width)
    position = {doc_id: i for i, doc_id in enumerate(sample.id)}
    # (1) every removed document is within the threshold of its representative, which is kept
    pairs = [(position[d], position[r]) for d, r in zip(removed.id, removed.representative)]
    assert min(similarity[d, r] for d, r in pairs) >= 0.8
    assert not set(removed.representative) & set(removed.id)
    # (2) pairs with true Jaccard >= 0.9 end in one group (same final representative)
    rep = np.arange(len(sample))
    for d, r in pairs:
        rep[d] = r
    i, j = np.triu_indices(len(sample), k=1)
    for level, target in [(0.9, 0.99), (0.8, 0.95)]:
        close = similarity[i, j] >= level
        together = (rep[i[close]] == rep[j[close]]).mean()
        print(f"pairs with J >= {level}: {close.sum()}, in one group: {together:.4f}")
        assert close.sum() > 100 and together >= target


def enron_spam_window(start: int, n: int) -> list[dict]:
    """``n`` spam mails of Enron-Spam's third shard (enron4-6) from its ``start``-th spam mail on:
    campaigns sent with small edits, so near duplicates are many and close together."""
    with gzip.open(shared_corpus("enron_spam") / "part-00002.jsonl.gz", "rt", encoding="utf-8") as lines:
        spam = (record for record in map(json.loads, lines) if record["label"] == "spam")
        return [{"id": r["id"], "text": r["text"]} for r in itertools.islice(spam, start, start + n)]


def news_posts(n: int) -> list[dict]:
    """The first ``n`` posts of 20news (no two alike: the documents that must stay)."""
    with gzip.open(shared_corpus("20news") / "part-00000.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [{"id": r["id"], "text": r["text"]} for r in map(json.loads, itertools.islice(lines, n))]


def partition_of(path: Path, blocksize: int | None, positions: pd.Series) -> np.ndarray:
    """The partition that holds the record at each byte offset when ``path`` is read in blocks of ``blocksize``."""
    starts = np.asarray(read_documents(str(path), blocksize=blocksize).divisions[:-1])  # _doc = offset in one file
    return np.searchsorted(starts, positions.to_numpy(), side="right") - 1


def test_same_removed_file_whatever_the_partitioning(client, tmp_path):
    from curate.cluster import connect
    from curate.config import ClusterConfig

    # The near duplicates' window of test_quality (spam position 11200), its mails split in two
    # halves (even, odd positions) with posts between, so that a campaign's mails lie in
    # different partitions; then exact copies of the first records, at the end.
    spam = enron_spam_window(5501, 300)
    records = spam[0::2] + news_posts(100) + spam[1::2]
    records += [{"id": f"copy-{r['id']}", "text": r["text"]} for r in records[:20]]
    path = write_jsonl(tmp_path / "docs.jsonl", records)
    size = path.stat().st_size

    def removed(parts, workers):
        out = tmp_path / f"out-{parts}-{workers}"
        blocksize = size // parts + 1 if parts > 1 else None
        summary = dedup([str(path)], str(out), load_config(None, {"io": {"blocksize": blocksize}}))
        return summary["counts"]["input"]["partitions"], (out / "removed.parquet").read_bytes()

    # two worker processes: the session's cluster; one: a cluster of its own
    runs = [(1, 2), (8, 2), (3, 1)]
    outputs = [removed(*run) for run in runs[:2]]
    with connect(ClusterConfig(n_workers=1, threads_per_worker=1)):
        outputs += [removed(*run) for run in runs[2:]]
    assert [p for p, _ in outputs] == [parts for parts, _ in runs]
    assert len({removed for _, removed in outputs}) == 1
    # What makes it a test: exact and near duplicates, and at every partitioning (the single one
    # aside) some of each whose representative lies in another partition.
    table = pd.read_parquet(tmp_path / "out-1-2" / "removed.parquet")
    members = pd.read_parquet(tmp_path / "out-1-2" / "duplicates.parquet")
    position = members.drop_duplicates("id").set_index("id")["position"]  # a document may be in two groups
    assert (table.kind == "exact").sum() >= 20 and (table.kind == "fuzzy").sum() >= 20
    for parts, _ in runs[1:]:
        apart = partition_of(path, size // parts + 1, position[table.id]) != partition_of(
            path, size // parts + 1, position[table.representative]
        )
        assert set(table.kind[apart]) == {"exact", "fuzzy"}, parts
