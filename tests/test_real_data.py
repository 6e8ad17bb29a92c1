"""Correctness on real corpora from ../shared/data (skipped where that folder is absent)."""

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


def test_same_removed_file_whatever_the_partitioning(client, tmp_path):
    from curate.cluster import connect
    from curate.config import ClusterConfig

    news = read_documents(str(shared_corpus("20news"))).head(1500, npartitions=-1)
    records = news[["id", "text"]].to_dict("records")
    records += [{"id": f"copy-{r['id']}", "text": r["text"]} for r in records[:50]]  # exact duplicates too
    path = write_jsonl(tmp_path / "news.jsonl", records)
    size = path.stat().st_size

    def removed(blocksize, workers):
        out = tmp_path / f"out-{blocksize}-{workers}"
        summary = dedup([str(path)], str(out), load_config(None, {"io": {"blocksize": blocksize}}))
        return summary["counts"]["input"]["partitions"], (out / "removed.parquet").read_bytes()

    # two worker processes: the session's cluster; one: a cluster of its own, started once
    outputs = [removed(size // 4 + 1, 2), removed(size // 16 + 1, 2)]
    with connect(ClusterConfig(n_workers=1, threads_per_worker=1)):
        outputs += [removed(None, 1), removed(size // 16 + 1, 1)]
    assert [p for p, _ in outputs] == [4, 16, 1, 16]
    assert len({removed for _, removed in outputs}) == 1
    assert len(pd.read_parquet(tmp_path / "out-None-1" / "removed.parquet")) >= 50
