"""One dedup run: read -> exact -> fuzzy -> removal -> outputs, with counts and timings.

Stage results go to ``OUT/_stages/<stage>/`` (Parquet, see :mod:`curate.checkpoints`) and are read
back, so each stage starts from data on disk rather than from a growing task graph, and a
resumed run starts from the last finished stage. Everything per document stays in Dask
partitions: the client collects counts, never lists of documents. The final outputs are
written under temporary names and renamed, ``summary.json`` last: its presence means the run
is complete.
"""

import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
from dask.utils import parse_bytes
from fsspec.utils import infer_compression

from curate import __version__
from curate.backend import host_step, on_host, to_host, to_parquet
from curate.checkpoints import (
    Checkpoints,
    StageStore,
    input_fingerprint,
    read_stage_frame,
    recorded_parts,
    remove_stages,
    stage_key,
)
from curate.checks import OUTPUTS, PARTIAL, REPEATED_IDS, STAGES, STRING_IDS, check_output
from curate.cluster import (
    check_files,
    current_client,
    document_too_large,
    local_shuffles,
    memory_blocksize,
    one_task_per_gpu,
    partition_slots,
    worker_specs,
    workers_left,
)
from curate.config import RunConfig
from curate.dedup import ExactDedup, FuzzyDedup, KeepPolicy
from curate.dedup.keep import dictionary_decoded
from curate.dedup.keys import align, doc_divisions, drop
from curate.dedup.resolve import REMOVED_COLUMNS, AccountingError, coalesce, empty_groups, resolve
from curate.dedup.warm import compile_kernels
from curate.io import count_rows, locate, read_documents, write_documents, write_table
from curate.io.files import expand_paths, input_columns, record_bytes, reference_files, shared_metadata, source_names
from curate.io.read import split_rejected
from curate.io.records import BadRecordError
from curate.io.rejected import (
    REJECTED_SCHEMA,
    later_occurrences,
    mark_repeated_ids,
    reject_repeated_ids,
    rejected_rows,
    repeated_ids_error,
)
from curate.io.write import output_compression
from curate.metrics import spilled_bytes, versions
from curate.runner import Runner, Stats, task_times
from curate.schema import DOC, POSITION_BITS

logger = logging.getLogger(__name__)
# source and position locate each group member in the input (curate report reads texts from there).
DUPLICATES_COLUMNS = ["id", "group", "kind", "kept", "jaccard", "source", "position"]


@local_shuffles()
@one_task_per_gpu()
def dedup(
    inputs: list[str],
    out_dir: str,
    config: RunConfig,
    *,
    show_progress: bool = False,
    overwrite: bool = False,
    resume: bool = False,
    keep_stages: bool = False,
    reference: list[str] = (),
) -> dict:
    """Deduplicate ``inputs`` into ``out_dir``, on the ``distributed.Client`` Dask computes with
    (or the scheduler set in ``dask.config``, which Dask puts first: see
    :func:`curate.cluster.current_client`). ``config.cluster`` and ``config.backend`` are not
    read here: they are how ``curate dedup`` starts that cluster and sets ``dataframe.backend``.

    Parameters
    ----------
    inputs : list of str
        Files, directories, globs or fsspec URLs (see :func:`curate.io.read_documents`).
    out_dir : str
        Local output directory; see the README's "Output layout".
    config : RunConfig
    show_progress : bool, default=False
        Draw a progress bar per stage (for terminals).
    overwrite : bool, default=False
        Replace the outputs of a previous run in ``out_dir``: its finished stages at the start, its
        final outputs once this run has written its own (a run that fails leaves them).
    resume : bool, default=False
        Reuse the finished stages in ``out_dir/_stages`` whose parameters and input files are
        unchanged (a killed or changed run), compute the rest and replace the final outputs.
    keep_stages : bool, default=False
        Keep ``out_dir/_stages`` after the run succeeds (for a later ``resume`` with changed
        parameters, or to look at a stage). A run that fails or is interrupted always keeps it.
    reference : list of str, default=()
        Files, directories, globs or URLs of a corpus already deduplicated and published (of the
        inputs' format and file system): read before ``inputs``, each of their documents is its
        group's representative before any input's, is never removed (two reference documents
        that are duplicates both stay) and is not written to ``deduplicated/``. The inputs'
        documents are removed where they duplicate a reference document or one another.

    Returns
    -------
    dict
        The summary also written to ``out_dir/summary.json``.

    Notes
    -----
    A JSONL record past its file's first MiB (from which types are taken) holding a value of
    another type, or a field those do not hold, where the type matters (an integer id column's;
    every field's for Parquet output), makes it read the input again with that type unified with
    the others, once per such field, with a warning: the result is the one the same records give
    in files whose first records show it.

    Raises
    ------
    FileExistsError
        If ``out_dir`` holds a previous run's outputs and neither ``overwrite`` nor ``resume`` is set,
        or a finished run's outputs without stages and ``overwrite`` is not set (this and the other
        output folder problems: :func:`curate.checks.check_output`).
    AccountingError
        If input records != kept + removed + rejected, or a representative is not kept.
    StagesOutOfDateError
        (A ValueError.) With ``resume``, if the finished stages do not fit the input read again:
        an input file changed at its size and modification time.
    ValueError
        On bad input (see :func:`curate.io.read_documents`) or duplicate ids, unless
        ``config.io.on_error`` is "skip": then such records are listed in ``out_dir/rejected/``.
    """
    late: tuple = ()  # of pyarrow.Field
    while True:
        try:
            return _dedup(inputs, out_dir, config, show_progress, overwrite, resume, keep_stages, reference, late)
        except BadRecordError as err:
            # A type that each JSONL file's first MiB, from which types are taken, did not show:
            # a string id among integer ids, a float after integers for Parquet output. It stopped
            # the run (with --on-error skip, rejected good records) where the same records cut
            # into smaller files ran: read again with it, they give the same result.
            if err.late is None or err.late in late:
                raise
            kind = "integer" if pa.types.is_integer(err.late.type) else str(err.late.type)
            ids = err.late.name == config.io.id_field and not pa.types.is_integer(err.late.type)
            logger.warning(
                "%s: the input is read again, field %r taking %s values too, as where a file's first records hold one%s",
                err,
                err.late.name,
                kind,
                f" ({STRING_IDS})" if ids else "",
            )
            late = (*late, err.late)
            overwrite = overwrite or not resume  # what this run began, in a folder it was allowed to write


def _dedup(
    inputs: list[str],
    out_dir: str,
    config: RunConfig,
    show_progress: bool,
    overwrite: bool,
    resume: bool,
    keep_stages: bool,
    reference: list[str],
    late: tuple,
) -> dict:
    """:func:`dedup`, with the fields of ``late`` (``pyarrow.Field``: see :func:`curate.io.read_documents`)."""
    out = Path(out_dir).absolute()  # workers of a joined cluster have working folders of their own
    stats = Stats()
    started = time.perf_counter()
    gpu = dask.config.get("dataframe.backend", "pandas") == "cudf"
    spilled_before = spilled_bytes(gpu)  # a joined cluster's workers count earlier runs' too
    left_before = len(workers_left(current_client()))  # a client of the caller's may have run others
    io, keep = config.io, KeepPolicy.parse(config.keep)
    given = list(inputs)
    n_reference = reference_files(list(reference), inputs) if reference else 0
    if reference:  # read first, ranked first, never removed, not written
        keep = replace(keep, reference=n_reference << POSITION_BITS)
        inputs = [*reference, *inputs]
    if config.mode != "exact" and (weak := config.fuzzy.weak_bands()):
        logger.warning(weak)
    fs, paths, input_fmt = expand_paths(inputs)
    # identify_only: no deduplicated copy, so no output format; the final pass reads the records
    # as JSONL output does (each as read) and counts those kept.
    fmt = None if io.identify_only else io.output_format or input_fmt
    compression = fmt and output_compression(io.output_compression, input_fmt, fmt, paths[n_reference:])
    # The stages read only the columns they use; the final write reads the input once more.
    # Parquet output reads every field, so the first read checks them all, as that one will
    # (JSONL values that do not convert, a field named as a column the reader adds).
    # A partition for every worker thread, where the input is large enough (curate.io.plan).
    workers = worker_specs(current_client())  # one reading of the scheduler's table
    spread = partition_slots(workers, gpu)
    # Unless given, partitions no larger than the workers' memory holds: at 64 MB, workers of 1 GB
    # were restarted in verification until the run stopped (lowering --blocksize was the advice).
    # Fuzzy dedup's documents take memory whatever their length: lines and posts by the million
    # restarted workers of 1 GB in partitions cut for their bytes alone (a user's trial).
    counted = config.mode != "exact" and not gpu
    most = memory_blocksize(
        workers, gpu, record_bytes(fs, paths, input_fmt) if counted else None, config.fuzzy.num_bands
    )
    why = "what the workers' memory limits hold"
    # Given larger, the run goes on as asked, but said nothing until its workers were restarted
    # and it stopped, minutes later, advising a smaller --blocksize (NeMo Curator's GPU 1 GB on CPU workers).
    if io.blocksize_given and io.blocksize and most is not None and most < io.blocksize:
        logger.warning(
            "blocksize %s is more than the workers' memory limits hold (about %s a partition): workers may "
            "be restarted until the run stops; leave it out (partitions are then cut to fit) or raise the memory limit",
            _megabytes(io.blocksize),
            _megabytes(most),
        )
    # Resumed, no larger than the run it resumes cut them: the stop's advice, more memory, made
    # larger partitions, and every finished stage was computed again.
    before = ((recorded_parts(out / "_stages", "read") if resume else None) or {}).get("io", {}).get("blocksize")
    if isinstance(before, int) and (most is None or before < most):
        most, why = before, "as the run resumed cut them"
    if not io.blocksize_given and io.blocksize and most is not None and most < io.blocksize:
        logger.info("partitions of at most %s: %s", _megabytes(most), why)
        io = io.model_copy(update={"blocksize": most})
        config = config.model_copy(update={"io": io})  # this run's (summary.json's); the caller's stays
    everything = read_documents(
        inputs,
        id_field=io.id_field if io.id_field_given else None,
        text_field=io.text_field,
        columns=list(dict.fromkeys([io.id_field, io.text_field, *keep.columns()])),
        check_all=fmt == "parquet",
        late=late,
        raise_late=True,
        keep_null_text=False,  # empty, as the stages take it (the final pass writes it back as null)
        blocksize=io.blocksize,
        files_per_partition=io.files_per_partition,
        min_partitions=spread,
        on_error=io.on_error,
        compared=tuple(keep.columns()),
    )
    if keep.column and keep.column not in everything.columns:
        raise ValueError(
            f"keep policy {keep} names column {keep.column!r}, not in the input ({list(everything.columns)})"
        )
    everything = dictionary_decoded(everything, keep)  # the stages' copy; the output keeps the input's type
    _prepare_output(out, overwrite, resume, inputs, paths)  # only once the input is known to be readable
    cluster = config.cluster
    joined = cluster.scheduler_address or cluster.scheduler_file
    limit = "`dask worker --memory-limit`" if joined else f"--memory-limit, now {cluster.memory_limit}"
    kept_for = "finished stages are kept for --resume"
    hint = f"raise the workers' memory limit ({limit}) or lower the partition size (--blocksize, now {_megabytes(io.blocksize)})"
    files = input_fingerprint(inputs)
    # A node with its own copy of an input (or none, or a read-only OUT) is refused before it reads
    # (and before OUT/_stages is made); the workers' write test needs OUT.
    out.mkdir(parents=True, exist_ok=True)
    check_files(current_client(), files if _on_local_disk(fs) else [], out)
    run = Runner(
        stats, show_progress, StageStore(out / "_stages", resume), config.cluster.stall_timeout, f"{hint}; {kept_for}"
    )
    if config.mode != "exact" and not gpu and (client := current_client()) is not None:
        with stats.timed("compile"):  # each kernel by one worker of each host, not by each at once (curate.dedup.warm)
            ran = compile_kernels(client, config.fuzzy, everything._meta[io.text_field].dtype)
        stats.tasks["compile"] = task_times(
            [
                {"key": f"compile {name}", "startstops": [{"action": "compute", "start": start, "stop": stop}]}
                for name, _, start, stop in ran
            ]
        )
    # Everything a stage computes follows from the first key's parts (the output's format and
    # compression, and whether it is written, only affect the last write).
    made_of = {
        "files": files,
        "io": io.model_dump(exclude={"output_format", "output_compression", "identify_only", "cache_input"}),
        "curate": __version__,
        # Where the input is cut, not the worker threads that asked for partitions: a run resumed on
        # a cluster of another size (a node lost) reuses the stages if its partitions are the same.
        "partitions": partitioning(everything.divisions),
        # The read hashes the texts for exact dedup in modes exact and both: one read serves both.
        "exact_dedup": config.mode in ("exact", "both"),
        "keep_columns": keep.columns(),  # exact dedup's candidates, written by the read, carry them
        **({"reference_files": n_reference} if reference else {}),  # the first files
        **({"late": [f"{field.name}: {field.type}" for field in late]} if late else {}),
    }
    with _inputs_unchanged(inputs, files):  # a file rewritten meanwhile fails in ways that do not name it
        cached = cache_input(io.cache_input, config.mode, current_client(), files, gpu=gpu, resume=resume)
        if cached:  # read once into the workers, in the read stage
            # The copy is part of what the workers hold (a user's trial: its workers at 96 %).
            run.hint = f"{hint}, or read the input again for each stage (--no-cache-input); {kept_for}"
            everything = run.persist(_read_stage(config.mode), everything)
            logger.info(
                "the documents (%d partitions) stay in the workers' memory for the stages (--no-cache-input: read "
                "them again)",
                everything.npartitions,
            )
        key = read_key = stage_key("read", made_of)
        docs, candidates = _read(everything, inputs, key, made_of, config, keep, run, stats)
        if config.mode != "exact" and (need := document_too_large(workers, gpu, stats.counts["input"].get("longest"))):
            # A document is not split as partitions are: a user's 150 MB records restarted
            # workers of 3 GB until the run stopped, advising a smaller --blocksize.
            advice = (
                f"the longest document holds {stats.counts['input']['longest']:,} characters: MinHash and "
                f"verification take about {need / 1e9:.1f} GB for it at once, more than a worker thread's share "
                "of its memory limit"
            )
            logger.warning("%s: workers may be restarted until the run stops", advice)
            run.hint = f"{advice}: raise the workers' memory limit, or split such documents; {kept_for}"
        # From here on, the stages are the Python API's (curate.deduplicate), each written to disk.
        fuzzy = FuzzyDedup(config.fuzzy, text_field=io.text_field, id_field=io.id_field, keep=keep)
        stages = Checkpoints(run, key, counters=_counters(fuzzy))
        exact_groups = fuzzy_groups = empty_groups(docs, io.id_field)
        left = docs
        if config.mode in ("exact", "both"):
            exact = ExactDedup(text_field=io.text_field, id_field=io.id_field, keep=keep)
            exact_groups = exact.run(docs, stages, candidates=candidates)
            stats.count("exact", **stages.counted["exact"])
            left = drop(docs, exact_groups[exact_groups._doc != exact_groups._rep])
        if config.mode in ("fuzzy", "both"):
            fuzzy_groups = _fuzzy(left, fuzzy, stages, stats)
        # No stage after these reads the documents (theirs are read back from disk): the copy kept
        # in the workers' memory (--cache-input) is released here, before the write's own peak.
        divisions = docs.divisions
        del everything, docs, left
        # The group tables hold duplicates only: as many partitions as their rows need, so that the
        # result stages cost what the duplicates cost, not what the input's partitioning does.
        exact_groups, fuzzy_groups = (
            coalesce(exact_groups, stats.group_rows("exact")),
            coalesce(fuzzy_groups, stats.group_rows("fuzzy")),
        )
        names = source_names([path for path, _, _ in files])
        removed, _ = resolve(
            exact_groups, fuzzy_groups, divisions, stages, locate=lambda table: with_location(table, names)
        )
        output, rejected = _read_for_output(
            [path for path, _, _ in files],
            io,
            keep,
            fmt != "parquet",
            _repeated_ids_path(run, read_key),
            spread,
            late,
        )
        kept_docs, reference_docs = written_and_reference(drop(output, removed), keep.reference)
        if reference and fmt == "parquet":  # the input's columns (JSONL output copies each line)
            kept_docs = kept_docs[
                input_columns(list(kept_docs.columns), fs, paths[n_reference:], paths[:n_reference], input_fmt)
            ]
        writes = {
            "kept": count_rows(kept_docs)
            if io.identify_only
            else write_documents(
                kept_docs,
                str(out / "deduplicated.tmp"),
                fmt,
                compression=compression,
                # Where every file has the same columns, types and metadata (Hugging Face's features).
                metadata=shared_metadata(fs, paths[n_reference:], [c for c in kept_docs.columns if c != DOC])
                if input_fmt == fmt == "parquet"
                else None,
            )
        }
        if rejected is not None:
            rows = rejected_rows(rejected, names)
            writes["rejected"] = write_documents(rows, str(out / "rejected.tmp"), "parquet", REJECTED_SCHEMA)
        if reference_docs is not None:
            writes["reference"] = count_rows(reference_docs)
        writes["_changed"] = changed_ids(output, removed, io.id_field)
        try:
            written = run(
                "count" if io.identify_only else "write", **writes, **removal_counts(removed, keep.reference)
            )  # the checks' counts in the same pass
            # A file rewritten in place to its own size keeps every offset, so nothing failed: its
            # records were read in two states, and one of them was in neither output (exit 0).
            if (changed := _changed_input(inputs, files)) is not None:
                raise InputChangedError(changed)
            if (doc := int(written.pop("_changed"))) >= 0:
                where = locate(inputs, [doc])[0]
                raise StagesOutOfDateError(
                    f"{where}: the document there is not the one they found there (its id differs)"
                )
            kept, n_rejected, n_reference = (int(written.get(k, 0)) for k in ("kept", "rejected", "reference"))
            n_input = stats.counts["input"]["documents"]
            try:
                n_removed = check_accounting(n_input, kept + n_reference, removed, n_rejected, counted=written)
            except AccountingError as err:  # resumed: most likely from a file changed at its size and time
                if not resume or not stats.reused:
                    raise
                raise StagesOutOfDateError(str(err)) from None
        except BaseException:  # a failed write's parts are never used: a disk it filled stayed full
            _remove(out, PARTIAL)
            raise
        stats.count("output", kept=kept, removed=n_removed, rejected=n_rejected)
        if reference:
            stats.count("output", reference=n_reference)

        # A previous run's outputs (--overwrite) are replaced only now: a run that fails leaves them.
        # summary.json first, as its presence says the outputs are one finished run's. What this
        # run writes no new copy of is said (a full run's copy went without a word under
        # --identify-only --resume).
        # (report.html, a view of the outputs, goes too: --report or `curate report` writes it.)
        written_again = {"deduplicated/": not io.identify_only, "rejected/": rejected is not None}
        dropped = [name for name, again in written_again.items() if not again and (out / name).exists()]
        if dropped:
            logger.warning("removed the previous run's %s from %s: this run writes none", " and ".join(dropped), out)
        # The tables are written before the previous outputs go: a full disk stopped the run
        # between the two and left neither run's tables.
        write_table(str(run.store.path("duplicates")), str(out / "duplicates.parquet.tmp"), DUPLICATES_COLUMNS)
        write_table(str(run.store.path("removed")), str(out / "removed.parquet.tmp"), REMOVED_COLUMNS)
        _remove(out, OUTPUTS)
        if not io.identify_only:
            os.replace(out / "deduplicated.tmp", out / "deduplicated")
            logger.info("wrote %d kept documents to %s", kept, out / "deduplicated")
        logger.info("%d documents kept, %d removed, %d rejected", kept, n_removed, n_rejected)
        if rejected is not None:
            os.replace(out / "rejected.tmp", out / "rejected")
        for table in ("duplicates.parquet", "removed.parquet"):
            os.replace(out / f"{table}.tmp", out / table)
        disk, device = spilled_bytes(gpu)
        disk -= spilled_before[0]
        if device is not None:
            device -= spilled_before[1] or 0
        summary = {
            "inputs": given,
            "reference": list(reference),
            "reference_files": n_reference,  # the first of input_files
            "input_files": [
                {"path": _absolute(path), "size": size, "modified": modified} for path, size, modified in files
            ],
            "output_format": fmt,  # None: identify_only, nothing written
            "output_compression": compression,
            "cache_input": cached,  # as given, or as decided (see cache_input)
            "config": config.model_dump(mode="json"),
            "workers": workers,  # as the run started: threads and memory limit of each
            "counts": stats.counts,
            "reused_stages": stats.reused,
            "seconds": {**stats.seconds, "total": time.perf_counter() - started},
            "peak_rss_bytes": stats.take_peaks(),
            "stage_peak_rss_bytes": stats.peaks,
            # On GPU workers: the most bytes allocated through RMM on each GPU (None on the CPU).
            "peak_device_bytes": stats.device_overall,
            "stage_peak_device_bytes": stats.device_peaks,
            # Where each stage's time went: compute seconds per kind of task (on a cluster).
            "stage_task_seconds": stats.tasks,
            "spilled_bytes": disk,  # to disk, by the workers
            # Lost or restarted (past 95% of their memory limit) while the run computed: a warning
            # said so, and a script reading the summary of a run that finished saw nothing.
            "workers_left": workers_left(current_client())[left_before:],
            "device_spilled_bytes": device,  # from GPUs to host memory, by cuDF (None on the CPU)
            "versions": versions(gpu=gpu),
        }
    tmp_summary = out / "summary.json.tmp"
    tmp_summary.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    os.replace(tmp_summary, out / "summary.json")
    if not keep_stages:
        remove_stages(out / STAGES)
    return summary


class StagesOutOfDateError(ValueError):
    """The finished stages a run resumed do not fit the input it read again: a document at a place
    in the input is not the one they found there (the message names the file and line), or the
    counts do not add up. An input file changed since they were computed, at its size and
    modification time, which are all that ``--resume`` compares."""

    def __init__(self, what: str):
        super().__init__(
            f"the finished stages do not fit the input: {what}; an input file changed since they were computed, "
            "though its size and modification time are the same: run the command again with --overwrite"
        )


def changed_ids(output: dd.DataFrame, removed: dd.DataFrame, id_field: str) -> dd.Scalar:
    """The ``_doc`` of a document in ``output`` (the input read for the write) whose id is not the
    one ``removed`` (``_doc``, ``id``) holds for it, else -1: computed in the write's pass.

    ``removed`` is dropped by ``_doc`` alone, a place in the input. A resumed run over a file
    rewritten with its size and time (a line moved) wrote a removed document and lost the one
    now at its place, exit 0 and every count right (a user's trial)."""
    aligned = align(removed[[DOC, "id"]], doc_divisions(output))
    first = dd.map_partitions(
        _changed_id, output[[DOC, id_field]], aligned, id_field, meta=(None, "int64"), align_dataframes=False
    )
    return first.max()


def _changed_id(part: pd.DataFrame, aligned, id_field: str) -> pd.Series:
    aligned = to_host(aligned)
    expected = dict(zip(aligned[DOC].tolist(), map(str, aligned["id"].tolist())))
    found = part[part[DOC].isin(list(expected))]
    changed = [doc for doc, id_ in zip(found[DOC].tolist(), found[id_field].tolist()) if str(id_) != expected[doc]]
    return pd.Series([min(changed, default=-1)], dtype="int64")


class InputChangedError(ValueError):
    """An input file changed during the run (size or modification time): its records were read
    in different states. The message names the file and, where one came of it, the error."""

    def __init__(self, path: str, err: Exception | None = None):
        seen = "" if err is None else f" ({type(err).__name__}: {err})"
        super().__init__(
            f"input file {path} changed during the run (size or modification time), so its records were "
            f"read in different states{seen}; once the inputs stay as they are, run the same command with --resume "
            "(what was made from the file is made again) or --overwrite"
        )


@contextlib.contextmanager
def _inputs_unchanged(inputs: list[str], files: list[tuple[str, int, str]]):
    """Raise :class:`InputChangedError` naming the first input file whose fingerprint is no
    longer ``files``' when the block fails: records read in different states of a file fail as
    keys out of range or counts that do not add up, naming no file."""
    try:
        yield
    except InputChangedError:
        raise
    except Exception as err:
        changed = _changed_input(inputs, files)
        if changed is None:
            raise
        raise InputChangedError(changed, err) from err


def _changed_input(inputs: list[str], files: list[tuple[str, int, str]]) -> str | None:
    """The first input file whose fingerprint (:func:`input_fingerprint`) is no longer ``files``'
    (a file gone counts), or None, also where that cannot be told (the storage unreachable)."""
    try:
        now = {path: (size, modified) for path, size, modified in input_fingerprint(inputs)}
    except (FileNotFoundError, ValueError):  # a file (or every file of an input) is gone
        now = {}
    except Exception:  # S3 gone mid-run: its listing's traceback came second, after the read's
        return None
    return next((path for path, size, modified in files if now.get(path) != (size, modified)), None)


# The input's size in memory, decompressed, against its compressed files' size: zstd at level 19
# and gzip -9 keep English text in a quarter to a third of its size (gutenberg, 20news).
EXPANSION = 6


def cache_input(
    given: bool | None, mode: str, client, files: list[tuple[str, int, str]], *, gpu: bool, resume: bool
) -> bool:
    """Whether the documents the stages read stay in the workers' memory (``--cache-input``).

    ``given`` if set. Else on where ``client``'s workers all have memory limits adding up to at
    least 4x the documents' estimated size: the input files' (``files``: path, bytes, time)
    uncompressed JSONL at its size, compressed files (``.gz``, ``.zst``, Parquet) at
    :data:`EXPANSION` times theirs. Off for an exact run (only the read stage reads them), without a
    client, on GPU workers (whose device memory the stages need) and for a resumed run (whose
    finished stages would not read them).
    """
    if given is not None:
        return given
    if mode == "exact" or client is None or gpu or resume:
        return False
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info(n_workers=-1)["workers"].values()]
    compressed = lambda path: infer_compression(path) is not None or path.lower().endswith(".parquet")  # noqa: E731
    size = sum(EXPANSION * n if compressed(path) else n for path, n, _ in files)
    return bool(limits) and min(limits) > 0 and 4 * size <= sum(limits)


def partitioning(divisions: tuple[int, ...]) -> str:
    """The read's partitions as the stages' key records them: how many, and where each after the
    first begins (from their ``_doc`` divisions: an input file, from 1 in input order, and a byte
    offset or Parquet row in it), e.g. ``"3 partitions, cut at file 2, file 3 byte 64000000"``."""
    n = len(divisions) - 1
    places = [(d >> POSITION_BITS, d & ((1 << POSITION_BITS) - 1)) for d in divisions[1:-1]]
    cuts = ", ".join(f"file {file + 1}" + (f" byte {at}" if at else "") for file, at in places)
    return f"{n} partition{'s' if n != 1 else ''}" + (f", cut at {cuts}" if cuts else "")


def _megabytes(size) -> str:
    return "none" if size is None else f"{parse_bytes(size) / 1e6 if isinstance(size, str) else size / 1e6:.3g}MB"


def _absolute(path: str) -> str:
    return path if "://" in path else os.path.abspath(path)  # so the run can be read from another folder


def _read_stage(mode: str) -> str:
    """The read stage's name in timings: it also hashes the texts for exact dedup where the mode has it."""
    return "read+exact" if mode in ("exact", "both") else "read"


def _read(everything, inputs, key: str, made_of: dict, config: RunConfig, keep: KeepPolicy, run, stats: Stats):
    """Stage ``read``: count documents, empty texts and rejected records, refuse (or reject)
    repeated ids and, in the same pass, shuffle the digests of exact dedup.

    ``key`` is the stage's key and ``made_of`` its parts. Returns the documents and exact dedup's
    candidates (lazy; None when the mode has no exact dedup).
    """
    io, exact = config.io, config.mode in ("exact", "both")
    dedup_exact = ExactDedup(text_field=io.text_field, id_field=io.id_field, keep=keep)
    repeated_ids = str(_repeated_ids_path(run, key))
    if Path(repeated_ids).exists() and run.store.finished("read", key, made_of) is not None:
        everything = mark_repeated_ids(everything, repeated_ids, io.id_field)

    def compute(path: Path) -> dict:
        nonlocal everything
        docs, rejected = split_rejected(everything)
        todo = {
            "docs": count_rows(docs),
            "empty": (docs[io.text_field].str.len() == 0).sum(),
            "longest": docs[io.text_field].str.len().max(),  # characters
            "repeated_ids": later_occurrences(docs, io.id_field)[io.id_field],
        }
        if rejected is not None:
            todo["rejected"] = rejected["_kind"].value_counts()
        if exact:  # (key, digest) of the documents whose digest is shared: no text is shuffled
            todo["candidates"] = to_parquet(dedup_exact.candidates(docs), path)
        done = run(_read_stage(config.mode), **todo)
        # Occurrences of each id seen more than once: bad input, not every id.
        done["repeated_ids"] = done["repeated_ids"].value_counts() + 1
        if len(done["repeated_ids"]):
            if rejected is None:
                raise repeated_ids_error(docs, done["repeated_ids"], io.id_field, inputs)
            # Skipping: all but the first of each become rejected records, then the pass runs again.
            names = source_names(expand_paths(inputs)[1])
            everything = reject_repeated_ids(everything, done["repeated_ids"].index, io.id_field, names, repeated_ids)
            return compute(path)
        kinds = to_host(done.get("rejected", pd.Series(dtype="int64")))
        counts = {
            "documents": int(done["docs"] + kinds.sum()),
            "empty": int(done["empty"]),
            "longest": 0 if pd.isna(done["longest"]) else int(done["longest"]),
            "partitions": docs.npartitions,
        }
        counts["rejected"] = {str(k): int(v) for k, v in kinds.sort_index().items()}
        return counts

    counts = run.stage("read", key, compute, made_of, also=(repeated_ids,))
    longest = counts.get("longest")  # (not in a stage an earlier curate finished)
    stats.count("input", documents=counts["documents"], empty=counts["empty"], partitions=counts["partitions"])
    if longest is not None:
        stats.count("input", longest=longest)
    stats.count("rejected", **counts["rejected"])
    docs, _ = split_rejected(everything)
    return docs, (read_stage_frame(run.store.path("read")) if exact else None)


def _on_local_disk(fs) -> bool:
    """Whether the inputs' fsspec file system is the local one (or mounts), which each node sees its own way."""
    protocol = fs.protocol
    return bool({"file", "local"} & set(protocol if isinstance(protocol, tuple) else (protocol,)))


def _repeated_ids_path(run, exact_key: str) -> Path:
    # Named by the read stage's key, so that a resumed run marks the same records that stage left out.
    return run.store.root / REPEATED_IDS.format(key=exact_key[:16])


def _read_for_output(
    paths: list[str], io, keep: KeepPolicy, raw: bool, repeated_ids: Path, min_partitions: int, late: tuple
) -> tuple[dd.DataFrame, dd.DataFrame | None]:
    """The input read once more for the final write: documents to keep (and the rejected records).

    ``raw`` (JSONL output, or none: ``identify_only``): each record as read (``_record``: a JSONL line byte for byte, a
    Parquet row's values in its file's types), whatever its fields; otherwise (Parquet output)
    every field, converted. It checks what the first read checked (the text, the id, the keep
    policy's column; every field for JSONL to Parquet), so it rejects the same records, and marks
    the repeated ids that read found; its partitions are the first read's (``min_partitions``).
    Pandas partitions whatever the backend: writing gains nothing from a GPU.
    """
    with dask.config.set({"dataframe.backend": "pandas"}):
        docs = read_documents(
            paths,
            id_field=io.id_field if io.id_field_given else None,
            text_field=io.text_field,
            columns=list(dict.fromkeys([io.id_field, *keep.columns()])) if raw else None,  # the id: changed_ids
            blocksize=io.blocksize,
            files_per_partition=io.files_per_partition,
            min_partitions=min_partitions,
            on_error=io.on_error,
            records=raw,
            compared=tuple(keep.columns()),  # as the first read: the same records rejected
            host=True,  # on GPU workers, beside the GPU's task: nothing here needs it
            late=late,  # as the first read found them
        )
    if repeated_ids.exists():
        docs = mark_repeated_ids(docs, str(repeated_ids), io.id_field)
    docs, rejected = split_rejected(docs, records=raw)
    return (docs.drop(columns=[c for c in keep.columns() if c != io.id_field]) if raw else docs), rejected


def _counters(fuzzy: FuzzyDedup) -> dict:
    """What ``summary.json`` counts of each stage's result, computed with the stage's writes
    (:class:`curate.checkpoints.Checkpoints`): no stage is read again to be counted."""

    def group_counts(groups: dd.DataFrame) -> dict:
        # Per partition: (groups._doc == groups._rep).sum() would read only two columns, a branch
        # of the graph of its own that computes the group table a second time.
        def tally(same: bool):
            return groups.map_partitions(
                lambda part: int(((part._doc == part._rep) == same).sum()), meta=(None, "int64")
            ).sum()

        return {"groups": tally(True), "removed": tally(False)}

    return {
        "exact": group_counts,
        "minhash+lsh": lambda found: {"candidate_edges": count_rows(found["edges"])},
        "verify": lambda scored: {"passed": count_rows(fuzzy.passed(scored))},
        "member_pairs": lambda found: {"member_pairs": count_rows(found["pairs"])},
        "verify_members": lambda edges: {"member_edges": count_rows(edges)},
        "components": lambda graph: {"component_nodes": count_rows(graph)},
        "groups": group_counts,
    }


def _fuzzy(docs: dd.DataFrame, fuzzy: FuzzyDedup, stages: Checkpoints, stats: Stats) -> dd.DataFrame:
    """Fuzzy groups of ``docs`` (lazy table): :meth:`curate.dedup.FuzzyDedup.run` through the checkpoints, and its counts."""
    counted = stages.counted

    def components(edges: dd.DataFrame) -> dd.DataFrame:
        # ``edges`` are the verified edges of the rounds finished so far (the first round's, inside
        # member_pairs; both, for the components stage): their count picks one task or the distributed path.
        n_edges = counted["verify"]["passed"] + counted.get("verify_members", {}).get("member_edges", 0)
        return fuzzy.components(edges, n_edges=n_edges)

    found = fuzzy.run(docs, stages, components=components)
    members = (
        {
            "member_pairs": counted["member_pairs"]["member_pairs"],
            "member_edges": counted["verify_members"]["member_edges"],
        }
        if "member_pairs" in found
        else {}
    )
    verified = (
        {"verified_edges": counted["verify"]["passed"] + members.get("member_edges", 0)} if fuzzy.config.verify else {}
    )
    stats.count(
        "fuzzy",
        candidate_edges=counted["minhash+lsh"]["candidate_edges"],
        **verified,  # none without verification (--no-verify)
        **members,
        component_nodes=counted["components"]["component_nodes"],
        **counted["groups"],
        **({"buckets_over_cap": found["buckets_over_cap"]} if members else {}),
    )
    return found["groups"]


def with_location(duplicates: dd.DataFrame, names: tuple[str, ...]) -> dd.DataFrame:
    """``duplicates`` with ``source`` (the input file's name, as in ``rejected/``) and ``position``
    (int64: byte offset of the record in the decompressed JSONL file, or Parquet row), from ``_doc``."""

    def locate(part):
        part = to_host(part)
        source = pd.Series(np.asarray(names)[part[DOC].to_numpy() >> POSITION_BITS], index=part.index, dtype="str")
        return part.assign(source=source, position=part[DOC] & ((1 << POSITION_BITS) - 1))

    meta = to_host(duplicates._meta).assign(source=pd.Series(dtype="str"), position=pd.Series(dtype="int64"))
    return duplicates.map_partitions(locate, meta=meta, token=host_step(locate))


def removal_counts(removed: dd.DataFrame, reference: int = 0) -> dict:
    """What :func:`check_accounting` counts in the removed table, as Dask scalars (to compute with other work):
    ``removed`` (rows), ``removed twice`` (repeated ``_doc`` keys), ``representatives removed``
    and, with a ``reference`` (:class:`KeepPolicy`'s), ``reference removed``."""
    # Sorting put equal keys in one partition, so repeats show within partitions.
    twice = removed.map_partitions(lambda part: part[DOC].duplicated().sum(), meta=(None, "int64")).sum()
    counts = {
        "removed": count_rows(removed),
        "removed twice": twice,
        "representatives removed": count_rows(_lost(removed)),
    }
    if reference:
        counts["reference removed"] = count_rows(removed[removed[DOC] < reference])
    return counts


def _lost(removed: dd.DataFrame) -> dd.DataFrame:
    return removed[["representative"]].merge(removed[["id"]], left_on="representative", right_on="id")


def check_accounting(
    n_input: int, n_kept: int, removed: dd.DataFrame, n_rejected: int = 0, counted: dict | None = None
) -> int:
    """Raise :class:`AccountingError` unless input = kept + removed + rejected, every
    representative is kept and no reference document (``counted["reference removed"]``) was removed.

    ``removed`` is the removed table of :func:`resolve` (sorted by ``_doc``); it is read once
    more for the checks (unless ``counted`` holds :func:`removal_counts` computed), never
    collected. ``n_kept`` counts the reference's documents. Returns the number of removed documents.
    """
    counted = counted or dask.compute(removal_counts(removed))[0]
    n_removed, twice, n_lost = (int(counted[k]) for k in ("removed", "removed twice", "representatives removed"))
    if twice:
        raise AccountingError(f"{twice} document(s) removed twice")
    if n_input != n_kept + n_removed + n_rejected:
        raise AccountingError(f"{n_input} input records != {n_kept} kept + {n_removed} removed + {n_rejected} rejected")
    if n_lost:
        examples = sorted(on_host(_lost(removed).id).compute().tolist())[:3]
        raise AccountingError(f"{n_lost} representative(s) were removed themselves, e.g. {examples}")
    if reference_removed := int(counted.get("reference removed", 0)):
        raise AccountingError(f"{reference_removed} reference document(s) were removed")
    return n_removed


def written_and_reference(kept: dd.DataFrame, reference: int) -> tuple[dd.DataFrame, dd.DataFrame | None]:
    """``kept`` (documents indexed by ``_doc``, known divisions) split at the ``_doc`` key
    ``reference`` (:class:`KeepPolicy`'s): the documents to write, and the reference's (None
    without one). Each keeps only the partitions that can hold its keys (one at least), so a
    reference read whole writes no empty parts."""
    if not reference:
        return kept, None
    # Partition i holds keys from divisions[i]; the last one's upper bound is inclusive.
    first_new = min(int(np.searchsorted(kept.divisions[1:-1], reference, side="right")), kept.npartitions - 1)
    last_reference = max(int(np.searchsorted(kept.divisions[:-1], reference, side="left")) - 1, 0)
    written = kept.partitions[first_new:]
    held = kept.partitions[: last_reference + 1]
    return written[written[DOC] >= reference], held[held[DOC] < reference]


def _prepare_output(out: Path, overwrite: bool, resume: bool, inputs: list[str], paths: list[str]) -> None:
    check_output(out, overwrite=overwrite, resume=resume, inputs=tuple(inputs), files=tuple(paths))
    # A previous run's finished outputs stay until this run writes its own (see dedup).
    _remove(out, PARTIAL + (() if resume else (STAGES,)))


def _remove(out: Path, names: tuple[str, ...]) -> None:
    for name in names:  # in this order
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


__all__ = ["changed_ids", "check_accounting", "dedup", "removal_counts", "with_location", "written_and_reference"]
