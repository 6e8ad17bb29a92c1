"""The Python API: one lazy call from a Dask DataFrame of documents to the kept documents.

:func:`deduplicate` runs what ``curate dedup`` runs (exact dedup, fuzzy dedup on what it kept,
resolving the two) through the same stage functions (:meth:`curate.dedup.ExactDedup.run`,
:meth:`curate.dedup.FuzzyDedup.run`, :func:`curate.dedup.resolve.resolve`), built into one lazy
graph instead of written stage by stage: nothing runs until the caller computes.
"""

import difflib
import warnings
from dataclasses import dataclass, field, replace

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
from dask.dataframe.dask_expr._collection import FrameBase
from pydantic import ValidationError

from curate.backend import first_non_string, is_missing, on_host, shown, to_host
from curate.cluster import current_client, local_shuffles, one_task_per_gpu, shuffles_need_workers
from curate.config import ClusterConfig, FuzzyConfig, IOConfig, RunConfig, field_problem, peer_answer, settings_named
from curate.dask_fixes import fused
from curate.dedup.exact import ExactDedup
from curate.dedup.fuzzy import FuzzyDedup
from curate.dedup.keep import KeepPolicy, dictionary_decoded
from curate.dedup.keys import add_doc_keys, align, doc_divisions, drop, fixed_partitions, row_keys, with_doc_keys
from curate.dedup.resolve import AccountingError, empty_groups, resolve
from curate.io.read import split_rejected
from curate.io.rejected import later_occurrences, mark_listed
from curate.io.write import count_rows
from curate.schema import DOC, POSITION_BITS, REJECT_COLUMNS

# Options of the call: the config's field names that concern documents already in a frame.
_TOP = ("keep",)
_IO = ("id_field", "text_field")
# What a pipeline does in place of curate dedup's settings of files and cluster.
_INSTEAD = {
    "backend": 'give cudf partitions (dask.config.set({"dataframe.backend": "cudf"}) as the frame is made)',
    "on_error": 'read_documents(..., on_error="skip") rejects bad records and the result lists them',
    "blocksize": "read_documents(..., blocksize=...) or the frame's own partitions decide",
    "files_per_partition": "read_documents(..., files_per_partition=...) or the frame's own partitions decide",
    "identify_only": "dask.compute(result.removed, result.duplicates) computes the tables alone",
    "cache_input": "persist the frame (docs.persist()) before deduplicate, if it fits",
    "files": "write the frames with result.compute_with(result.kept.to_parquet(..., compute=False), ...)",
    "cluster": "start your own distributed.Client (LocalCluster, LocalCUDACluster) before computing",
}


@dataclass
class Deduplication:
    """The result of :func:`deduplicate`: lazy frames, and their counts once computed.

    The frames are lazy Dask collections: compute or write them while the client they were built
    with runs. Computed after it closed, they fail with Dask's own error (``P2P ... failed during
    transfer phase``); :meth:`compute` says why. Build the result again with the new client.

    Attributes
    ----------
    kept : dask.dataframe.DataFrame
        The documents kept: the input's columns, index, partitions and order, with unknown
        divisions (``kept.known_divisions`` is False).
    removed : dask.dataframe.DataFrame
        One row per removed document, in input order: ``_doc`` (int64, curate's key), ``id``,
        ``kind`` ("exact"/"fuzzy"), ``representative`` (the kept document's id) and ``jaccard``
        (float64, its similarity with the representative; 1.0 for exact copies, NaN without
        verification), as ``removed.parquet``. Its index (and ``duplicates``') is a row number
        within each partition, not unique: select by ``_doc`` or ``id``.
    duplicates : dask.dataframe.DataFrame
        One row per document per duplicate group: ``_doc``, ``id``, ``group`` (the group's
        representative id), ``kind``, ``kept`` (bool), ``jaccard``, as ``duplicates.parquet``
        (which also locates each document in the input files).
    counts : dict
        Filled by :meth:`compute` or :meth:`compute_with` (ints): ``documents`` (rows of ``docs``), ``empty`` (documents
        whose text is empty or null, as ``summary.json``'s ``counts.input.empty``), ``kept``, ``removed``,
        ``exact_removed``, ``fuzzy_removed``; with fuzzy dedup (``mode`` "fuzzy" or "both")
        ``candidate_edges``, ``verified_edges`` (not without verification), ``member_pairs``,
        ``buckets_over_cap``; ``rejected`` for a skip-mode read; ``reference`` (documents of
        ``reference``, in ``documents`` too, not in ``kept``) with one. Empty before.
    config : RunConfig
        The configuration the call resolved.
    rejected : dask.dataframe.DataFrame or None
        For a frame read with ``read_documents(..., on_error="skip")``: one row per rejected
        record (unreadable, or an id's later occurrence), ``_doc`` and ``_line``, ``_kind``,
        ``_field``, ``_reason``, ``_record`` (bytes: the line as read, or the row as JSON); not
        computed by :meth:`compute`. None for other frames.
    """

    kept: dd.DataFrame
    removed: dd.DataFrame
    duplicates: dd.DataFrame
    config: RunConfig
    rejected: dd.DataFrame | None = None
    counts: dict = field(default_factory=dict)
    _lazy_counts: dict = field(default_factory=dict, repr=False)
    _needs_workers: bool = field(default=False, repr=False)  # built with P2P shuffles (shuffles_need_workers)
    # the lazy check of an object id column across partitions (_checked_values)
    _id_kinds: object = field(default=None, repr=False)

    def compute(self, **kwargs):
        """Compute the three tables and the counts in one pass (each stage runs once).

        Parameters
        ----------
        **kwargs
            Passed to :func:`dask.compute`. For a local scheduler where a client exists, set it
            with ``dask.config.set(scheduler=...)`` around :func:`deduplicate` too: Dask fixes
            the shuffle method (P2P wherever a client exists) when it builds the graph. A result
            built where no client was computes on either.

        Returns
        -------
        kept, removed, duplicates : pandas (or cudf) DataFrames

        Raises
        ------
        AccountingError
            If input documents != kept + removed.
        ValueError
            If the frames were built for a client (P2P shuffles) and ``kwargs`` or ``dask.config``
            now name a local scheduler, or that client is closed; if the keep policy's column is
            an object column (pandas') of values that do not order (an int and a str), naming it;
            on the input errors :func:`deduplicate` lists (ids of several types, a text that is
            not a string, repeated or null ids).
        """
        return self.compute_with(self.kept, self.removed, self.duplicates, **kwargs)

    def compute_with(self, *collections, **kwargs) -> tuple:
        """Compute ``collections`` made from this result (its frames' writes, most often) and the
        counts in one pass: each stage runs once, and the counts are filled and checked as by
        :meth:`compute`, without bringing the documents to this process.

        For example, with ``write_index=False`` (else Dask writes the frames' index as
        ``__null_dask_index__``)::

            result.compute_with(
                result.kept.to_parquet("out/kept", compute=False, write_index=False),
                result.removed.to_parquet("out/removed", compute=False, write_index=False),
            )

        Parameters
        ----------
        *collections
            Dask DataFrame collections made from this result's frames (``kept``, ``removed``,
            ``duplicates``, ``rejected``): a ``to_parquet(..., compute=False)`` write, a
            ``map_partitions``, a reduction. They are fused with the counts' graph, as
            :meth:`compute` fuses its frames: their shared stages run once.
        **kwargs
            Passed to :func:`dask.compute` (see :meth:`compute`).

        Returns
        -------
        tuple
            The collections' results, in their order (``None`` for a ``to_parquet`` write).

        Raises
        ------
        TypeError
            If a collection is not a Dask DataFrame collection: ``to_json(..., compute=False)``
            gives delayed objects, which Dask cannot fuse with the stages they share (they
            would run twice).
        ValueError
            If a collection is made from none of this result's frames (another result's, whose
            counts these are not); as :meth:`compute`.
        AccountingError
            As :meth:`compute`.
        """
        ours = {
            frame.expr._name for frame in (self.kept, self.removed, self.duplicates, self.rejected) if frame is not None
        }
        for i, collection in enumerate(collections):
            if not isinstance(collection, FrameBase):
                raise TypeError(
                    f"collection {i} is a {type(collection).__name__}, not a Dask DataFrame collection: compute_with "
                    "fuses frames with the counts' graph (to_json(..., compute=False) gives delayed objects, whose "
                    "stages would run twice: write JSONL with curate.io.write_documents(kept, path, 'jsonl'), or Parquet)"
                )
            if not any(expr._name in ours for expr in collection.expr.walk()):
                raise ValueError(
                    f"collection {i} is made from none of this result's frames (kept, removed, duplicates, rejected): "
                    "another result's, whose counts these are not? Call compute_with on the result it comes from"
                )
        scheduler = kwargs.get("scheduler")
        with dask.config.set({} if scheduler is None else {"scheduler": scheduler}):
            if current_client() is None and self._needs_workers:
                if dask.config.get("scheduler", None) is None:  # no scheduler named: the client is gone
                    raise ValueError(
                        "this result was built for a distributed client, which is now closed (its P2P "
                        "shuffles run only on that client's workers); build it again with a running "
                        "client, or with none to compute on local threads"
                    )
                raise ValueError(
                    "this result was built for the distributed client (P2P shuffles, which run only on its "
                    "workers); to compute it on a local scheduler, build it there too: "
                    "with dask.config.set(scheduler=...): curate.deduplicate(...).compute()"
                )
            # A result built where no client was picks its shuffles now: beside a client that
            # does not compute it, disk ones (local_shuffles), not P2P.
            with local_shuffles(), one_task_per_gpu(self.kept):
                try:
                    results = dask.compute(*fused([*collections, *self._lazy_counts.values()]), **kwargs)
                except RuntimeError as err:
                    found = self._id_kinds_error(err) or self._unordered(err)
                    if found is None:
                        raise
                    raise found from err
        counts = results[len(collections) :]
        self.counts = {name: int(value) for name, value in zip(self._lazy_counts, counts)}
        self._check()
        return results[: len(collections)]

    def _id_kinds_error(self, err: RuntimeError) -> ValueError | None:
        """The id check's own error where a P2P shuffle failed on the id column before the check
        ran: an object column of several types (an int partition and a str one) converts to no
        one Arrow type."""
        cause, id_field = err.__cause__, self.config.io.id_field
        if self._id_kinds is None or not isinstance(cause, (pa.ArrowInvalid, pa.ArrowTypeError)):
            return None
        if f"column {id_field} " not in str(cause) and f"Field {id_field} " not in str(cause):
            return None
        try:
            self._id_kinds.compute()  # a pass over the ids (no shuffle), which raises the check's error
        except ValueError as found:
            return found
        return None

    def _unordered(self, err: RuntimeError) -> ValueError | None:
        """The keep column's error where a P2P shuffle failed on it: an object column of several
        types (an int and a str) converts to no Arrow type, in one partition or across them."""
        column = KeepPolicy.parse(self.config.keep).column
        cause = err.__cause__
        if column is None or not isinstance(cause, (pa.ArrowInvalid, pa.ArrowTypeError)):
            return None
        if f"column {column} " not in str(cause) and f"Field {column} " not in str(cause):
            return None
        return ValueError(
            f"keep={self.config.keep!r}: column {column!r} holds values of several types, which do not order "
            f"(Arrow: {'; '.join(shown(str(arg), 200) for arg in cause.args)})"
        )

    def _check(self) -> None:
        n = self.counts
        rejected, reference = n.get("rejected", 0), n.get("reference", 0)
        if n["documents"] != n["kept"] + reference + n["removed"] + rejected:
            plus = f" + {reference} reference" if "reference" in n else ""
            raise AccountingError(
                f"{n['documents']} input documents != {n['kept']} kept{plus} + {n['removed']} removed + {rejected} rejected"
            )
        if n.pop("reference removed", 0):
            raise AccountingError("a reference document was removed")


@local_shuffles()
def deduplicate(
    docs: dd.DataFrame,
    *,
    mode: str | None = None,
    config: RunConfig | FuzzyConfig | None = None,
    reference: dd.DataFrame | None = None,
    **options,
) -> Deduplication:
    """Remove exact and near-duplicate documents from a Dask DataFrame, lazily.

    Runs exact dedup (md5 digests, confirmed by SHA-256 and length), then fuzzy dedup (MinHash + LSH,
    verified by the true Jaccard similarity) on what exact dedup kept, then resolves the two,
    exactly as ``curate dedup`` does with the same options, and gives the same kept documents.
    Building the result computes nothing; call :meth:`Deduplication.compute` (or compute or
    persist its frames with your own client).

    Parameters
    ----------
    docs : dask.dataframe.DataFrame
        The documents: pandas or cudf partitions, any partitioning, any index. A text column
        (``text_field``, default ``text``; strings, null read as empty) and, optionally, an id
        column (``id_field``, default ``id``; without one, ids are curate's keys ``_doc``). A
        frame from :func:`curate.io.read_documents` (or :func:`curate.add_doc_keys`) keeps its
        ``_doc`` keys; any other is keyed here (partition << 40 | row). A skip-mode read
        (``read_documents(..., on_error="skip")``) has its rejected records left out and listed
        in ``rejected``, as ``curate dedup --on-error skip`` does; so do such reads concatenated
        and keyed anew (``dd.concat(reads).drop(columns="_doc")``): every row whose ``_kind`` is
        set is a rejected record, listed by its position as ``_doc``.
    mode : {"exact", "fuzzy", "both"}, optional
        Default: ``config``'s mode, else "both".
    config : RunConfig or FuzzyConfig, optional
        A whole configuration (e.g. from :func:`curate.config.load_config`, which reads a YAML
        file as ``curate dedup --config`` does) or its fuzzy part; ``mode`` and ``options``
        override it.
    reference : dask.dataframe.DataFrame, optional
        Documents already deduplicated and published (``curate dedup --reference``), with the
        text column, and the id and keep columns where those are used: each is its group's
        representative before any of ``docs``', whatever ``keep`` says, and is never removed
        (two that are copies of each other both stay); ``kept`` holds ``docs``' documents only.
        Both frames are then keyed anew (their ``_doc`` columns dropped), the reference's
        partitions first, so ``removed`` and ``duplicates`` name documents by those keys, and
        ``kept`` holds ``docs``' columns without ``_doc``. Ids must be unique across both.
    **options
        Configuration fields by name: ``keep`` ("first", "longest", "max:COLUMN", "min:COLUMN"),
        ``text_field``, ``id_field`` (None: documents are named by their keys ``_doc`` even
        where ``docs`` has an ``id`` column) and every field of :class:`curate.config.FuzzyConfig`
        (``threshold``, ``ngram``, ``width``, ``num_bands``, ``rows_per_band``, ``seed``, ...).

    Returns
    -------
    Deduplication
        ``kept``, ``removed`` and ``duplicates`` (lazy), and ``counts`` once computed.

    Raises
    ------
    TypeError
        On an option that is not a configuration field, or one that configures reading or
        writing files or the cluster (``blocksize``, ``identify_only``, ``memory_limit``, ...), naming it; on a ``config`` of
        another type; on ``docs`` that is not a Dask DataFrame (a pandas one: ``dd.from_pandas``).
    ValueError
        On an invalid value (naming the field), a column the options name that ``docs`` lacks
        (``text_field='body': no such column ...``), an id column that is the text column, a
        text column that does not hold strings, or a ``_doc`` column that is not curate's key
        (when computed, one that is not the index, increasing, in the frame's divisions).
        When computed, on every scheduler, naming the row and partition (or ``_doc``) and
        quoting at most 40 characters of the value: on a repeated or null id, except in a
        skip-mode read, where later occurrences are rejected; on an object column (pandas') of
        ids that are not all of one type (an int and a str, in one partition or across them)
        or not scalars (tuples, lists): a P2P shuffle converts them to Arrow, which holds one
        type per column; on an object column whose values are not all strings as the text, or
        do not order as the keep policy's column (an int and a str, lists).

    Notes
    -----
    Connected components of the verified edges are solved in one task here (nothing may be
    computed while the graph is built, and the distributed algorithm iterates until its labels
    settle); past ``local_components_max_edges`` edges that task stops with an error, and
    ``curate dedup`` / :func:`curate.pipeline.dedup`, which switch to distributed components, are
    the way.

    Examples
    --------
    >>> result = curate.deduplicate(docs, threshold=0.8)          # doctest: +SKIP
    >>> kept, removed, duplicates = result.compute()              # doctest: +SKIP
    """
    keys_as_ids = "id_field" in options and options["id_field"] is None
    run = _config(mode, config, {k: v for k, v in options.items() if not (keys_as_ids and k == "id_field")})
    io, keep = run.io, KeepPolicy.parse(run.keep)
    if run.mode != "exact" and (weak := run.fuzzy.weak_bands("keyword")):
        warnings.warn(weak, stacklevel=3)  # the caller of deduplicate, under its decorator
    if run.mode == "exact":
        given = [k for k in options if k in FuzzyConfig.model_fields]
        from_config = [f"fuzzy.{k}" for k in run.fuzzy.changed() if k not in given]  # config='s own
        if given or from_config:
            names = settings_named([f"{k}=" for k in given], from_config, "config's")
            warnings.warn(f"{names} fuzzy dedup, which mode='exact' does not run", stacklevel=3)
    _check_columns(docs, io, keep, io.id_field_given)
    columns = list(docs.columns)
    n_reference = 0  # the reference's partitions, first
    if reference is not None:
        _check_columns(reference, io, keep, io.id_field_given, "reference")
        docs, n_reference = _after_reference(reference, docs)
        columns = [c for c in columns if c != DOC]
        keep = replace(keep, reference=n_reference << POSITION_BITS)
    own_keys = DOC not in docs.columns
    if own_keys:
        docs = fixed_partitions(docs)  # the keys number its partitions and rows, and kept drops by them
    keyed = with_doc_keys(docs) if own_keys else docs
    divisions = doc_divisions(keyed)
    if not own_keys:  # a user's own _doc column would fail deep inside a stage
        keyed = keyed.map_partitions(_checked_keys, divisions, partition_info=True, meta=keyed._meta)
    id_field = io.id_field if io.id_field in keyed.columns and not keys_as_ids else DOC
    keyed = dictionary_decoded(_frame_categories(keyed, keep), keep)
    keyed, id_kinds = _checked_values(keyed, io.text_field, id_field, own_keys)
    exact = ExactDedup(text_field=io.text_field, id_field=id_field, keep=keep)
    fuzzy = FuzzyDedup(run.fuzzy, text_field=io.text_field, id_field=id_field, keep=keep)
    counts = {"documents": count_rows(keyed)}
    keyed, rejected, ids_checked = _checked_ids(keyed, id_field, own_keys)
    if n_reference:
        counts["reference"] = count_rows(keyed.partitions[:n_reference])
    checks = [check for check in (id_kinds, ids_checked) if check is not None]
    if rejected is not None:
        counts["rejected"] = count_rows(rejected)
    counts["empty"] = (keyed[io.text_field].fillna("").str.len() == 0).sum()  # null reads as empty
    # Host tables, as the host steps that make the groups here give them (curate dedup reads
    # its group tables back in the run's backend).
    exact_groups = fuzzy_groups = empty_groups(on_host(keyed), id_field)
    left = keyed
    if run.mode in ("exact", "both"):
        exact_groups = exact.run(keyed)
        left = drop(keyed, exact_groups[exact_groups._doc != exact_groups._rep][[DOC]])
    if run.mode in ("fuzzy", "both"):
        found = fuzzy.run(left)
        fuzzy_groups = found["groups"]
        counts["candidate_edges"] = count_rows(found["candidates"])
        if run.fuzzy.verify:  # without verification, no edge was verified
            counts["verified_edges"] = count_rows(found["edges"])
        counts["member_pairs"] = count_rows(found["member_pairs"]) if "member_pairs" in found else 0
        counts["buckets_over_cap"] = found["buckets_over_cap"]
    removed, duplicates = resolve(exact_groups, fuzzy_groups, divisions)
    if checks:  # every table (and kept, made from removed) waits for the checks
        removed, duplicates = _after(removed, checks), _after(duplicates, checks)
    if id_field == DOC:  # no id column: the keys are the ids
        removed, duplicates = removed.assign(id=removed[DOC]), duplicates.assign(id=duplicates[DOC])
    if own_keys:  # kept as given; a re-keyed skip-mode read's rejected records are not documents
        gone = removed[[DOC]] if rejected is None else dd.concat([removed[[DOC]], rejected[[DOC]]])
        kept = _drop_positions(docs, gone, divisions)
        kept = kept if rejected is None else kept.drop(columns=[c for c in REJECT_COLUMNS if c in kept.columns])
    else:
        kept = drop(keyed, removed)
    if n_reference:  # docs' documents only, in docs' columns
        # Fixed first: a selection of partitions moved below the drop numbered them from 0 (all kept).
        kept = fixed_partitions(kept).partitions[n_reference:]
        kept = kept[[c for c in columns if c in kept.columns]]
        counts["reference removed"] = count_rows(removed[removed[DOC] < keep.reference])
    counts |= {
        "kept": count_rows(kept),
        "removed": count_rows(removed),
        "exact_removed": (removed.kind == "exact").sum(),
        "fuzzy_removed": (removed.kind == "fuzzy").sum(),
    }
    return Deduplication(
        kept,
        removed,
        duplicates,
        run,
        rejected,
        _lazy_counts=counts,
        _needs_workers=shuffles_need_workers(),
        _id_kinds=id_kinds,
    )


# What pandas infers for an object column of values of one type, which Arrow holds as one column
# (a P2P shuffle converts partitions to Arrow; an int and a str, or tuples, stop it).
_ONE_KIND = {
    "empty",
    "string",
    "bytes",
    "integer",
    "floating",
    "boolean",
    "decimal",
    "datetime",
    "datetime64",
    "date",
    "time",
    "timedelta",
    "timedelta64",
}


def _checked_values(keyed: dd.DataFrame, text_field: str, id_field: str, own_keys: bool):
    """``keyed`` checking its object (pandas') text and id columns in each partition, and the
    check across partitions of an object id column.

    Texts must be strings, ids of one type: each partition raises where it holds another
    value, before any shuffle reads it. An object id column whose partitions each hold one type
    but not all the same one (ints in one, strings in another) is refused by the returned check
    (a lazy int), on every scheduler: a P2P shuffle would stop on it, the local ones would not.

    Returns
    -------
    documents : dask.dataframe.DataFrame
    check : dask Scalar or None
        None unless the id column is an object column.
    """
    meta = keyed._meta
    text = text_field if meta[text_field].dtype == object else None
    ids = id_field if id_field != DOC and meta[id_field].dtype == object else None
    if text is None and ids is None:
        return keyed, None
    keyed = keyed.map_partitions(_checked_part, text, ids, own_keys, meta=meta)
    if ids is None:
        return keyed, None
    kinds = keyed[[DOC, ids]].reduction(
        chunk=_id_kind,
        aggregate=_refuse_kinds,
        chunk_kwargs={"id_field": ids, "own_keys": own_keys},
        aggregate_kwargs={"id_field": ids},
        split_every=False,
        meta=(None, "int64"),
    )
    return keyed, kinds


def _checked_part(part, text_field: str | None, id_field: str | None, own_keys: bool):
    """``part`` if its text column (if named) holds strings and its id column (if named) ids of one type."""
    if text_field is not None and pd.api.types.infer_dtype(part[text_field], skipna=True) not in ("string", "empty"):
        values, docs = part[text_field].to_numpy(), part[DOC].to_numpy()
        i = first_non_string(values)
        raise ValueError(
            f"text column {text_field!r} holds {type(values[i]).__name__} {shown(values[i])} "
            f"({_where(int(docs[i]), own_keys)}): texts must be strings"
        )
    if id_field is not None and pd.api.types.infer_dtype(part[id_field], skipna=True) not in _ONE_KIND:
        values, docs = part[id_field].to_numpy(), part[DOC].to_numpy()
        present = [i for i, v in enumerate(values) if not is_missing(v)]
        first = values[present[0]]
        kind = pd.api.types.infer_dtype([first])
        if kind not in _ONE_KIND:  # tuples, lists, dicts
            raise ValueError(
                f"id column {id_field!r} holds {type(first).__name__} values ({_where(int(docs[present[0]]), own_keys)}: "
                f"{shown(first)}); ids must be strings, numbers or other scalars, all of one type"
            )
        i = next((i for i in present if pd.api.types.infer_dtype([values[i]]) != kind), present[-1])
        raise ValueError(
            f"id column {id_field!r} holds {type(first).__name__} and {type(values[i]).__name__} values "
            f"({_where(int(docs[i]), own_keys)}: {shown(values[i])}); ids must be of one type (.astype('string') makes them strings)"
        )
    return part


def _id_kind(part, id_field: str, own_keys: bool) -> pd.DataFrame:
    """A partition's kind of ids (checked by :func:`_checked_part`), the type and place of its first: one row, none without ids."""
    present = part[id_field].notna().to_numpy()
    if not present.any():
        return pd.DataFrame({"kind": [], "type": [], "at": [], "value": []}, dtype=object)
    i = int(np.argmax(present))
    value = part[id_field].iloc[i]
    return pd.DataFrame(
        {
            "kind": [pd.api.types.infer_dtype(part[id_field], skipna=True)],
            "type": [type(value).__name__],
            "at": [_where(int(part[DOC].iloc[i]), own_keys)],
            "value": [shown(value)],
        },
        dtype=object,
    )


def _refuse_kinds(kinds: pd.DataFrame, id_field: str) -> int:
    """Raise ValueError where the partitions' kinds of ids (:func:`_id_kind`, in partition order) differ."""
    other = kinds[kinds["kind"] != kinds["kind"].iloc[0]] if len(kinds) else kinds
    if len(other):
        first, row = kinds.iloc[0], other.iloc[0]
        raise ValueError(
            f"id column {id_field!r} holds {first['type']} and {row['type']} values ({row['at']}: {row['value']}, "
            f"after {first['type']} {first['value']} at {first['at']}); ids must be of one type (.astype('string') makes them strings)"
        )
    return 0


def _checked_ids(keyed: dd.DataFrame, id_field: str, own_keys: bool):
    """The documents, rejected records and id check of a keyed frame, as ``curate dedup`` has them.

    Ids must be unique and set. A skip-mode read (:func:`curate.io.read_documents` with
    ``on_error="skip"``) has its unreadable records as rows: they and every occurrence of an id
    after its first are rejected, not deduplicated. Any other frame's repeated or null ids are
    an error: the returned check (a lazy int) raises it, naming the ids, when it is computed.

    Returns
    -------
    documents : dask.dataframe.DataFrame
    rejected : dask.dataframe.DataFrame or None
        ``_doc`` and :data:`curate.schema.REJECT_COLUMNS` of the rejected records (skip mode).
    check : dask Scalar or None
    """
    # A skip-mode read's rows, its own keys dropped or not (concatenated reads are keyed anew).
    skip = "_kind" in keyed.columns
    if id_field == DOC:  # curate's keys: unique
        return (*split_rejected(keyed), None) if skip else (keyed, None, None)
    if not skip:
        later = later_occurrences(keyed, id_field)
        return keyed, None, later.map_partitions(_refuse_ids, id_field, own_keys, meta=(None, "int64")).sum()
    # Marking waits for every id, so the read's partitions are held (or spilled) until then;
    # curate dedup reads twice instead.
    later = align(later_occurrences(keyed[keyed["_kind"].isna()], id_field), doc_divisions(keyed))
    marked = dd.map_partitions(_mark_later, keyed, later, id_field, meta=keyed._meta, align_dataframes=False)
    return (*split_rejected(marked), None)


def _mark_later(part, later, id_field: str):
    reasons = [f"duplicate id {value!r}: first at _doc {first}" for value, first in zip(later[id_field], later._first)]
    return mark_listed(part, pd.DataFrame({DOC: later[DOC].to_numpy(), "reason": reasons}), id_field)


def _refuse_ids(later, id_field: str, own_keys: bool) -> int:
    """Raise ValueError for a partition of :func:`curate.io.rejected.later_occurrences` that holds any row."""
    if not len(later):
        return 0

    # A frame with curate's keys (read_documents) names records by _doc, which curate.io.locate turns into lines.
    locate = "" if own_keys else "; curate.io.locate(paths, keys) gives the file and line of read_documents' keys"
    null = later[id_field].isna()
    if null.any():
        raise ValueError(
            f"id_field={id_field!r}: {int(null.sum())} null id(s), e.g. at {_where(int(later[DOC][null].iloc[0]), own_keys)}; "
            f"ids must be set{locate}"
        )
    examples = later.drop_duplicates(id_field).head(5)
    listed = ", ".join(
        f"{shown(value)} (at {_where(int(first), own_keys)} and {_where(int(doc), own_keys)})"
        for value, first, doc in zip(examples[id_field], examples["_first"], examples[DOC])
    )
    raise ValueError(
        f"id_field={id_field!r}: ids appear more than once, e.g. {listed}; ids must be unique "
        f"(in a frame without an id column, curate's keys _doc name the documents){locate}"
    )


def _where(doc: int, own_keys: bool) -> str:
    """Where a document is, by its ``_doc``: its row and partition where the call keyed the frame."""
    return f"row {doc & ((1 << POSITION_BITS) - 1)} of partition {doc >> POSITION_BITS}" if own_keys else f"_doc {doc}"


def _frame_categories(keyed: dd.DataFrame, keep: KeepPolicy) -> dd.DataFrame:
    """``keyed`` whose categorical keep column has the frame's categories (its meta's, in their
    order) in every partition. A partition may list them otherwise, and the shuffled partitions
    that are sorted joined theirs in the order their pieces arrived: which document was kept
    changed from run to run (ordered categoricals failed pandas' union instead).

    Raises ValueError where the frame's categories are unknown (when called), or a partition
    holds a value outside them (when computed)."""
    dtype = keyed._meta[keep.column].dtype if keep.column else None
    if not isinstance(dtype, pd.CategoricalDtype):
        return keyed
    if not keyed[keep.column].cat.known:
        raise ValueError(
            f"keep={str(keep)!r}: column {keep.column!r} is categorical with categories unknown to Dask, "
            f"which order it; docs[{keep.column!r}].cat.as_known() finds them"
        )
    return keyed.map_partitions(_with_categories, keep, dtype, partition_info=True, meta=keyed._meta)


def _with_categories(part, keep: KeepPolicy, dtype: pd.CategoricalDtype, partition_info=None):
    values = part[keep.column]
    # (== between unordered categorical dtypes ignores the categories' order, by which they sort)
    if values.cat.categories.equals(dtype.categories) and values.cat.ordered == dtype.ordered:
        return part
    stray = values.notna().to_numpy() & ~values.isin(dtype.categories).to_numpy()
    if stray.any():
        raise ValueError(
            f"keep={str(keep)!r}: column {keep.column!r} holds {shown(values[stray].iloc[0])} in partition "
            f"{partition_info['number']}, not among the frame's categories {shown(list(dtype.categories))}, "
            "which order it; give every partition those categories"
        )
    # (astype would keep the partition's order, its dtype being "equal" to the frame's)
    return part.assign(**{keep.column: values.cat.set_categories(dtype.categories, ordered=dtype.ordered)})


def _checked_keys(part, divisions: tuple[int, ...], partition_info=None):
    """``part`` if its ``_doc`` keys are curate's: its index, increasing, in its division's range."""
    i = partition_info["number"]
    keys, index = to_host(part[DOC]).to_numpy(), to_host(part.index).to_numpy()
    low, high = divisions[i], divisions[i + 1]
    inside = len(keys) == 0 or (keys[0] >= low and (keys[-1] < high or (i == len(divisions) - 2 and keys[-1] == high)))
    if not (inside and np.array_equal(keys, index) and np.all(keys[1:] > keys[:-1])):
        raise ValueError(
            f"docs' {DOC!r} column is not curate's key (in partition {i}, it is not the index, increasing, in "
            f"[{low}, {high}]): drop the column (docs.drop(columns={DOC!r})) to have curate key the frame, or keep "
            "the frame as read_documents or add_doc_keys made it"
        )
    return part


def _after(frame: dd.DataFrame, checks: list) -> dd.DataFrame:
    """``frame`` unchanged, each partition computed after ``checks`` (which raise on bad input)."""
    return frame.map_partitions(_unchanged, *checks, meta=frame._meta)


def _unchanged(part, *_checks):
    return part


def _config(mode: str | None, config, options: dict) -> RunConfig:
    """``config`` updated by ``options``, validated once, as the CLI merges a YAML file and flags."""
    if isinstance(config, FuzzyConfig):
        config = RunConfig(fuzzy=config)
    elif not (config is None or isinstance(config, RunConfig)):
        raise TypeError(
            f"config must be a RunConfig or FuzzyConfig (e.g. curate.config.load_config(NAME_OR_FILE)), "
            f"got {type(config).__name__}; give single settings as options (threshold=0.7)"
        )
    # Only what was set: values the validation derived (the bands chosen for a threshold) are
    # derived again from the merged values.
    data = {} if config is None else config.model_dump(exclude_unset=True)
    # A YAML file shared with `curate dedup` may set its files and cluster: said, not followed
    # in silence (an `io.identify_only: true` still returned the kept frame without a word).
    # Values left at their defaults (a `curate config show` copy holds every key) configure nothing.
    io = {k: v for k, v in data.get("io", {}).items() if k not in _IO}
    unread = _changed(io, IOConfig().model_dump(), "io.") + _changed(
        data.get("cluster", {}), ClusterConfig().model_dump(), "cluster."
    )
    if unread:
        warnings.warn(
            f"deduplicate(): config's {', '.join(unread)} not read: they configure curate dedup's files and "
            "cluster, which the Python API leaves to you",
            stacklevel=4,  # the caller of deduplicate, under its decorator
        )
    if mode is not None:
        data["mode"] = mode
    for name, value in options.items():
        if name in _TOP:
            data[name] = value
        elif name in _IO:
            data.setdefault("io", {})[name] = value
        elif name in FuzzyConfig.model_fields:
            data.setdefault("fuzzy", {})[name] = value
        elif name in ("io", "cluster", "backend", *IOConfig.model_fields, *ClusterConfig.model_fields):
            kind = "cluster" if name == "cluster" or name in ClusterConfig.model_fields else "files"
            what = {"cluster": "the cluster", "files": "reading or writing files", "backend": "the partitions' library"}
            raise TypeError(
                f"deduplicate() option {name}= configures {what.get(name, what[kind])}, which the Python API "
                f"leaves to you: {_INSTEAD.get(name, _INSTEAD[kind])}"
            )
        else:
            known = ["mode", "config", *_TOP, *_IO, *FuzzyConfig.model_fields]
            close = difflib.get_close_matches(name, known, n=1)
            if answer := peer_answer(name, "keyword"):
                hint = f" ({answer})"
            else:
                hint = f" (did you mean {close[0]}=?)" if close else ""
            raise TypeError(
                f"deduplicate() got an unknown option {name}={hint}; "
                f"options are {', '.join(f'{k}=' for k in known[:5])} and FuzzyConfig's fields ({', '.join(f'{k}=' for k in known[5:])})"
            )
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:  # one line naming each field, as the CLI's message
        problems = "; ".join(field_problem(e["loc"], e["msg"]) for e in err.errors())
        raise ValueError(f"deduplicate(): {problems}") from None


def _changed(values: dict, defaults: dict, prefix: str) -> list[str]:
    """The dotted names of ``values`` (nested dicts too) that differ from ``defaults``."""
    found = []
    for name, value in values.items():
        if isinstance(value, dict) and isinstance(defaults.get(name), dict):
            found += _changed(value, defaults[name], f"{prefix}{name}.")
        elif name not in defaults or value != defaults[name]:
            found.append(f"{prefix}{name}")
    return found


def _after_reference(reference: dd.DataFrame, docs: dd.DataFrame) -> tuple[dd.DataFrame, int]:
    """One frame of ``reference``'s partitions, then ``docs``', neither keyed (to be keyed anew), and
    the number of ``reference``'s partitions."""
    frames = [
        (frame.drop(columns=DOC) if DOC in frame.columns else frame).clear_divisions() for frame in (reference, docs)
    ]
    return dd.concat(frames), reference.npartitions


def _check_columns(docs: dd.DataFrame, io, keep: KeepPolicy, id_given: bool, name: str = "docs") -> None:
    if not isinstance(docs, dd.DataFrame):
        wrap = " (dask.dataframe.from_pandas(docs, npartitions=N) makes one)" if isinstance(docs, pd.DataFrame) else ""
        raise TypeError(f"{name} must be a dask DataFrame, got {type(docs).__name__}{wrap}")
    columns = list(docs.columns)
    if io.text_field not in columns:
        raise ValueError(f"text_field={io.text_field!r}: no such column in {name} (columns: {columns})")
    dtype = docs._meta[io.text_field].dtype
    if not pd.api.types.is_string_dtype(dtype):
        categories = isinstance(dtype, pd.CategoricalDtype) or (
            isinstance(dtype, pd.ArrowDtype) and pa.types.is_dictionary(dtype.pyarrow_dtype)
        )
        fix = " (.astype(str) makes them strings)" if categories else ""
        raise ValueError(f"text_field={io.text_field!r}: the column holds {dtype}, not strings{fix}")
    if DOC in columns and docs._meta[DOC].dtype != np.int64:
        raise ValueError(
            f"{name} has a column {DOC!r} of {docs._meta[DOC].dtype}: that name is curate's int64 key "
            "(made by read_documents or add_doc_keys); rename the column"
        )
    if id_given and io.id_field not in columns:
        raise ValueError(f"id_field={io.id_field!r}: no such column in {name} (columns: {columns})")
    if id_given and io.id_field == io.text_field:
        raise ValueError(f"id_field={io.id_field!r} is the text column: ids name documents, and texts repeat")
    if keep.column and keep.column not in columns:
        raise ValueError(f"keep={str(keep)!r}: no column {keep.column!r} in {name} (columns: {columns})")
    dtype = docs._meta[keep.column].dtype if keep.column else None
    if isinstance(dtype, pd.ArrowDtype) and pa.types.is_nested(dtype.pyarrow_dtype):
        raise ValueError(f"keep={str(keep)!r}: the column holds {dtype.pyarrow_dtype}, which does not order")


def _drop_positions(docs: dd.DataFrame, removed: dd.DataFrame, divisions: tuple[int, ...]) -> dd.DataFrame:
    """``docs`` (keyed by :func:`curate.add_doc_keys` inside the call) without the removed rows, as given: its own index, no ``_doc``."""
    aligned = align(removed[[DOC]], divisions)
    return dd.map_partitions(_drop_rows, docs, aligned, meta=docs._meta, align_dataframes=False)


def _drop_rows(part, removed, partition_info=None):
    gone = np.isin(row_keys(part, partition_info), to_host(removed[DOC]).to_numpy())
    return part[~gone]


__all__ = ["AccountingError", "Deduplication", "add_doc_keys", "deduplicate"]
