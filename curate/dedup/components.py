"""Connected components of an edge list, for grouping fuzzy duplicates."""

from __future__ import annotations

import logging

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd

from curate.backend import host_step, label_components, to_host
from curate.kernels.components import components_local

__all__ = ["connected_components", "components_local", "components_distributed"]

_EDGE_META = pd.DataFrame({"u": pd.Series(dtype="int64"), "v": pd.Series(dtype="int64")})
_OUT_META = pd.DataFrame({"node": pd.Series(dtype="int64"), "component": pd.Series(dtype="int64")})
_FP_META = pd.DataFrame({"n": pd.Series(dtype="int64"), "h": pd.Series(dtype="uint64")})
_log = logging.getLogger(__name__)


def _check_edges(edges):
    if not isinstance(edges, dd.DataFrame):
        raise TypeError(f"edges must be a dask DataFrame, got {type(edges).__name__}")
    missing = [c for c in ("u", "v") if c not in edges.columns]
    if missing:
        raise ValueError(f"edges is missing column(s) {missing}; need 'u' and 'v'")
    for c in ("u", "v"):
        if not pd.api.types.is_integer_dtype(edges.dtypes[c]):
            raise TypeError(f"edges[{c!r}] must be an integer dtype, got {edges.dtypes[c]}")


def connected_components(
    edges: dd.DataFrame, *, local_max_edges: int = 2_000_000, n_edges: int | None = None
) -> dd.DataFrame:
    """Label every node of an undirected graph with the smallest node of its component.

    Parameters
    ----------
    edges : dask.dataframe.DataFrame
        Columns ``u`` and ``v`` (int64), one row per undirected edge. Duplicate
        edges, both directions and self-loops are allowed.
    local_max_edges : int, default 2_000_000
        Graphs with at most this many edge rows are solved in one task with
        :func:`components_local`; larger ones with :func:`components_distributed`.
    n_edges : int or None, default None
        The number of edge rows, when the caller knows it (a stage already written). None:
        not known, and nothing is computed here: the graph is solved in one task, which
        raises ``ValueError`` when it holds more than ``local_max_edges`` edge rows (the
        distributed path iterates until the labels settle, which only a caller that may
        compute between rounds can run).

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``node`` and ``component`` (int64): one row per distinct node in
        `edges`, ``component`` being the smallest node id of its component.

    Raises
    ------
    TypeError
        If `edges` is not a dask DataFrame or ``u``/``v`` are not integer.
    ValueError
        If ``u`` or ``v`` is missing, or `local_max_edges` is negative.

    Notes
    -----
    Labels do not depend on how `edges` is partitioned.

    References
    ----------
    .. [1] R. Kiveris, S. Lattanzi, V. Mirrokni, V. Rastogi, S. Vassilvitskii,
       "Connected Components in MapReduce and Beyond", SoCC 2014.
    """
    _check_edges(edges)
    if local_max_edges < 0:
        raise ValueError(f"local_max_edges must be >= 0, got {local_max_edges}")
    if n_edges is not None and n_edges > local_max_edges:
        # The edge list is small next to the corpus; the distributed path runs on host (pandas) partitions.
        return components_distributed(edges[["u", "v"]].map_partitions(to_host, meta=_EDGE_META))
    # One task, where the edges lie (on the GPU backend: cuGraph's kernel when installed).
    return edges[["u", "v"]].repartition(npartitions=1).map_partitions(_solve, local_max_edges, meta=_OUT_META)


def _solve(edges: pd.DataFrame, local_max_edges: int) -> pd.DataFrame:
    if len(edges) > local_max_edges:
        raise ValueError(
            f"{len(edges):,} verified edges exceed local_components_max_edges ({local_max_edges:,}): raise it (one task "
            "holds the edge list), or run curate dedup / curate.pipeline.dedup, which switches to distributed components"
        )
    return label_components(edges)


def _orient(df: pd.DataFrame) -> pd.DataFrame:
    u, v = df["u"].to_numpy("int64"), df["v"].to_numpy("int64")
    return pd.DataFrame({"u": np.maximum(u, v), "v": np.minimum(u, v)}).drop_duplicates()


def _both_directions(df: pd.DataFrame) -> pd.DataFrame:
    swapped = pd.DataFrame({"u": df["v"].to_numpy(), "v": df["u"].to_numpy()})
    return pd.concat([df, swapped], ignore_index=True)


def _large_star(df: pd.DataFrame) -> pd.DataFrame:
    df = df.drop_duplicates()
    u, v = df["u"].to_numpy(), df["v"].to_numpy()
    m = np.minimum(df.groupby("u")["v"].transform("min").to_numpy(), u)
    keep = v > u
    return pd.DataFrame({"u": v[keep], "v": m[keep]})


def _small_star(df: pd.DataFrame) -> pd.DataFrame:
    # Every input edge points to a smaller node, so min(N(u) ∪ {u}) = min(N(u)).
    df = df.drop_duplicates()
    u, v = df["u"].to_numpy(), df["v"].to_numpy()
    m = df.groupby("u")["v"].transform("min").to_numpy()
    leaf = v != m
    out = pd.DataFrame({"u": np.concatenate([v[leaf], u]), "v": np.concatenate([m[leaf], m])})
    return out.drop_duplicates()


def _half_step(frame: dd.DataFrame, star, nparts: int) -> dd.DataFrame:
    # Shuffling on u puts every edge of a node in one partition, as the paper's reducer needs.
    return frame.shuffle("u", npartitions=nparts).map_partitions(star, meta=_EDGE_META, token=host_step(star))


def _fingerprint(df: pd.DataFrame) -> pd.DataFrame:
    # uint64 sums wrap, which is fine: only equality of fingerprints matters.
    h = pd.util.hash_pandas_object(df[["u", "v"]], index=False).to_numpy().sum(dtype=np.uint64)
    return pd.DataFrame({"n": np.array([len(df)], np.int64), "h": np.array([h], np.uint64)})


def _fingerprint_of(frame: dd.DataFrame) -> tuple[int, int]:
    (parts,) = dask.compute(frame.map_partitions(_fingerprint, meta=_FP_META, token=host_step(_fingerprint)))
    return int(parts["n"].sum()), int(parts["h"].to_numpy().sum(dtype=np.uint64))


def _self_labels(df: pd.DataFrame) -> pd.DataFrame:
    node = pd.unique(np.concatenate([df["u"].to_numpy(), df["v"].to_numpy()]))
    return pd.DataFrame({"node": node, "component": node})


def _min_label(df: pd.DataFrame) -> pd.DataFrame:
    out = df.groupby("node", sort=False)["component"].min()
    return pd.DataFrame({"node": out.index.to_numpy("int64"), "component": out.to_numpy("int64")})


def components_distributed(edges: dd.DataFrame) -> dd.DataFrame:
    """Connected components by the alternating Large-Star / Small-Star algorithm [1]_.

    Parameters
    ----------
    edges : dask.dataframe.DataFrame
        Columns ``u`` and ``v`` (int64); duplicates, both directions and
        self-loops are allowed.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``node`` and ``component`` (int64), one row per distinct node,
        ``component`` being the smallest node of its component.

    Raises
    ------
    TypeError
        If `edges` is not a dask DataFrame or ``u``/``v`` are not integer.
    ValueError
        If ``u`` or ``v`` is missing.

    Notes
    -----
    Edges are kept pointing from the larger to the smaller node. Each half-step
    is a shuffle on ``u`` plus vectorised pandas work per partition; the edge
    frame is persisted after every round, and iteration stops when a round
    leaves the edge count and the wrapped sum of 64-bit edge hashes unchanged.
    At that point each component is a star around its minimum [1]_. The
    oriented input is also kept persisted, to recover nodes seen only in
    self-loops and the roots. No step gathers all edges in one process.

    References
    ----------
    .. [1] R. Kiveris, S. Lattanzi, V. Mirrokni, V. Rastogi, S. Vassilvitskii,
       "Connected Components in MapReduce and Beyond", SoCC 2014.
    """
    _check_edges(edges)
    nparts = edges.npartitions
    start = (
        edges[["u", "v"]].astype("int64").map_partitions(_orient, meta=_EDGE_META, token=host_step(_orient)).persist()
    )
    state = start[start["u"] != start["v"]]
    fp = _fingerprint_of(state)
    rounds = 0
    while True:
        rounds += 1
        both_ways = state.map_partitions(_both_directions, meta=_EDGE_META, token=host_step(_both_directions))
        state = _half_step(_half_step(both_ways, _large_star, nparts), _small_star, nparts).persist()
        new_fp = _fingerprint_of(state)
        # A round depends only on the edge set, so an unchanged set is a fixed point.
        if new_fp == fp:
            break
        fp = new_fp
    _log.info("large/small-star converged after %d rounds", rounds)
    # Every node offers (x, x) and non-roots also (x, min); the smaller wins, so
    # roots and nodes seen only in self-loops get labelled too.
    selves = start.map_partitions(_self_labels, meta=_OUT_META, token=host_step(_self_labels))
    labels = state.rename(columns={"u": "node", "v": "component"})
    both = dd.concat([labels, selves])
    return both.shuffle("node", npartitions=nparts).map_partitions(
        _min_label, meta=_OUT_META, token=host_step(_min_label)
    )
