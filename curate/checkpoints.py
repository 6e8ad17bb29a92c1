"""Finished stage results under ``OUT/_stages/<stage>/``, each with a marker of what made it.

A stage writes into ``<stage>.tmp/`` and is renamed into place with its marker
(``_marker.json``: the stage's key and its counts) inside, so a directory holding a marker is a
finished stage and a killed run leaves at most a ``.tmp`` folder behind. Readers of a stage's
Parquet files skip the marker, as Arrow skips every file whose name starts with ``_``.

A stage's key is a SHA-256 over its name, its parameters and the keys of the stages it reads.
The first key fingerprints the input files (path, size in bytes, modification time), the
reading options and the curate version, so with ``--resume`` a changed parameter or input
changes the key of the stage that uses it and of every stage after it, and of no other. The
marker also keeps what the key was made of, so that such a run can say what changed.

:class:`Checkpoints` is the stage hook (:mod:`curate.dedup.stages`) that ``curate dedup`` gives
the dedup classes: each stage computed, written here and read back.
"""

import functools
import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

import dask
import dask.dataframe as dd
import pyarrow as pa
import pyarrow.parquet as pq
from dask.utils import format_bytes

from curate.backend import arrow_partitions, from_arrow, to_parquet
from curate.checks import MARKER
from curate.io.files import counted, expand_paths, naming
from curate.schema import DOC

logger = logging.getLogger(__name__)


def stage_key(name: str, params: dict, upstream: tuple[str, ...] = ()) -> str:
    """Hex SHA-256 of a stage's name, JSON-able ``params`` and the keys of the stages it reads."""
    blob = json.dumps({"stage": name, "params": params, "upstream": list(upstream)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def input_fingerprint(inputs: list[str]) -> list[tuple[str, int, str]]:
    """``(path, size in bytes, modification time or ETag)`` of every input file, in read order.

    Contents are not hashed (that would read the corpus once more); like ``make``, a file
    rewritten with the same size and time is taken to be unchanged.

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`curate.io.files.expand_paths`.
    """
    fs, paths, _ = expand_paths(inputs)
    infos = []
    for path in paths:
        with naming(fs, fs.unstrip_protocol(path)):
            infos.append(fs.info(path))
    return [(path, int(info["size"]), modified(info)) for path, info in zip(paths, infos)]


def modified(info: dict) -> str:
    """A file's modification time (or ETag) from an fsspec ``info`` dict, as a string."""
    return str(info.get("mtime") or info.get("LastModified") or info.get("ETag") or info.get("created"))


class StageStore:
    """The ``_stages`` folder of one output directory.

    Parameters
    ----------
    root : pathlib.Path
        ``OUT/_stages``; created if missing.
    resume : bool
        Reuse finished stages whose key matches; when False every stage is computed.
    """

    def __init__(self, root: Path, resume: bool):
        self.root, self.resume = root, resume
        self._started: dict[str, float] = {}
        self._redone = False  # a finished stage of other inputs or options was met (said once)
        self._said: set[str] = set()  # stages whose damage was said
        root.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        """Where the finished stage ``name`` lives."""
        return self.root / name

    def finished(self, name: str, key: str, made_of: dict | None = None) -> dict | None:
        """The counts recorded by stage ``name`` if it finished with ``key`` and may be reused, else
        None. ``made_of`` is the stage's part of the key (its parameters; the first stage's also
        its input files), compared with the recorded one to say what changed."""
        marker = self.path(name) / MARKER
        if not self.resume or not marker.exists():
            return None
        recorded = _read_marker(marker)
        if recorded is None:  # cut short or edited: the stage is made again
            self._say(name, "--resume: the marker %s cannot be read; stage %s is computed again", marker, name)
            return None
        if recorded["key"] != key:
            if not self._redone:  # keys chain, so every later stage differs too: once is enough
                changes = _changes(recorded.get("made_of", {}), _as_json(made_of or {}))
                logger.warning(
                    "--resume: stage %s in %s was finished with other inputs or options (%s); it is computed "
                    "again, as is each stage after it that no earlier run finished with these options",
                    name,
                    self.root,
                    "; ".join(changes) if changes else "an input file's size or modification time, or an option",
                )
                self._redone = True
            return None
        damage = _damage(self.path(name), recorded["files"])
        if damage:  # a part lost or cut short since (by hand, a full disk, a crash): reading it would drop rows
            self._say(
                name,
                "--resume: stage %s in %s is not as it was written (%s); it is computed again",
                name,
                self.root,
                damage,
            )
            return None
        if logger.isEnabledFor(logging.INFO):  # _size reads every part's footer: only for -v
            logger.info("stage %s: reused from a previous run (%s)", name, _size(self.path(name)))
        return recorded["counts"]

    def _say(self, name: str, *message) -> None:
        # once a stage: the read stage is asked twice (whether its repeated ids may be reused, then to run)
        if name not in self._said:
            self._said.add(name)
            logger.warning(*message)

    def begin(self, name: str) -> Path:
        """An empty temporary folder for stage ``name`` to write into (a killed run's leftovers go)."""
        tmp = self.root / f"{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        logger.info("stage %s: started", name)
        self._started[name] = time.perf_counter()
        return tmp

    def publish(self, name: str, key: str, counts: dict, made_of: dict | None = None, also: tuple = ()) -> None:
        """Mark the temporary folder of ``name`` finished with ``key``, ``counts`` and ``made_of``
        (as :meth:`finished`) and move it into place. The marker fingerprints its files, and the
        files ``also`` names (the stage's, kept in ``_stages`` beside it), which must stay as they are."""
        tmp, final = self.root / f"{name}.tmp", self.path(name)
        files = _files(tmp, tuple(Path(f) for f in also if Path(f).is_file()))
        marker = {"stage": name, "key": key, "counts": counts, "made_of": _as_json(made_of or {}), "files": files}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        if final.is_symlink():  # a link put in its place by hand: replaced, its target left as it is
            final.unlink()
        shutil.rmtree(final, ignore_errors=True)  # a stale result with another key
        os.replace(tmp, final)
        if logger.isEnabledFor(logging.INFO):
            seconds = time.perf_counter() - self._started.pop(name, time.perf_counter())
            logger.info("stage %s: finished in %.1f s (%s)", name, seconds, _size(final))


def recorded_parts(stages: Path, name: str) -> dict | None:
    """The parts of the key (``made_of``) that stage ``name`` in the ``_stages`` folder ``stages``
    recorded when it finished, or None where it has not (or its marker cannot be read)."""
    marker = stages / name / MARKER
    recorded = _read_marker(marker) if marker.exists() else None
    return None if recorded is None else recorded["made_of"]


def _read_marker(marker: Path) -> dict | None:
    """A stage's marker as :meth:`StageStore.publish` wrote it, or None if it is not one (cut
    short, edited, unreadable)."""
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    kinds = {"key": str, "counts": dict, "files": dict, "made_of": dict}
    fits = isinstance(recorded, dict) and all(isinstance(recorded.get(k), kind) for k, kind in kinds.items())
    return recorded if fits else None


_TAIL = 1 << 16  # bytes of a file's end fingerprinted: a Parquet file's footer (schema, row counts, statistics)


def _fingerprint(path: Path) -> list:
    """``[size in bytes, SHA-256 of the last 64 KiB]``: a Parquet file's footer holds its row
    counts and each column's statistics, so another file of the same size (another run's
    part) differs there. Not the whole file: that would read every stage again."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - _TAIL))
        return [size, hashlib.sha256(f.read()).hexdigest()]


def _files(folder: Path, also: tuple[Path, ...] = ()) -> dict[str, list]:
    """``{path relative to folder: fingerprint}`` of the files a stage folder holds, its marker
    aside, and of ``also`` (files of the stage's kept beside it, as ``../name``)."""
    files = [f for f in sorted(folder.rglob("*")) if f.is_file() and f.name != MARKER]
    named = {f.relative_to(folder).as_posix(): f for f in files} | {f"../{f.name}": f for f in also}
    return {rel: _fingerprint(f) for rel, f in named.items()}


def _damage(folder: Path, written: dict[str, list]) -> str:
    """How a finished stage's files differ from those it wrote (``written``, as :func:`_files`
    gave them at publish): the first file gone, changed or added; "" if none does."""
    for rel, (size, tail) in written.items():
        path = folder / rel
        if not path.is_file():
            return f"{rel} is gone"
        now_size, now_tail = _fingerprint(path)
        if now_size != size:
            return f"{rel} holds {now_size:,} bytes, {size:,} when written"
        if now_tail != tail:
            return f"{rel} is not the file written (another of its size)"
    added = sorted(f.relative_to(folder).as_posix() for f in folder.rglob("*") if f.is_file() and f.name != MARKER)
    added = [rel for rel in added if rel not in written]
    return f"{added[0]} was added" if added else ""


def _as_json(params: dict) -> dict:
    """``params`` as its JSON reads back (tuples become lists), as :func:`stage_key` hashes it."""
    return json.loads(json.dumps(params, sort_keys=True, default=str))


def _changes(before: dict, now: dict, shown: int = 3) -> list[str]:
    """What differs between a stage's recorded ``made_of`` and this run's, as short phrases (at
    most ``shown``, then a count): input files new, gone or changed, then options by dotted name."""
    old, new = _flat(before), _flat(now)
    old_files, new_files = ({path: rest for path, *rest in d.pop("files", [])} for d in (old, new))
    changes = [
        f"input file {path} is new"
        if path not in old_files
        else f"input file {path} changed (size or modification time)"
        for path, rest in new_files.items()
        if old_files.get(path) != rest
    ] + [f"input file {path} is no longer an input" for path in old_files if path not in new_files]
    if not changes and list(old_files) != list(new_files):  # it read as "the worker threads changed"
        changes.append("the input files are listed in another order (a document's key holds its file's place)")
    differ = [k for k in sorted(old | new) if old.get(k) != new.get(k)]
    alone = differ == ["partitions"] and not changes  # the same files and options: the threads asked for them
    changes += [f"{k}: {_brief(old.get(k, 'unset'))} -> {_brief(new.get(k, 'unset'))}" for k in differ]
    if alone:
        changes[0] += _THREADS
    return changes[:shown] + [f"{len(changes) - shown} more"] if len(changes) > shown else changes


_THREADS = (
    " (the worker threads changed: an input under --blocksize a thread is cut into a partition for each; "
    "resume on as many threads, or give --files-per-partition to fix the partitions)"
)


def _brief(value, width: int = 60) -> str:
    # A long value (the partitions' cuts) is named, not quoted whole.
    text = str(value)
    return text if len(text) <= width else f"{text[:width]}…"


def _flat(params: dict, prefix: str = "") -> dict:
    """Nested dicts as one dict of dotted names (``fuzzy.threshold``); other values as they are."""
    flat = {}
    for k, v in params.items():
        flat |= _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}
    return flat


# What a row of each stage's table is (noun, what follows it), for -v's log: "0 rows" of the
# read stage read as "nothing read". A stage of several tables names each as STAGE/TABLE.
_ROWS = {
    "read": ("document", " whose md5 another shares"),
    "exact": ("document", " of exact groups, with its representative"),
    "minhash+lsh/edges": ("candidate pair", ""),
    "minhash+lsh/stars": ("row", " of buckets of 3 or more"),
    "select": ("text", " of candidates"),
    "verify": ("candidate pair", ", with its Jaccard"),
    "member_pairs/pairs": ("member pair", ""),
    "verify_members": ("member pair", ", with its Jaccard"),
    "components": ("document", " of components"),
    "groups": ("document", " of near-duplicate groups, with its representative"),
    "removed": ("document", " removed"),
    "duplicates": ("document", " of groups"),
}


def _size(folder: Path) -> str:
    """What a stage folder holds: rows of each table (from the Parquet footers), files and bytes
    on disk; e.g. "2,527 documents whose md5 another shares; 1 Parquet file, 65.58 kiB"."""
    files = [f for f in folder.rglob("*") if f.is_file()]
    parts = [f for f in files if f.suffix == ".parquet"]
    rows: dict[str, int] = {}
    for f in parts:
        table = f.parent.relative_to(folder).as_posix()
        rows[table] = rows.get(table, 0) + pq.read_metadata(f).num_rows
    held = "; ".join(_rows_of(folder.name, table, n) for table, n in sorted(rows.items()))
    return f"{held or 'no table'}; {counted(len(parts), 'Parquet file')}, {format_bytes(sum(f.stat().st_size for f in files))}"


def _rows_of(stage: str, table: str, n: int) -> str:
    name = stage if table == "." else f"{stage}/{table}"
    if name in _ROWS:
        noun, tail = _ROWS[name]
        return f"{counted(n, noun)}{tail}"
    return counted(n, "row") if table == "." else f"{table}: {counted(n, 'row')}"


def remove_stages(root: Path) -> None:
    """Delete a run's ``_stages`` folder. Markers go first, so a deletion cut short leaves no
    stage that a later ``--resume`` would take for finished."""
    for marker in root.glob(f"*/{MARKER}"):
        marker.unlink()
    shutil.rmtree(root, ignore_errors=True)


def read_stage_frame(path: Path, divisions: tuple[int, ...] | None = None) -> dd.DataFrame:
    """A stage's Parquet folder (written by :func:`curate.backend.to_parquet`) as a frame with one
    partition per file, in the order written.

    Dask's ``read_parquet`` may merge files into fewer partitions once a later step reads only
    some columns (dask-expr's fused Parquet reads), so a frame joined partition by partition to
    another (:mod:`curate.dedup.keys`) or given divisions could stop matching them, and the
    graph then names partitions that were never made (``lost dependencies``). Here the
    partitioning is fixed.

    Parameters
    ----------
    path : Path
        The folder of ``part.<i>.parquet`` files.
    divisions : tuple of int, optional
        A document frame's divisions: partition ``i`` holds the ``_doc`` keys in
        ``[divisions[i], divisions[i + 1])``; the frame is then indexed by ``_doc``.

    Returns
    -------
    dask.dataframe.DataFrame
        Partitions of ``dataframe.backend``'s type (pandas or cudf).

    Raises
    ------
    ValueError
        If ``divisions`` does not give one range per file.
    """
    files = sorted(path.glob("part.*.parquet"), key=lambda f: int(f.name.split(".")[1]))
    if divisions is not None and len(divisions) != len(files) + 1:
        raise ValueError(f"{path} holds {len(files)} partitions, its divisions {len(divisions) - 1}")
    frame_backend = dask.config.get("dataframe.backend", "pandas")  # workers do not see the client's config
    indexed = divisions is not None
    schema = stage_schema(files)
    meta = _stage_partition(schema.empty_table(), frame_backend, indexed)
    return arrow_partitions(
        functools.partial(pq.read_table, schema=schema), [[str(f)] for f in files],
        functools.partial(_stage_partition, frame_backend=frame_backend, indexed=indexed),
        meta=meta, divisions=divisions, label="read-stage",
    )  # fmt: skip


def stage_schema(files: list[Path]) -> pa.Schema:
    """The one Arrow schema of a stage's files, read from their footers (no data is read).

    Each partition is written on its own, so the files of one frame may type a column
    differently: Arrow's ``null`` where a partition had no value to infer a type from, ``string``
    or ``large_string``, narrower integers. pandas concatenates such partitions, cudf's concat
    refuses them ("All columns must be the same type"), so every file is read in the types that
    hold all of them (Arrow's permissive promotion).
    """
    return pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")


def _stage_partition(table: pa.Table, frame_backend: str, indexed: bool):
    frame = table.to_pandas() if frame_backend == "pandas" else from_arrow(table, frame_backend)
    if indexed:
        frame.index = frame[DOC].values
        return frame
    # A RangeIndex, as pandas gives: cudf's from_arrow gave an integer Index on the H200 (RAPIDS
    # 26.10), and cudf's concat takes such an index as a column unless every piece has a RangeIndex.
    return frame.reset_index(drop=True)


class Checkpoints:
    """The stages of :mod:`curate.dedup.stages` written to ``OUT/_stages`` and read back.

    Each stage's key chains its name and parameters to the key of the stage before it, so
    ``--resume`` reuses a stage only when nothing it depends on changed. A stage's frames are
    Parquet folders; its counts (Dask scalars in the result) are computed with them and kept
    in the stage's marker. A document frame (known divisions) comes back indexed by ``_doc``
    with its divisions, so that the stages after it can join keys to it where it lies.

    Parameters
    ----------
    run : curate.pipeline's runner
        Computes a stage's writes (``run(name, **collections)``) and holds the ``store`` and ``stats``.
    key : str
        The key of the stage before the first.
    counters : dict, optional
        ``{stage name: counter}``: ``counter(result)`` gives Dask scalars (by name) of the stage's
        result as built, computed together with its writes (no pass of their own) and kept in
        the marker; after the stage they are ints in :attr:`counted` ``[name]``.
    """

    def __init__(self, run, key: str, counters: dict | None = None):
        self.run, self.key, self.counters = run, key, counters or {}
        self.counted: dict[str, dict[str, int]] = {}
        self.previous: str | None = None  # the stage before, named in the marker (another --mode changes it)

    def __call__(self, name: str, params: dict, build):
        self.key = stage_key(name, params, (self.key,))
        made_of = params | ({"previous stage": self.previous} if self.previous else {})
        self.previous = name

        def compute(path: Path) -> dict:
            with self.run.stats.timed(name):  # building may compute (the count that picks components' path)
                built = build()
            parts = {None: built} if isinstance(built, dd.DataFrame) else built
            frames = {k: v for k, v in parts.items() if isinstance(v, dd.DataFrame)}
            lazy = {k: v for k, v in parts.items() if k not in frames and hasattr(v, "dask")}
            writes = {f"frame {k}": to_parquet(frame, path / k if k else path) for k, frame in frames.items()}
            tallies = self.counters[name](built) if name in self.counters else {}
            done = self.run(name, **writes, **lazy, **{f"counted {k}": v for k, v in tallies.items()})
            counts = {k: int(done[k]) for k in lazy} | {
                k: v for k, v in parts.items() if k not in frames and k not in lazy
            }
            divisions = {
                k or "": list(frame.divisions)
                for k, frame in frames.items()
                if frame.known_divisions and DOC in frame.columns
            }
            counted = {k: int(done[f"counted {k}"]) for k in tallies}
            return {"counts": counts, "counted": counted, "frames": [k or "" for k in frames], "divisions": divisions}

        recorded = self.run.stage(name, self.key, compute, made_of)
        self.counted[name] = recorded["counted"]
        path = self.run.store.path(name)
        out = dict(recorded["counts"])
        for k in recorded["frames"]:
            divisions = recorded["divisions"].get(k or "")
            out[k] = read_stage_frame(path / k if k else path, divisions and tuple(divisions))
        return out[""] if recorded["frames"] == [""] else out
