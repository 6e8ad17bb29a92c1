"""Exact dedup: md5 of the text bytes, shuffle of the digests, byte equality confirmed per group."""

import dask.dataframe as dd
import pandas as pd

from curate.backend import md5_hex, to_host
from curate.dedup.groups import group_frame, group_meta
from curate.dedup.keep import KeepPolicy
from curate.dedup.keys import select
from curate.dedup.stages import Stage, build_now
from curate.schema import DOC

MD5 = "_md5"


class ExactDedup:
    """Find groups of documents with byte-identical text.

    Two steps, so that texts never travel with the digests:

    1. :meth:`candidates`: each document's UTF-8 text is hashed with md5, chunked above 4 KiB
       (see :mod:`curate.kernels.md5`; the same digest on both backends) where it lies, and only ``(_doc,
       digest)`` pairs are shuffled on the digest; documents whose digest is shared are the
       candidates.
    2. :meth:`groups`: the candidates' rows are selected where they lie and only they, with their
       texts (a small share of the corpus), are shuffled on the digest; within a digest group only documents whose text is byte-for-byte
       equal are grouped, so a digest collision never merges different texts. The keep policy
       picks each group's representative.

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

    def columns(self) -> list[str]:
        """The document columns :meth:`groups` reads: ``_doc``, the id, the text and the keep policy's column."""
        return list(dict.fromkeys([DOC, self.id_field, self.text_field, *self.keep.columns()]))

    def candidates(self, docs: dd.DataFrame) -> dd.DataFrame:
        """Documents whose md5 digest another document shares.

        Parameters
        ----------
        docs : dask.dataframe.DataFrame
            Columns ``_doc`` (int64, unique) and the text field.

        Returns
        -------
        dask.dataframe.DataFrame
            ``_doc`` (int64) and ``_md5`` (str, 32 hex digits), one row per candidate; partitioned
            by digest. Only these two columns are shuffled: about 50 bytes per document.
        """
        meta = {DOC: "int64", MD5: "str"}  # a description: Dask builds it in the partitions' backend
        digests = docs[[DOC, self.text_field]].map_partitions(_digests, self.text_field, meta=meta)
        return digests.shuffle(MD5).map_partitions(_shared, meta=meta)

    def groups(self, members: dd.DataFrame) -> dd.DataFrame:
        """Duplicate groups of the candidates, confirmed on their bytes.

        Parameters
        ----------
        members : dask.dataframe.DataFrame
            The candidates of :meth:`candidates` with their :meth:`columns` (``_md5`` and the
            documents' ``_doc``, id, text and keep column), in any partitioning.

        Returns
        -------
        dask.dataframe.DataFrame
            One row per document in a group of two or more: ``_doc``, ``_rep`` (the kept
            document's ``_doc``), ``_id``, ``_rep_id`` (their ids), ``_jaccard`` (1.0). A
            representative has ``_rep == _doc``. Pandas partitions whatever the backend: groups
            are small next to the corpus.
        """
        members = members[[*self.columns(), MD5]]
        return members.shuffle(MD5).map_partitions(
            _exact_groups, self.text_field, self.id_field, self.keep, meta=to_host(group_meta(members[self.id_field]._meta))
        )

    def run(self, docs: dd.DataFrame, stage: Stage = build_now, candidates: dd.DataFrame | None = None) -> dd.DataFrame:
        """Duplicate groups of ``docs``, each step through ``stage`` (see :mod:`curate.dedup.stages`).

        :meth:`candidates` (unless given: ``curate dedup`` finds them in its first pass over the
        input), then :meth:`groups` of the candidates' rows, selected where they lie
        (:func:`curate.dedup.keys.select`), so that only their texts are shuffled.

        Parameters
        ----------
        docs : dask.dataframe.DataFrame
            A document frame (:mod:`curate.dedup.keys`) with :meth:`columns`.
        stage : callable, default=:func:`curate.dedup.stages.build_now`
        candidates : dask.dataframe.DataFrame, optional
            :meth:`candidates` of ``docs``.
        """
        if candidates is None:
            candidates = self.candidates(docs)
        return stage("exact", {"keep": str(self.keep)}, lambda: self.groups(select(docs[self.columns()], candidates, (MD5,))))

    def __call__(self, docs: dd.DataFrame) -> dd.DataFrame:
        """Duplicate groups of ``docs`` (a document frame with :meth:`columns`), lazily: :meth:`run`."""
        return self.run(docs)


def _digests(part, text_field: str):
    return type(part)({DOC: part[DOC], MD5: md5_hex(part[text_field])})


def _shared(part):
    return part[part[MD5].duplicated(keep=False)]


def _exact_groups(part: pd.DataFrame, text_field: str, id_field: str, keep: KeepPolicy) -> pd.DataFrame:
    part = keep.sort(to_host(part), [MD5], text_field)
    # Group on the text itself inside each digest group: byte equality, not digest equality.
    first = part.groupby([MD5, text_field], sort=False)[[DOC, id_field]].transform("first")
    size = part.groupby([MD5, text_field], sort=False)[DOC].transform("size")
    return group_frame(part[DOC], first[DOC], part[id_field], first[id_field], 1.0)[(size > 1).to_numpy()]
