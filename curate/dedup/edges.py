"""Buckets to candidate pairs: a star from each bucket's smallest document to the others, then,
where verification fails a member against that anchor, pairs among the bucket's members.

Why the second round: a bucket's anchor is whichever member comes first in the input. When it
is not similar to the others (shared boilerplate, a template), verification drops its edges
and two members that are similar to each other lose their only link. Comparing, in such a
bucket, every member that failed against the anchor with every other member makes the found
pairs independent of which document anchors it (see :func:`member_pairs`).
"""

import dask.dataframe as dd
import numpy as np
import pandas as pd

from curate.backend import backend_of, host_step, to_host
from curate.dedup.minhash import BUCKET
from curate.dedup.verify import JACCARD
from curate.schema import DOC

MEMBERS = "_members"  # documents in a star row's bucket, anchor included
_FAILED = "_failed"
_HALF = 1 << 32  # a label is _high * _HALF + _low
_COMPONENT = "_component"
_OLD = "_old"
_EDGE_META = {"u": "int64", "v": "int64"}  # a description: Dask builds it in the partitions' backend
_HOST_EDGES = pd.DataFrame({"u": np.zeros(0, np.int64), "v": np.zeros(0, np.int64)})  # what a host step answers


def bucket_stars(buckets: dd.DataFrame, reference: int = 0) -> dd.DataFrame:
    """One row per bucket member other than the bucket's anchor (its smallest ``_doc``).

    Shuffles on the bucket id. A bucket of ``k`` documents gives ``k - 1`` rows; buckets of
    one document give none, nor do buckets of the reference's documents alone.

    Parameters
    ----------
    buckets : dask.dataframe.DataFrame
        Columns ``_bucket`` (uint64), ``_doc`` (int64), from :func:`curate.dedup.minhash.lsh_buckets`.
    reference : int, default=0
        ``_doc`` keys below this are a reference corpus's (:class:`curate.dedup.keep.KeepPolicy`),
        never removed: a bucket of them alone can change nothing (a week of new documents
        against 68,454 published ones verified 7,346 pairs of published documents).

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``_bucket`` (uint64), ``u`` (int64, the anchor), ``v`` (int64, the member,
        ``u < v``), ``_members`` (int64, ``k``).
    """
    meta = {BUCKET: "uint64", "u": "int64", "v": "int64", MEMBERS: "int64"}
    return buckets.shuffle(BUCKET).map_partitions(_stars, reference, meta=meta)


def unique_edges(stars: dd.DataFrame) -> dd.DataFrame:
    """The distinct ``(u, v)`` of :func:`bucket_stars` rows: candidate edges, ``u < v`` (int64).

    In a bucket of ``k`` documents the star has ``k - 1`` edges instead of ``k (k - 1) / 2``
    pairs, and gives the same connected components. Shuffles on ``u``.
    """
    return stars[["u", "v"]].shuffle("u").map_partitions(lambda part: part.drop_duplicates(), meta=_EDGE_META)


def bucket_edges(buckets: dd.DataFrame) -> dd.DataFrame:
    """Candidate edges ``u < v`` (int64), unique: :func:`unique_edges` of :func:`bucket_stars`."""
    return unique_edges(bucket_stars(buckets))


def stars_with_member_pairs(stars: dd.DataFrame) -> dd.DataFrame:
    """The :func:`bucket_stars` rows of buckets of three or more documents, the only buckets
    with a pair that is not a star edge (what :func:`member_pairs` reads)."""
    return stars[stars[MEMBERS] > 2]


def _stars(part, reference=0):
    by_bucket = part.groupby(BUCKET, sort=False)[DOC]
    anchor, members = by_bucket.transform("min"), by_bucket.transform("count")
    member = (part[DOC] != anchor).values
    if reference:  # a bucket whose largest key is the reference's holds no other document
        member = member & (by_bucket.transform("max") >= reference).values
    return type(part)(
        {
            BUCKET: part[BUCKET].values[member],
            "u": anchor.values[member],
            "v": part[DOC].values[member],
            MEMBERS: members.values[member],
        }
    )


def member_pairs(
    stars: dd.DataFrame, scored: dd.DataFrame, components: dd.DataFrame, threshold: float, max_pairs: int
) -> dd.DataFrame:
    """Pairs of bucket members to verify in buckets where a member failed against the anchor.

    In a bucket whose members other than the anchor ``a`` split into ``F`` (failed
    verification against ``a``) and ``P`` (passed), every pair in ``F x F`` and ``F x P`` is
    a pair to compare; pairs in ``P x P`` are already connected through ``a``. Together with
    the star edges this compares, or connects, every pair of documents that share a bucket,
    so the connected components of the verified edges are those of "all pairs sharing a
    bucket with Jaccard >= threshold", whichever document anchors each bucket.

    Two kinds of pair are left out, neither of which can change a component: pairs already
    in one component of the verified star edges (``P x P`` is the simplest case; on Enron
    spam at 0.8, 41% of the pairs), and pairs the anchor proves dissimilar: Jaccard distance
    ``1 - J`` is a metric [1]_, so ``J(x, y) <= 1 - |J(a, x) - J(a, y)|``, and a pair whose
    similarities to the anchor differ by more than ``1 - threshold`` cannot reach it (a
    near-duplicate cluster with one unrelated member costs no comparison).

    The cost is quadratic in a bucket's size where most members fail (a bucket of mutually
    dissimilar documents: shared boilerplate, a template), so it is bounded: a bucket whose
    ``F x F`` and ``F x P`` pairs exceed ``max_pairs`` gets, instead, its
    ``m = max(1, max_pairs // (n - 1))`` smallest failed members as extra anchors, each
    paired with every other member (``n`` members besides the anchor, at most ``m (n - 1)``
    pairs before the anchor bound; ``n - 1`` when ``n > max_pairs + 1``). Such a bucket may
    still hide a pair; :func:`buckets_over_cap` counts them.

    Parameters
    ----------
    stars : dask.dataframe.DataFrame
        :func:`bucket_stars` rows (``_bucket``, ``u``, ``v``, ``_members``), or only
        :func:`stars_with_member_pairs` of them.
    scored : dask.dataframe.DataFrame
        Every star edge once, verified: ``u < v`` (int64), ``jaccard`` (float64), from
        :func:`curate.dedup.verify.score_edges`. These pairs are not returned again.
    components : dask.dataframe.DataFrame
        Columns ``node``, ``component`` (int64): the connected components of the star edges
        at or above ``threshold`` (:func:`curate.dedup.components.connected_components`).
    threshold : float
        Jaccard similarity of a duplicate, in ``(0, 1]``.
    max_pairs : int
        Most pairs per bucket (>= 1).

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``u < v`` (int64), each pair once however many buckets it shares.

    Raises
    ------
    ValueError
        If ``max_pairs < 1``.

    References
    ----------
    .. [1] M. Levandowsky, D. Winter, "Distance between sets", Nature 234, 1971 (the Jaccard
       distance is a metric).
    """
    if max_pairs < 1:
        raise ValueError(f"max_pairs must be >= 1, got {max_pairs}")
    pairs = _bucket_rows(stars, scored, components).map_partitions(
        _member_pairs, threshold, max_pairs, meta=_HOST_EDGES, token=host_step(_member_pairs)
    )
    # Pairs are found on the host; they join the verified edges in the run's backend.
    pairs = pairs.to_backend(backend_of(scored._meta))
    # Each pair once, and none already compared: old pairs sort before an equal new one. As many
    # partitions as the verified edges (a concatenation has both frames' partitions): the
    # second round's stages then run as many tasks as the first's, not three times as many.
    both = dd.concat([pairs.assign(**{_OLD: False}), scored[["u", "v"]].assign(**{_OLD: True})])
    both = both.shuffle("u", npartitions=scored.npartitions)
    return both.map_partitions(_new_pairs, meta=_EDGE_META)


def buckets_over_cap(
    stars: dd.DataFrame, scored: dd.DataFrame, components: dd.DataFrame, threshold: float, max_pairs: int
):
    """Delayed count (int) of buckets whose member pairs exceed ``max_pairs`` (see :func:`member_pairs`).

    Built on the same shuffle as :func:`member_pairs`: computed together, the shuffle runs once.
    """
    return (
        _bucket_rows(stars, scored, components)
        .map_partitions(_over_cap, threshold, max_pairs, meta=(None, "int64"), token=host_step(_over_cap))
        .sum()
    )


def _bucket_rows(stars, scored, components):
    # A bucket's rows all have its anchor as u, as do the anchor's scored edges: one shuffle on
    # u brings each bucket together with its members' similarity to the anchor and component
    # (-1: in none). Star rows are the ones without a similarity.
    # connected_components answers in host partitions: into the verified edges' backend
    labels = components.to_backend(backend_of(scored._meta))
    # A left merge makes an int column with unmatched rows float64 (pandas, and cudf to match
    # it), which rounds labels (_doc keys) past 2**53 and joins components: halves stay exact.
    labels = labels.assign(_high=labels.component // _HALF, _low=labels.component % _HALF).rename(columns={"node": "v"})
    edges = scored[["u", "v", JACCARD]].merge(labels[["v", "_high", "_low"]], on="v", how="left")
    component = edges._high.fillna(-1).astype("int64") * _HALF + edges._low.fillna(_HALF - 1).astype("int64")
    edges = edges.assign(**{_COMPONENT: component, BUCKET: np.uint64(0)})  # -1: in none
    rows = stars_with_member_pairs(stars)[[BUCKET, "u", "v"]].assign(**{JACCARD: np.nan, _COMPONENT: np.int64(-1)})
    both = dd.concat([rows, edges[[BUCKET, "u", "v", JACCARD, _COMPONENT]]])
    return both.shuffle("u", npartitions=max(rows.npartitions, edges.npartitions))


def _failed_buckets(part, threshold):
    """Star rows of buckets with a member that failed against the anchor, with ``jaccard``
    (to the anchor), ``_component`` and ``_failed``; by bucket, failed members first, then by ``v``."""
    part = to_host(part)  # ids of candidate buckets only: the pair arithmetic runs on the host
    star = part[JACCARD].isna()
    rows = part.loc[star, [BUCKET, "u", "v"]].merge(part.loc[~star, ["u", "v", JACCARD, _COMPONENT]], on=["u", "v"])
    rows[_FAILED] = rows[JACCARD] < threshold
    rows = rows[rows.groupby(BUCKET)[_FAILED].transform("any")]
    return rows.sort_values([BUCKET, _FAILED, "v"], ascending=[True, False, True], ignore_index=True)


def _anchors_per_bucket(rows, max_pairs):
    """Per bucket: first row, members ``n`` (anchor excluded), failed ``f`` and anchors used ``m``."""
    bucket = rows[BUCKET].to_numpy()
    first = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if len(bucket) else np.zeros(0, np.int64)
    n = np.diff(np.append(first, len(bucket)))
    f = np.add.reduceat(rows[_FAILED].to_numpy().astype(np.int64), first) if len(first) else n
    full = f * (n - 1) - f * (f - 1) // 2  # |F x F| + |F x P|
    m = np.where(full <= max_pairs, f, np.maximum(1, max_pairs // np.maximum(n - 1, 1)))
    return first, n, f, np.minimum(m, f)


def _member_pairs(part, threshold, max_pairs):
    rows = _failed_buckets(part, threshold)
    first, n, _, m = _anchors_per_bucket(rows, max_pairs)
    # Row i of a bucket (position p = i - first < m) pairs with the rows after it in the bucket.
    pos = np.arange(len(rows)) - np.repeat(first, n)
    anchors = np.flatnonzero(pos < np.repeat(m, n))
    count = (np.repeat(first + n, n) - 1 - np.arange(len(rows)))[anchors]
    x = np.repeat(anchors, count)
    y = x + 1 + np.arange(len(x)) - np.repeat(np.cumsum(count) - count, count)
    similarity, component = rows[JACCARD].to_numpy(), rows[_COMPONENT].to_numpy()
    # The anchor's bound (see member_pairs); the margin absorbs float rounding, never a pair.
    possible = np.abs(similarity[x] - similarity[y]) <= 1 - threshold + 1e-9
    possible &= (component[x] != component[y]) | (component[x] < 0)  # else already connected
    doc, x, y = rows["v"].to_numpy(), x[possible], y[possible]
    return pd.DataFrame({"u": np.minimum(doc[x], doc[y]), "v": np.maximum(doc[x], doc[y])})


def _over_cap(part, threshold, max_pairs):
    _, _, f, m = _anchors_per_bucket(_failed_buckets(part, threshold), max_pairs)
    return int((m < f).sum())


def _new_pairs(part):
    part = part.sort_values(["u", "v", _OLD], ascending=[True, True, False])
    part = part.drop_duplicates(subset=["u", "v"], keep="first")
    return part.loc[~part[_OLD], ["u", "v"]]
