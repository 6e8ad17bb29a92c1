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

from curate.backend import greedy_representatives, host_step, to_host
from curate.config import FuzzyConfig
from curate.dedup.groups import group_frame, group_meta
from curate.dedup.keep import KeepPolicy
from curate.dedup.keys import select
from curate.dedup.text import prepare_text
from curate.schema import COMPONENT, DOC


def component_groups(
    components: dd.DataFrame,
    docs: dd.DataFrame,
    *,
    text_field: str,
    id_field: str,
    keep: KeepPolicy,
    config: FuzzyConfig,
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

    Returns
    -------
    dask.dataframe.DataFrame
        The group table of :mod:`curate.dedup.groups`.
    """
    cols = [DOC, id_field, *keep.columns()] + ([text_field] if config.verify or keep.rule == "longest" else [])
    # The members' rows are selected where they lie: each text moves once, to its component's partition.
    members = select(docs[list(dict.fromkeys(cols))], components.rename(columns={"node": DOC}), (COMPONENT,))
    # Components hold candidate documents only, so they are split on the host whatever the backend.
    meta = to_host(group_meta(docs[id_field]._meta))
    return members.shuffle(COMPONENT).map_partitions(
        _split, text_field, id_field, keep, config, meta=meta, token=host_step(_split)
    )


def _split(part, text_field, id_field, keep, config):
    part = keep.sort(keep.measure(to_host(part), text_field), [COMPONENT])
    component = part[COMPONENT].to_numpy()
    starts = np.flatnonzero(np.r_[True, component[1:] != component[:-1]])
    group_starts = np.append(starts, len(part)).astype(np.int64)
    if config.verify:
        rep_row, similarity = greedy_representatives(
            prepare_text(part[text_field], config), group_starts, config.threshold, config.width, config.ngram == "word"
        )
    else:  # no similarity was computed: the whole component is one group
        rep_row, similarity = np.repeat(starts, np.diff(group_starts)), np.full(len(part), np.nan)
    in_group = np.bincount(rep_row, minlength=len(part))[rep_row] > 1
    doc, doc_id = part[DOC], part[id_field]
    rep = doc.iloc[rep_row].set_axis(part.index)
    rep_id = doc_id.iloc[rep_row].set_axis(part.index)
    return group_frame(doc, rep, doc_id, rep_id, similarity)[in_group]
