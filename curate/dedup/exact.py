"""Exact dedup: two digests and the length of each text, computed where it lies; one shuffle of those."""

import dask.dataframe as dd
import pandas as pd

from curate.backend import byte_lengths, host_step, md5_hex, sha256_hex, to_host
from curate.dedup.groups import group_frame, group_meta
from curate.dedup.keep import KeepPolicy
from curate.dedup.keys import require_columns
from curate.dedup.stages import Stage, build_now
from curate.schema import DOC, LENGTH, MD5, SHA256


class ExactDedup:
    """Find groups of documents with byte-identical text; no text is shuffled.

    1. :meth:`candidates`: where each document lies, its UTF-8 text gets two independent
       digests, md5 and SHA-256 (chunked above 4 KiB, :mod:`curate.kernels.digests`; the same
       on both backends), and its length in bytes. Only these, the key, the id and the keep
       policy's column (some 150 bytes a document) are shuffled on the md5; documents whose md5
       another shares are the candidates.
    2. :meth:`groups`: within each md5 group, documents are grouped only where SHA-256 and length
       agree too, so an md5 collision never merges different texts (no pair of texts colliding in
       md5 and SHA-256 at once is known). The keep policy picks each group's representative.

    Parameters
    ----------
    text_field : str, default="text"
    id_field : str, default="id"
    keep : KeepPolicy or str, default=KeepPolicy("first")
        A policy or its spec (``"longest"``, ``"max:date"``: :meth:`KeepPolicy.parse`).

    Examples
    --------
    >>> groups = ExactDedup()(docs)        # doctest: +SKIP
    >>> removed = groups[groups._doc != groups._rep]   # doctest: +SKIP
    """

    def __init__(self, *, text_field: str = "text", id_field: str = "id", keep: KeepPolicy | str = KeepPolicy()):
        self.text_field, self.id_field, self.keep = text_field, id_field, KeepPolicy.parse(keep)

    def __repr__(self) -> str:
        return f"ExactDedup(keep={self.keep})"

    def columns(self) -> list[str]:
        """The document columns :meth:`candidates` reads: ``_doc``, the id, the text and the keep policy's column."""
        return list(dict.fromkeys([DOC, self.id_field, self.text_field, *self.keep.columns()]))

    def candidates(self, docs: dd.DataFrame) -> dd.DataFrame:
        """Fingerprints of the documents whose md5 digest another document shares.

        Parameters
        ----------
        docs : dask.dataframe.DataFrame
            A document frame with :meth:`columns`.

        Returns
        -------
        dask.dataframe.DataFrame
            ``_doc`` (int64), the id, the keep policy's column, ``_md5`` (str, 32 hex digits),
            ``_sha256`` (str, 64 hex digits), ``_length`` (int64, UTF-8 bytes); one row per
            candidate, partitioned by md5 (every document of an md5 group in one partition).
        """
        kept = [c for c in self.columns() if c != self.text_field]
        meta = {
            **docs._meta[kept].dtypes.to_dict(),
            MD5: "str",
            SHA256: "str",
            LENGTH: "int64",
        }  # built in the partitions' backend
        fingerprints = docs[self.columns()].map_partitions(_fingerprints, kept, self.text_field, meta=meta)
        return fingerprints.shuffle(MD5).map_partitions(_shared, meta=meta)

    def groups(self, candidates: dd.DataFrame) -> dd.DataFrame:
        """Duplicate groups of the candidates, each partition on its own.

        Parameters
        ----------
        candidates : dask.dataframe.DataFrame
            :meth:`candidates`, in its partitioning.

        Returns
        -------
        dask.dataframe.DataFrame
            One row per document in a group of two or more: ``_doc``, ``_rep`` (the kept
            document's ``_doc``), ``_id``, ``_rep_id`` (their ids), ``_jaccard`` (1.0). A
            representative has ``_rep == _doc``. Pandas partitions whatever the backend: groups
            are small next to the corpus.
        """
        meta = to_host(group_meta(candidates[self.id_field]._meta))
        return candidates.map_partitions(
            _exact_groups, self.id_field, self.keep, meta=meta, token=host_step(_exact_groups)
        )

    def run(self, docs: dd.DataFrame, stage: Stage = build_now, candidates: dd.DataFrame | None = None) -> dd.DataFrame:
        """Duplicate groups of ``docs`` through ``stage`` (see :mod:`curate.dedup.stages`).

        Parameters
        ----------
        docs : dask.dataframe.DataFrame
            A document frame (:mod:`curate.dedup.keys`) with :meth:`columns`.
        stage : callable, default=:func:`curate.dedup.stages.build_now`
        candidates : dask.dataframe.DataFrame, optional
            :meth:`candidates` of ``docs``, unless computed here: ``curate dedup`` finds them in
            its first pass over the input.
        """
        return stage(
            "exact",
            self.keep.stage_params(),
            lambda: self.groups(self.candidates(docs) if candidates is None else candidates),
        )

    def __call__(self, docs: dd.DataFrame) -> dd.DataFrame:
        """Duplicate groups of ``docs`` (a document frame with :meth:`columns`), lazily: :meth:`run`.

        Raises
        ------
        ValueError
            If ``docs`` lacks one of :meth:`columns` (``_doc``: :func:`curate.add_doc_keys`).
        """
        require_columns(docs, self.columns())
        return self.run(docs)


def _fingerprints(part, kept: list[str], text_field: str):
    text = part[text_field]
    return part[kept].assign(**{MD5: md5_hex(text), SHA256: sha256_hex(text), LENGTH: byte_lengths(text)})


def _shared(part):
    return part[part[MD5].duplicated(keep=False)]


def _exact_groups(part: pd.DataFrame, id_field: str, keep: KeepPolicy) -> pd.DataFrame:
    part = keep.sort(to_host(part), [MD5])
    # Within an md5 group, only texts that also agree in SHA-256 and length are the same text.
    same = part.groupby([MD5, SHA256, LENGTH], sort=False)
    first = same[list(dict.fromkeys([DOC, id_field]))].transform("first")  # one column when the keys are the ids
    if (fixed := keep.fixed(part[DOC])) is not None:  # a reference document is its own representative
        first = first.mask(pd.Series(fixed, index=part.index), part[first.columns])
    # A group's rows: its representative's and those pointing to it (a reference copy alone is none).
    size = first[DOC].map(first[DOC].value_counts()) if fixed is not None else same[DOC].transform("size")
    return group_frame(part[DOC], first[DOC], part[id_field], first[id_field], 1.0)[(size > 1).to_numpy()]
