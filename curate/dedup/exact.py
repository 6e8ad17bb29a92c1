"""Exact dedup: md5 of the text bytes, shuffle on the digest, byte equality confirmed per group."""

import dask.dataframe as dd
import pandas as pd

from curate.backend import md5_hex, to_host
from curate.dedup.groups import group_frame, group_meta
from curate.dedup.keep import KeepPolicy
from curate.io.read import DOC

_MD5 = "_md5"


class ExactDedup:
    """Find groups of documents with byte-identical text.

    Each document's UTF-8 text is hashed with md5, chunked above 4 KiB (see
    :mod:`curate.kernels.md5`; the same digest on both backends); documents are shuffled on the digest, and within a digest
    group only documents whose text is byte-for-byte equal are grouped, so a digest collision
    never merges different texts. The keep policy picks each group's representative.

    Parameters
    ----------
    text_field : str, default="text"
    id_field : str, default="id"
    keep : KeepPolicy, default=KeepPolicy("first")

    Examples
    --------
    >>> groups = ExactDedup()(docs)        # doctest: +SKIP
    >>> removed = groups[groups._doc != groups._rep]   # doctest: +SKIP
    """

    def __init__(self, *, text_field: str = "text", id_field: str = "id", keep: KeepPolicy = KeepPolicy()):
        self.text_field, self.id_field, self.keep = text_field, id_field, keep

    def __repr__(self) -> str:
        return f"ExactDedup(keep={self.keep})"

    def __call__(self, docs: dd.DataFrame) -> dd.DataFrame:
        """Duplicate groups of ``docs``.

        Parameters
        ----------
        docs : dask.dataframe.DataFrame
            Columns ``_doc`` (int64, unique, increasing in input order), the id and text fields
            and the keep policy's column.

        Returns
        -------
        dask.dataframe.DataFrame
            One row per document in a group of two or more: ``_doc``, ``_rep`` (the kept
            document's ``_doc``), ``_id``, ``_rep_id`` (their ids), ``_jaccard`` (1.0). A
            representative has ``_rep == _doc``.
        """
        cols = list(dict.fromkeys([DOC, self.id_field, self.text_field, *self.keep.columns()]))
        hashed = docs[cols].map_partitions(_add_md5, self.text_field, meta={**docs[cols]._meta.dtypes.to_dict(), _MD5: "str"})
        # Groups are small next to the corpus: they are formed on the host (pandas) whatever the
        # backend, after the digest and the shuffle ran where the documents are.
        return hashed.shuffle(_MD5).map_partitions(
            _exact_groups, self.text_field, self.id_field, self.keep, meta=to_host(group_meta(docs[self.id_field]._meta))
        )


def _add_md5(part: pd.DataFrame, text_field: str) -> pd.DataFrame:
    return part.assign(**{_MD5: md5_hex(part[text_field])})


def _exact_groups(part: pd.DataFrame, text_field: str, id_field: str, keep: KeepPolicy) -> pd.DataFrame:
    part = keep.sort(to_host(part[part[_MD5].duplicated(keep=False)]), [_MD5], text_field)
    # Group on the text itself inside each digest group: byte equality, not digest equality.
    first = part.groupby([_MD5, text_field], sort=False)[[DOC, id_field]].transform("first")
    size = part.groupby([_MD5, text_field], sort=False)[DOC].transform("size")
    return group_frame(part[DOC], first[DOC], part[id_field], first[id_field], 1.0)[(size > 1).to_numpy()]
