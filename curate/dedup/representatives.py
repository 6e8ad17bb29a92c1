"""From connected components to duplicate groups whose removed members match their representative.

A connected component of verified edges can chain documents (A~B, B~C) whose ends are not
similar (J(A, C) < threshold). So each component is split greedily, best document first by
the keep policy: the best unassigned document becomes a representative and takes every
unassigned member whose Jaccard similarity with it reaches the threshold; repeat. Every
removed document is then within the threshold of its kept representative. Without
verification, the whole component is one group (NeMo Curator's behaviour).
"""

import dask.dataframe as dd
import numpy as np

from curate.backend import backend_of, greedy_representatives, host_step, to_host
from curate.config import FuzzyConfig
from curate.dedup.groups import group_frame, group_meta
from curate.dedup.keep import KeepPolicy
from curate.dedup.keys import select
from curate.dedup.text import prepare_text
from curate.dedup.verify import JACCARD
from curate.schema import COMPONENT, DOC

LABEL_JACCARD = "_label_jaccard"  # a member's verified similarity with its component's label


def component_groups(
    components: dd.DataFrame,
    docs: dd.DataFrame,
    *,
    text_field: str,
    id_field: str,
    keep: KeepPolicy,
    config: FuzzyConfig,
    edges: dd.DataFrame | None = None,
) -> dd.DataFrame:
    """Duplicate groups from connected components (see the module docstring).

    Parameters
    ----------
    components : dask.dataframe.DataFrame
        Columns ``node``, ``component`` (int64), from
        :func:`curate.dedup.components.connected_components`.
    docs : dask.dataframe.DataFrame
        A document frame (:mod:`curate.dedup.keys`) with ``_doc``, the id and text fields and
        the keep policy's column, holding every document of a component.
    text_field, id_field : str
    keep : KeepPolicy
    config : FuzzyConfig
        ``verify``, ``threshold`` and the shingle settings are used.
    edges : dask.dataframe.DataFrame, optional
        The verified edges the components were found from: ``u < v`` (int64) and their
        ``jaccard`` (float64), the values :mod:`curate.dedup.verify` computed, which the split
        would compute again. A member's similarity with its component's label (its smallest
        document) is taken from their edge where there is one, when the label is its group's
        first row (keep ``first``, or a label that the policy ranks first), so its shingle set is
        built only if it is compared with another row: in a group of a document and its copies,
        verified against it as their buckets' anchor, no set is built. Read only with
        ``config.verify`` and components in one partition (a graph solved in one task).

    Returns
    -------
    dask.dataframe.DataFrame
        The group table of :mod:`curate.dedup.groups`.
    """
    cols = [DOC, id_field, *keep.columns()] + ([text_field] if config.verify or keep.rule == "longest" else [])
    wanted, columns = components.rename(columns={"node": DOC}), (COMPONENT,)
    if edges is not None and config.verify and components.npartitions == 1:  # (a graph solved in one task)
        wanted, columns = with_label_similarity(wanted, edges), (COMPONENT, LABEL_JACCARD)
    # The members' rows are selected where they lie: each text moves once, to its component's partition.
    members = select(docs[list(dict.fromkeys(cols))], wanted, columns)
    # Components hold candidate documents only, so they are split on the host whatever the backend.
    meta = to_host(group_meta(docs[id_field]._meta))
    return members.shuffle(COMPONENT).map_partitions(
        _split, text_field, id_field, keep, config, meta=meta, token=host_step(_split)
    )


def with_label_similarity(components: dd.DataFrame, edges: dd.DataFrame) -> dd.DataFrame:
    """``components`` (``_doc``, ``component``, int64; one partition) with ``_label_jaccard``
    (float64): each document's similarity with its component's label from their verified edge in
    ``edges`` (``u < v``, ``jaccard``), NaN where they share none (the label itself included).

    Found in one task, the edges gathered into it as the components' own task gathers them; in
    the partitions' backend of ``edges``.
    """
    labels = components.to_backend(backend_of(edges._meta))
    meta = labels._meta.assign(**{LABEL_JACCARD: np.float64(0)})
    edges = edges[["u", "v", JACCARD]].repartition(npartitions=1)
    return dd.map_partitions(_from_label, labels, edges, meta=meta, align_dataframes=False)


def _from_label(labels, edges):
    # An edge (u, v) joins v to its label when u is that label (u < v; a label is its component's smallest).
    ends = edges.merge(labels.rename(columns={DOC: "v"}), on="v")
    ends = ends[ends["u"] == ends[COMPONENT]]
    found = type(ends)({DOC: ends["v"].values, LABEL_JACCARD: ends[JACCARD].values})
    return labels.merge(found, on=DOC, how="left")


def _split(part, text_field, id_field, keep, config):
    part = keep.sort(keep.measure(to_host(part), text_field), [COMPONENT])
    component = part[COMPONENT].to_numpy()
    starts = np.flatnonzero(np.r_[True, component[1:] != component[:-1]])
    group_starts = np.append(starts, len(part)).astype(np.int64)
    fixed = keep.fixed(part[DOC])  # the reference's documents: never taken (they sort first)
    if config.verify:
        rep_row, similarity = greedy_representatives(
            prepare_text(part[text_field], config),
            group_starts,
            config.threshold,
            config.width,
            config.ngram == "word",
            _known(part, group_starts),
            fixed,
        )
    else:  # no similarity was computed: the whole component is one group
        rep_row, similarity = np.repeat(starts, np.diff(group_starts)), np.full(len(part), np.nan)
        if fixed is not None:
            rep_row = np.where(fixed, np.arange(len(part)), rep_row)
    in_group = np.bincount(rep_row, minlength=len(part))[rep_row] > 1
    doc, doc_id = part[DOC], part[id_field]
    rep = doc.iloc[rep_row].set_axis(part.index)
    rep_id = doc_id.iloc[rep_row].set_axis(part.index)
    return group_frame(doc, rep, doc_id, rep_id, similarity)[in_group]


def _known(part, group_starts):
    """Each row's similarity with its group's first row where it is known: its ``_label_jaccard``
    (see :func:`with_label_similarity`) when that first row is the component's label; else NaN."""
    if LABEL_JACCARD not in part.columns:
        return None
    firsts = np.repeat(group_starts[:-1], np.diff(group_starts))  # each row's group's first row
    first = part[DOC].to_numpy()[firsts]
    similarity = part[LABEL_JACCARD].to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(first == part[COMPONENT].to_numpy(), similarity, np.nan)
