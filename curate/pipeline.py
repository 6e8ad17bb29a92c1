"""One dedup run: read -> exact -> fuzzy -> removal -> outputs, with counts and timings.

Stage results go to ``OUT/_stages/<stage>/`` (Parquet) and are read back, so each stage
starts from data on disk rather than from a growing task graph. The final outputs are
written under temporary names and renamed, ``summary.json`` last.
"""

import json
import os
import platform
import resource
import shutil
import sys
import time
import warnings
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import dask
import dask.dataframe as dd
import pandas as pd
from distributed import get_client, progress

from curate.backend import to_host
from curate.config import RunConfig
from curate.dedup import (
    ExactDedup,
    FuzzyDedup,
    KeepPolicy,
    drop_keys,
    select_keys,
    write_keys,
)
from curate.dedup.groups import group_meta
from curate.io import DOC, count_rows, read_documents, write_documents, write_table
from curate.io.read import expand_paths, source_names, split_rejected
from curate.io.rejected import REJECTED_SCHEMA, reject_repeated_ids, rejected_rows, repeated_ids_error

OUTPUTS = ("deduplicated", "rejected", "duplicates.parquet", "removed.parquet", "summary.json")


class AccountingError(RuntimeError):
    """The run's outputs do not account for every input document exactly once."""


class Stats:
    """Counts (``int``) and timings (seconds, ``float``) per stage, written to ``summary.json``."""

    def __init__(self):
        self.counts: dict[str, dict[str, int]] = {}
        self.seconds: dict[str, float] = {}

    def count(self, stage: str, **values) -> None:
        """Record integer counts under ``stage`` (e.g. ``count("exact", removed=3)``)."""
        self.counts.setdefault(stage, {}).update({k: int(v) for k, v in values.items()})

    @contextmanager
    def timed(self, stage: str):
        """Context manager adding the wall time (seconds) of its block to ``stage``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


def dedup(inputs: list[str], out_dir: str, config: RunConfig, *, show_progress: bool = False, overwrite: bool = False) -> dict:
    """Deduplicate ``inputs`` into ``out_dir``; needs an active ``distributed.Client``.

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
        Replace the outputs of a previous run in ``out_dir``.

    Returns
    -------
    dict
        The summary also written to ``out_dir/summary.json``.

    Raises
    ------
    FileExistsError
        If ``out_dir`` holds a previous run's outputs and ``overwrite`` is False.
    AccountingError
        If input records != kept + removed + rejected, or a representative is not kept.
    ValueError
        On bad input (see :func:`curate.io.read_documents`) or duplicate ids, unless
        ``config.io.on_error`` is "skip": then such records are listed in ``out_dir/rejected/``.
    """
    out = Path(out_dir)
    stages = out / "_stages"
    stats = Stats()
    started = time.perf_counter()
    io, keep = config.io, KeepPolicy.parse(config.keep)
    run = _Runner(stats, show_progress)

    docs = read_documents(
        inputs,
        id_field=io.id_field if io.id_field_given else None,
        text_field=io.text_field,
        blocksize=io.blocksize,
        files_per_partition=io.files_per_partition,
        on_error=io.on_error,
    )
    if keep.column and keep.column not in docs.columns:
        raise ValueError(f"keep policy {keep} names column {keep.column!r}, not in the input ({list(docs.columns)})")
    _prepare_output(out, overwrite)  # only once the input is known to be readable

    exact_groups, docs, rejected = _check_input_and_exact(docs, inputs, stages, config, keep, run, stats)
    fuzzy_groups = empty_groups(docs, io.id_field)
    if config.mode in ("fuzzy", "both"):
        write_keys(exact_groups._doc[exact_groups._doc != exact_groups._rep].to_numpy(), stages / "exact_removed.parquet")
        fuzzy_docs = drop_keys(docs, str(stages / "exact_removed.parquet"))
        fuzzy_groups = _fuzzy(fuzzy_docs, stages, config, keep, run, stats)

    removed, duplicates = resolve(exact_groups, fuzzy_groups)
    write_keys(removed[DOC].to_numpy(), stages / "removed_keys.parquet")
    kept_docs = drop_keys(docs, str(stages / "removed_keys.parquet"))
    fmt = io.output_format or expand_paths(inputs)[2]
    writes = {"kept": write_documents(kept_docs, str(out / "deduplicated.tmp"), fmt)}
    if rejected is not None:
        rows = rejected_rows(rejected, source_names(expand_paths(inputs)[1]))
        writes["rejected"] = write_documents(rows, str(out / "rejected.tmp"), "parquet", REJECTED_SCHEMA)
    written = run("write", **writes)
    kept, n_rejected = written["kept"], written.get("rejected", 0)
    stats.count("output", kept=kept, removed=len(removed), rejected=n_rejected)
    check_accounting(stats.counts["input"]["documents"], kept, removed, n_rejected)

    os.replace(out / "deduplicated.tmp", out / "deduplicated")
    if rejected is not None:
        os.replace(out / "rejected.tmp", out / "rejected")
    write_table(duplicates, str(out / "duplicates.parquet"))
    write_table(removed.drop(columns=[DOC]), str(out / "removed.parquet"))
    summary = {
        "inputs": list(inputs),
        "output_format": fmt,
        "config": config.model_dump(mode="json"),
        "counts": stats.counts,
        "seconds": {**stats.seconds, "total": time.perf_counter() - started},
        "peak_rss_bytes": peak_rss(),
        "versions": versions(),
    }
    tmp_summary = out / "summary.json.tmp"
    tmp_summary.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    os.replace(tmp_summary, out / "summary.json")
    return summary


def _check_input_and_exact(everything, inputs, stages: Path, config: RunConfig, keep: KeepPolicy, run, stats: Stats):
    """Count documents, empty texts and rejected records, refuse (or reject) repeated ids and, in one pass, find exact groups.

    Returns the exact group table, the documents and the rejected records (None in fail mode).
    """
    io = config.io
    docs, rejected = split_rejected(everything)
    ids = docs[io.id_field].value_counts(split_out=docs.npartitions)
    todo = {"docs": count_rows(docs), "empty": (docs[io.text_field].str.len() == 0).sum(), "repeated_ids": ids[ids > 1]}
    if rejected is not None:
        todo["rejected"] = rejected["_kind"].value_counts()
    if config.mode in ("exact", "both"):
        exact = ExactDedup(text_field=io.text_field, id_field=io.id_field, keep=keep)
        todo["exact"] = exact(docs).to_parquet(stages / "exact", write_index=False, compute=False)
    done = run("read+exact", **todo)
    done["repeated_ids"] = to_host(done["repeated_ids"])
    if len(done["repeated_ids"]):
        if rejected is None:
            raise repeated_ids_error(docs, done["repeated_ids"], io.id_field, inputs)
        # Skipping: all but the first of each become rejected records, then the pass runs again.
        names = source_names(expand_paths(inputs)[1])
        everything = reject_repeated_ids(everything, done["repeated_ids"].index, io.id_field, names, str(stages / "repeated_ids.parquet"))
        return _check_input_and_exact(everything, inputs, stages, config, keep, run, stats)
    kinds = done.get("rejected", pd.Series(dtype="int64"))
    stats.count("input", documents=done["docs"] + kinds.sum(), empty=done["empty"], partitions=docs.npartitions)
    stats.count("rejected", **kinds.sort_index().to_dict())
    if config.mode == "fuzzy":
        return empty_groups(docs, io.id_field), docs, rejected
    groups = to_host(dd.read_parquet(stages / "exact").compute())
    stats.count("exact", groups=(groups._doc == groups._rep).sum(), removed=(groups._doc != groups._rep).sum())
    return groups, docs, rejected


def _fuzzy(docs: dd.DataFrame, stages: Path, config: RunConfig, keep: KeepPolicy, run, stats: Stats) -> pd.DataFrame:
    """Fuzzy groups of ``docs``, each stage written to ``stages`` and read back."""
    io = config.io
    fuzzy = FuzzyDedup(config.fuzzy, text_field=io.text_field, id_field=io.id_field, keep=keep)
    candidates = run.checkpoint("minhash+lsh", fuzzy.edges(fuzzy.buckets(docs)), stages / "candidates")
    # Only documents with a candidate edge are joined to edges, so only they are shuffled.
    with stats.timed("select"):
        nodes = to_host(dd.concat([candidates.u, candidates.v]).drop_duplicates(split_out=candidates.npartitions).compute())
        write_keys(nodes.to_numpy(), stages / "candidate_nodes.parquet")
    columns = list(dict.fromkeys([DOC, io.id_field, io.text_field, *keep.columns()]))
    candidate_docs = select_keys(docs, str(stages / "candidate_nodes.parquet"))[columns]
    candidate_docs = run.checkpoint("select", candidate_docs, stages / "candidate_docs")
    edges = run.checkpoint("verify", fuzzy.verify(candidates, candidate_docs), stages / "edges")
    with stats.timed("components"):
        components = fuzzy.components(edges)  # computes: the edge count picks the local or distributed path
    components = run.checkpoint("components", components, stages / "components")
    groups = run.checkpoint("groups", fuzzy.groups(components, candidate_docs), stages / "fuzzy")
    done = run(
        "fuzzy counts",
        candidates=count_rows(candidates),
        edges=count_rows(edges),
        nodes=count_rows(components),
        groups=groups,
    )
    groups = to_host(done["groups"])
    stats.count(
        "fuzzy",
        candidate_edges=done["candidates"],
        verified_edges=done["edges"],
        component_nodes=done["nodes"],
        groups=(groups._doc == groups._rep).sum(),
        removed=(groups._doc != groups._rep).sum(),
    )
    return groups


def empty_groups(docs: dd.DataFrame, id_field: str) -> pd.DataFrame:
    """An empty group table for ``docs``' id dtype."""
    return to_host(group_meta(docs[id_field]._meta))


def resolve(exact: pd.DataFrame, fuzzy: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Final removed and duplicates tables from the exact and fuzzy group tables.

    Fuzzy dedup runs on what exact dedup kept, so a chain is at most two long: an exact
    duplicate whose representative was then removed as a fuzzy duplicate points to that
    fuzzy representative (identical text, so the similarity carries over).

    Returns
    -------
    removed : pandas.DataFrame
        ``_doc``, ``id``, ``kind`` ("exact"/"fuzzy"), ``representative`` (kept id), sorted by ``_doc``.
    duplicates : pandas.DataFrame
        ``id``, ``group`` (the group's representative id), ``kind``, ``kept`` (bool: in the
        output), one row per document per group it belongs to, in input order.
    """
    fuzzy_removed = fuzzy[fuzzy._doc != fuzzy._rep]
    exact_removed = exact[exact._doc != exact._rep]
    # Where an exact representative was itself removed as a fuzzy duplicate, move on to its
    # fuzzy representative (positional lookup: no float round trip for integer ids).
    onward = pd.Index(fuzzy_removed._doc).get_indexer(exact_removed._rep)
    moved = onward >= 0
    exact_rep_id = exact_removed._rep_id.to_numpy(copy=True)
    exact_rep_id[moved] = fuzzy_removed._rep_id.to_numpy()[onward[moved]]
    removed = pd.concat(
        [
            pd.DataFrame({DOC: exact_removed._doc.to_numpy(), "id": exact_removed._id.to_numpy(), "kind": "exact", "representative": exact_rep_id}),
            pd.DataFrame({DOC: fuzzy_removed._doc.to_numpy(), "id": fuzzy_removed._id.to_numpy(), "kind": "fuzzy", "representative": fuzzy_removed._rep_id.to_numpy()}),
        ],
        ignore_index=True,
    ).sort_values(DOC, kind="stable", ignore_index=True)
    removed = removed.astype({"id": exact._id.dtype, "representative": exact._id.dtype})
    gone = set(removed[DOC].tolist())
    duplicates = pd.concat([exact.assign(kind="exact"), fuzzy.assign(kind="fuzzy")], ignore_index=True)
    duplicates = duplicates.sort_values([DOC, "kind"], kind="stable", ignore_index=True)
    duplicates = pd.DataFrame(
        {
            "id": duplicates._id,
            "group": duplicates._rep_id,
            "kind": duplicates.kind,
            "kept": ~duplicates._doc.isin(gone),
        }
    )
    return removed, duplicates


def check_accounting(n_input: int, n_kept: int, removed: pd.DataFrame, n_rejected: int = 0) -> None:
    """Raise :class:`AccountingError` unless input = kept + removed + rejected and every representative is kept."""
    if removed[DOC].duplicated().any():
        raise AccountingError(f"{removed[DOC].duplicated().sum()} document(s) removed twice")
    if n_input != n_kept + len(removed) + n_rejected:
        raise AccountingError(f"{n_input} input records != {n_kept} kept + {len(removed)} removed + {n_rejected} rejected")
    lost = set(removed["representative"].tolist()) & set(removed["id"].tolist())
    if lost:
        raise AccountingError(f"{len(lost)} representative(s) were removed themselves, e.g. {sorted(lost)[:3]}")


class _Runner:
    """Computes a stage's collections together (shared reads), timed, with an optional progress bar."""

    def __init__(self, stats: Stats, show_progress: bool):
        self.stats, self.show_progress = stats, show_progress

    def __call__(self, stage: str, **collections) -> dict:
        names = list(collections)
        with self.stats.timed(stage):
            try:
                client = get_client()
            except ValueError:
                client = None
            with warnings.catch_warnings():
                # to_parquet(compute=False) is graph-backed, counts are expressions; mixing is fine.
                warnings.filterwarnings("ignore", "Computing mixed collections", UserWarning)
                if client is None:
                    results = dask.compute(*collections.values())
                else:
                    futures = client.compute(list(collections.values()))
                    if self.show_progress:
                        print(f"[{stage}]", file=sys.stderr)
                        progress(futures)
                        print(file=sys.stderr)
                    results = client.gather(futures)
        return dict(zip(names, results))

    def checkpoint(self, stage: str, frame: dd.DataFrame, path: Path) -> dd.DataFrame:
        """Write ``frame`` to Parquet at ``path`` (timed as ``stage``) and read it back lazily."""
        self(stage, written=frame.to_parquet(path, write_index=False, compute=False))
        return dd.read_parquet(path)


def _prepare_output(out: Path, overwrite: bool) -> None:
    existing = [name for name in (*OUTPUTS, "_stages", "deduplicated.tmp", "rejected.tmp") if (out / name).exists()]
    if existing and not overwrite:
        raise FileExistsError(f"{out} already holds {existing}; pass --overwrite to replace them")
    for name in existing:
        path = out / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    (out / "_stages").mkdir(parents=True, exist_ok=True)


def _process_peak() -> tuple[int, int]:
    # VmHWM is this process's own peak. ru_maxrss is not: Linux carries it across fork + exec,
    # so a process started by a large parent would report the parent's size.
    try:
        with open("/proc/self/status") as status:
            kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return os.getpid(), kib * 1024


def peak_rss() -> dict:
    """Peak resident memory in bytes: this process, each worker, and the sum over distinct processes."""
    pid, own = _process_peak()
    try:
        workers = get_client().run(_process_peak)
    except ValueError:  # no client
        workers = {}
    per_process = {pid: own, **dict(workers.values())}  # in-process workers share our pid
    return {"client": own, "workers": {w: rss for w, (_, rss) in workers.items()}, "total": sum(per_process.values())}


def versions() -> dict:
    """Versions of curate and the libraries that decide its results."""
    names = ["curate", "dask", "distributed", "pandas", "pyarrow", "numba", "numpy"]
    return {"python": platform.python_version(), **{n: metadata.version(n) for n in names}}


__all__ = ["dedup", "resolve", "check_accounting", "AccountingError", "Stats"]
