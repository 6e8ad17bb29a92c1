"""What fuzzy dedup must find whatever the input order: the connected components of "pairs that
share an LSH bucket and have Jaccard >= threshold", and the components a run found.

The buckets come from curate's own banding (:func:`curate.dedup.minhash.lsh_buckets`, which
depends on the texts only), the similarities from the exact all-pairs search
(:func:`curate.eval.quality.similar_pairs`, tested against brute force in test_quality.py).
"""

from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from curate.config import FuzzyConfig
from curate.dedup.minhash import lsh_buckets
from curate.eval.quality import similar_pairs


def bucket_sharing_duplicates(texts: list[str], config: FuzzyConfig) -> pd.DataFrame:
    """Pairs of positions (``left < right``) sharing a bucket with ``jaccard >= config.threshold``."""
    frame = pd.DataFrame({"_doc": np.arange(len(texts), dtype="int64"), "text": pd.Series(texts, dtype="str")})
    with dask.config.set(scheduler="sync"):
        buckets = lsh_buckets(dd.from_pandas(frame, npartitions=1), "text", config).compute()
    shared = buckets.merge(buckets, on="_bucket")
    shared = shared[shared._doc_x < shared._doc_y][["_doc_x", "_doc_y"]].drop_duplicates()
    shared.columns = ["left", "right"]
    return shared.merge(similar_pairs(pd.Series(texts, dtype="str"), config, config.threshold), on=["left", "right"])


def expected_components(texts: list[str], config: FuzzyConfig) -> set[frozenset[int]]:
    """Components (sets of positions, two or more) of the bucket-sharing pairs at ``config.threshold``."""
    pairs = bucket_sharing_duplicates(texts, config)
    graph = coo_matrix((np.ones(len(pairs)), (pairs.left, pairs.right)), shape=(len(texts), len(texts)))
    _, label = connected_components(graph, directed=False)
    groups = pd.Series(np.arange(len(texts))).groupby(label).apply(frozenset)
    return {group for group in groups if len(group) > 1}


def run_components(out: Path) -> set[frozenset[str]]:
    """The fuzzy connected components (sets of ids) a run left in ``out/_stages``."""
    components = pd.read_parquet(out / "_stages" / "components")
    ids = pd.read_parquet(out / "_stages" / "select").set_index("_doc")["id"]
    members = ids.loc[components.node].to_numpy()
    return {frozenset(group) for group in pd.Series(members).groupby(components.component.to_numpy()).apply(list)}
