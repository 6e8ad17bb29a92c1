"""What a run can check before any cluster starts: its inputs, their fields and the output folder.

``curate dedup`` runs these first, so that a mistake costs about a second rather than the
7-12 s of importing Dask and starting a cluster: only :mod:`curate.io.files` (fsspec, pyarrow)
is imported here. Each error says which flag or argument fixes it.
:func:`curate.pipeline.dedup` calls :func:`check_output` too.
"""

import contextlib
import glob
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import get_protocol, glob_translate

from curate.config import IOConfig, parse_keep
from curate.io.files import (
    check_ordered,
    find_inputs,
    first_few,
    glob_root,
    sample_files,
    shown_types,
    source_names,
    types_found,
    unify_schemas,
)
from curate.schema import PART_DIGITS

# A run's outputs; summary.json first: when replacing a run, a reader must never take the old
# summary for new outputs.
OUTPUTS = ("summary.json", "deduplicated", "rejected", "duplicates.parquet", "removed.parquet", "report.html")
PARTIAL = (
    "deduplicated.tmp",
    "rejected.tmp",
    "duplicates.parquet.tmp",
    "removed.parquet.tmp",
    "summary.json.tmp",
    "report.html.tmp",  # curate report's
)  # what a run killed while writing leaves
STAGES = "_stages"
MARKER = "_marker.json"  # in each finished stage's folder (curate.checkpoints)
_EXTENSIONS = ("parquet", "jsonl", "jsonl.gz", "jsonl.zst")
_WRITTEN = re.compile(rf"part\.\d+\.({'|'.join(map(re.escape, _EXTENSIONS))})")  # in deduplicated/ and rejected/
REPEATED_IDS = "repeated_ids-{key}.parquet"  # in _stages: a skipping run's repeated ids, by the read's key
_REPEATED_IDS = re.compile(r"repeated_ids-[0-9a-f]{16}\.parquet")
_SKIP_HINT = "or --on-error skip lists such records in OUT/rejected/"


class OutputBusyError(RuntimeError):
    """Another process holds the output folder (:func:`hold_output`)."""


@dataclass(frozen=True)
class Inputs:
    """The input files as :func:`check_inputs` found them.

    Attributes
    ----------
    paths : tuple of str
        Every file, in read order (see :func:`curate.io.files.expand_paths`).
    fmt : {"jsonl", "parquet"}
    fields : tuple of str
        The fields found at the start of the files, in the order first seen.
    warnings : tuple of str
        Skipping bad records (``on_error="skip"``): one sentence for each file whose first
        records lack a field every record needs, or hold no string as the text; its records
        will be rejected (failing, the first such file is an error). And one where some
        file's ids are integers and others' not: all are read as strings.
    converted : tuple of str
        One sentence for each field whose types in the files have no one Arrow type (``int64``
        in one file and ``string`` in another, a timestamp with a time zone and one without, ``{}``): it is
        read as each value's JSON text, a string, which Parquet output holds.
    """

    paths: tuple[str, ...]
    fmt: str
    fields: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    converted: tuple[str, ...] = ()


def check_inputs(inputs: list[str], io: IOConfig, keep: str = "first") -> Inputs:
    """Check that ``inputs`` name readable files of one format holding the fields the run reads.

    The fields are those of the start of every file (the first MiB of JSONL, the Parquet
    schema), as :func:`curate.io.read_documents` finds them. With ``io.on_error == "fail"``,
    a file whose first records all lack the text field (or the id field, where ids are not
    assigned) would stop the run at its first record, so it stops here instead; skipping,
    :attr:`Inputs.warnings` names it.

    Parameters
    ----------
    inputs : list of str
        Files, directories, globs or fsspec URLs.
    io : IOConfig
    keep : str, default="first"
        The keep policy; ``max:COLUMN`` / ``min:COLUMN`` need COLUMN in some file.

    Returns
    -------
    Inputs

    Raises
    ------
    FileNotFoundError
        If an input matches no file.
    PermissionError
        If a file cannot be opened.
    ValueError
        If the files mix formats or have an unknown type, if no file has the text field (or the
        given id field, or the keep column), if the keep column's values do not order (values
        of several types, lists), or, failing on bad records, if a file's first
        records lack a field every record needs or hold a text that is not a string.
    """
    fs, paths, fmt, _, _ = find_inputs(inputs)
    samples = sample_files(fs, paths, fmt)
    per_file = [dict.fromkeys(name for schema in schemas for name in schema.names) for schemas, _ in samples]
    fields = tuple(dict.fromkeys(name for found in per_file for name in found))
    found = Inputs(tuple(paths), fmt, fields)
    if not fields:  # no records at all: an empty run
        return found
    listed = f"(fields: {list(fields)})"
    if io.text_field not in fields:
        raise ValueError(
            f"no text field {io.text_field!r} in any input file {listed}; --text-field names the field that holds the text"
        )
    if io.id_field_given and io.id_field not in fields:
        # Left out, the id field is the default's where the input has it: "ids are assigned" was
        # said of an input whose records have ids.
        default = IOConfig.model_fields["id_field"].default
        unset = f"the field {default!r} is used" if default in fields else "ids are assigned"
        raise ValueError(
            f"no id field {io.id_field!r} in any input file {listed}; --id-field names the field that holds the ids "
            f"(left out, {unset})"
        )
    try:
        column = parse_keep(keep)[1]
    except ValueError:
        column = None  # the config's validation says what is wrong with it
    if column is not None and column not in fields:
        raise ValueError(f"--keep {keep}: no field {column!r} in any input file {listed}")
    names = source_names(paths)
    per_source = [(source, schemas) for source, (schemas, _) in zip(names, samples)]
    schema, json_text = unify_schemas(
        [schema for _, schemas in per_source for schema in schemas], io.text_field, io.id_field
    )
    if column is not None:
        check_ordered(column, schema, json_text, per_source)
    converted = tuple(
        f"field {name!r} is read as each value's JSON text, a string, as no one type holds its values "
        f"({shown_types(types_found(name, per_source))})"
        for name in schema.names
        if name in json_text
    )
    # A file whose first records lack a field every record needs (or hold no string as the text)
    # would stop a failing run at its first record, after the cluster started: it stops here.
    # Skipping, its records are all rejected: a wrong field more likely than bad data, and a
    # whole source that did not count towards the warning on half the records went unsaid.
    having = {  # the needed fields' files, named
        f: first_few([n for n, got in zip(names, per_file) if f in got], sep=", ")
        for f in {io.text_field, io.id_field} & set(fields)
    }
    required = {io.text_field: _field_fix("--text-field", having[io.text_field])}
    if io.id_field_given:
        required[io.id_field] = _field_fix("--id-field", having[io.id_field])
    elif io.id_field in fields:  # else ids are assigned
        required[io.id_field] = (
            f"other input files have it ({having[io.id_field]}), so every record needs one (ids are assigned only "
            "where no file has the field): give this file's records ids, --id-field names a field they all have"
        )
    problems = []
    for name, path, present, (schemas, _) in zip(names, paths, per_file, samples):
        for field, fix in required.items():
            if present and field not in present and _has_rows(fs, path, fmt):
                problems.append(f"{name}: no field {field!r} in its first records (fields: {list(present)}); {fix}")
        texts = [f for s in schemas for f in s if f.name == io.text_field]
        other = next((f for f in texts if not _text_type(f)), None)
        # (One bad record among strings is named with its line by the run.)
        if (
            other is not None
            and not any(_text_type(f) and f.type != pa.null() for f in texts)
            and _has_rows(fs, path, fmt)
        ):
            problems.append(
                f"{name}: field {io.text_field!r} holds {_kind(other)} in its first records, not strings; "
                "--text-field names the field that holds the text"
            )
    if problems and io.on_error == "fail":
        raise ValueError(f"{problems[0]}, {_SKIP_HINT}")
    warnings = [f"{p}; --on-error skip rejects its records" for p in problems]
    return replace(found, warnings=(*warnings, *_string_ids(schema, per_source, io.id_field)), converted=converted)


# What ids read as strings, some of them integers, become in the outputs.
STRING_IDS = (
    'removed.parquet, duplicates.parquet and Parquet output hold the integer 7 as "7"; JSONL output keeps '
    "each record's own, a mix that pyarrow.json and datasets refuse"
)


def _string_ids(schema: pa.Schema, per_source: list[tuple[str, list[pa.Schema]]], id_field: str) -> list[str]:
    """A sentence where ids are read as strings though some file's are integers (none otherwise)."""
    if id_field not in schema.names or pa.types.is_integer(schema.field(id_field).type):
        return []
    found = types_found(id_field, per_source)
    # (Integers beyond 2**53 are marked so, beyond int64 too: _MARKED's words.)
    if not any(re.fullmatch(r"u?int\d+|integers beyond .*", kind) for kinds in found.values() for kind in kinds):
        return []
    return [f"ids are read as strings, as not every file's ids are integers ({shown_types(found)}): {STRING_IDS}"]


def _field_fix(flag: str, having: str) -> str:
    """How to name the field of a file that lacks it, where the files ``having`` it (named, "" for
    none) have it: the flag, which names it for every file."""
    if not having:
        return f"{flag} names another field"
    return (
        f"other input files have it ({having}) and {flag} names one field for every file: "
        "give this file a run of its own, or read each source with curate.read_documents and concatenate them "
        '(README, "Sources of several shapes")'
    )


def _text_type(field: pa.Field) -> bool:
    """Whether a sampled field can be a text: strings (Parquet: large or dictionary-encoded, or
    binary, which Hive and older Spark write strings as and the reader takes as UTF-8:
    :func:`curate.io.read._binary_as_strings`), or nulls."""
    dtype = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    unmarked_null = pa.types.is_null(dtype) and not field.metadata
    return unmarked_null or any(
        check(dtype)
        for check in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)
    )


def _kind(field: pa.Field) -> str:
    dtype = field.type
    if field.metadata:  # marked by the sample (curate.io.files): an integer beyond int64, a mixed array
        return "numbers or mixed arrays"
    if pa.types.is_struct(dtype):
        return "objects"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return "arrays"
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return "numbers"
    return "booleans" if pa.types.is_boolean(dtype) else str(dtype)


def _has_rows(fs, path: str, fmt: str) -> bool:
    # A JSONL file with fields in its sample has records; a Parquet schema may belong to no rows.
    if fmt == "jsonl":
        return True
    with fs.open(path, "rb") as f:
        return pq.read_metadata(f).num_rows > 0


def check_output(
    out_dir: str | os.PathLike,
    *,
    overwrite: bool = False,
    resume: bool = False,
    inputs: tuple[str, ...] = (),
    files: tuple[str, ...] = (),
) -> None:
    """Check that ``out_dir`` can take a run: a folder (or creatable), writable, not in use by
    another run, apart from the inputs, holding no previous run unless asked to replace or
    resume it. Creates nothing.

    Parameters
    ----------
    out_dir : str or path
    overwrite, resume : bool, default=False
        As :func:`curate.pipeline.dedup`: replace a previous run's outputs, or reuse its stages.
    inputs : tuple of str, default=()
        The inputs as given (files, folders, globs): ``out_dir`` may not lie in an input folder,
        where a later run would read its outputs as input.
    files : tuple of str, default=()
        The input files (:attr:`Inputs.paths`); none may lie inside ``out_dir``.

    Raises
    ------
    ValueError
        If ``out_dir`` is a URL, both ``overwrite`` and ``resume`` are set, or ``out_dir`` and the
        inputs overlap.
    NotADirectoryError
        If ``out_dir`` (or a folder above it) is a file.
    PermissionError
        If ``out_dir`` cannot be created or written.
    OutputBusyError
        If another process holds ``out_dir`` (see :func:`hold_output`).
    FileExistsError
        If ``out_dir`` holds a previous run's outputs or finished stages (unfinished ones
        are replaced) and neither
        ``overwrite`` nor ``resume`` is set, or outputs without stages (nothing to resume) and
        ``overwrite`` is not set, or its ``deduplicated/`` or ``rejected/`` folder holds files that
        no run writes (a run would delete them).
    """
    if "://" in str(out_dir):  # Path() would make s3://b/out the local folder s3:/b/out
        raise ValueError(
            f"output {out_dir} is a URL: the output must be a local (or mounted) folder; copy it from there"
        )
    out = Path(out_dir)
    if overwrite and resume:
        raise ValueError("give --overwrite or --resume, not both")
    check_folder(out)
    if out.is_dir():
        with hold_output(out):  # in use by another run: that first (it also explains what the folder holds)
            pass
    where = Path(os.path.realpath(out))
    reader = next((i for i in inputs if get_protocol(i) in ("file", "local") and _lists_outputs(i, where)), None)
    if reader is not None:
        kind = "folder" if os.path.isdir(reader) else "pattern"
        raise ValueError(
            f"output folder {out} is inside the input {kind} {reader}, so a later run would read its outputs; choose another -o"
        )
    inside = next((f for f in files if "://" not in f and Path(os.path.realpath(f)).is_relative_to(where)), None)
    if inside is not None:
        raise ValueError(
            f"input file {inside} is inside the output folder {out}, where a run writes and deletes; choose another -o"
        )
    held = [name for name in (*OUTPUTS, *PARTIAL) if (out / name).exists()]
    # Stages count once one has finished: a run stopped before that left nothing to reuse.
    held += [STAGES] if any((out / STAGES).glob(f"*/{MARKER}")) else []
    foreign = _foreign_files(out)
    if foreign:  # a run deletes these folders whole, with --overwrite and --resume alike
        folder = out / foreign[0].relative_to(out).parts[0]
        raise FileExistsError(
            f"{folder} holds {len(foreign)} file(s) no run writes, e.g. {str(foreign[0].relative_to(folder))!r}, "
            "and a run replaces that folder: move them, or choose another -o"
        )
    if not held or overwrite or (resume and STAGES in held):
        return
    names = ", ".join(held)
    if STAGES in held:
        raise FileExistsError(
            f"{out} already holds {names}; pass --resume to reuse its finished stages or --overwrite to replace them"
        )
    # Outputs without stages: --resume would recompute everything and replace them.
    why = " and no finished stages to reuse (a run that succeeds removes them; --keep-stages keeps them)"
    finished = "summary.json" in held
    what = "a finished run" if finished else "outputs of a run that did not finish (no summary.json)"
    # (A run stopped after its outputs, while removing its stages or writing its report, is finished.)
    report = f"; its outputs are complete, and `curate report {out}` writes report.html" if finished else ""
    raise FileExistsError(
        f"{out} already holds {names}: {what}{why if resume else ''}"
        f"{report if resume and 'report.html' not in held else ''}; pass --overwrite to replace it"
    )


def _lists_outputs(item: str, where: Path) -> bool:
    """Whether the local input folder or glob ``item`` would list a file a run writes in the
    folder ``where`` (a real path): ``data/`` and ``data/**/*.jsonl`` do for ``data/out``,
    ``data/*.jsonl`` and ``data/`` for ``data/_out`` do not (a folder's or glob's names starting
    with . or _ are not read: :func:`curate.io.files.find_inputs`)."""
    item = LocalFileSystem._strip_protocol(item)  # file:///a/b is /a/b
    folder = os.path.isdir(item)
    root = item if folder else glob_root(LocalFileSystem(), item)
    if root is None or not where.is_relative_to(real := os.path.realpath(root or ".")):
        return False
    if any(part.startswith((".", "_")) for part in where.relative_to(real).parts):
        return False
    if folder:
        return True
    # (the folder's own name is no pattern: a [ in it matched nothing)
    pattern = re.compile(glob_translate(os.path.join(glob.escape(real), item[len(root) :])))
    written = [where / name for name in OUTPUTS if "." in name]  # summary.json is JSONL to a glob of *.json
    written += [
        where / folder / f"part.{0:0{PART_DIGITS}d}.{ext}"
        for folder in ("deduplicated", "rejected")
        for ext in _EXTENSIONS
    ]
    return any(pattern.match(str(path)) for path in written)


def _foreign_files(out: Path) -> list[Path]:
    """What OUT's document folders hold besides the ``part.N.*`` files a run writes there, and
    ``_stages`` besides its stages (``STAGE/_marker.json``, ``STAGE/[TABLE/]part.N.parquet``) and
    repeated ids (``repeated_ids-KEY.parquet``)."""
    folders = [out / name for name in ("deduplicated", "rejected", *PARTIAL) if (out / name).is_dir()]
    found = [p for folder in folders for p in sorted(folder.iterdir()) if not _WRITTEN.fullmatch(p.name)]
    stages = out / STAGES
    if stages.is_dir():
        files = [p for p in sorted(stages.rglob("*")) if not p.is_dir()]
        found += [p for p in files if not _stage_file(p.relative_to(stages).parts)]
    return found


def _stage_file(parts: tuple[str, ...]) -> bool:
    if len(parts) == 1:
        return bool(_REPEATED_IDS.fullmatch(parts[0]))
    return (len(parts) == 2 and parts[1] == MARKER) or (len(parts) in (2, 3) and bool(_WRITTEN.fullmatch(parts[-1])))


def check_folder(folder: str | os.PathLike, what: str = "output", flag: str = "-o") -> None:
    """Check that ``folder`` is a writable folder or can be made one, before anything starts.

    Raises
    ------
    NotADirectoryError
        If it, or a folder above it, is a file: ``<what> <folder>: <file> is a file, not a folder; <flag> names a folder``.
    PermissionError
        If its nearest existing folder cannot be written.
    """
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise NotADirectoryError(f"{what} {folder}: {existing} is a file, not a folder; {flag} names a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"{what} {folder}: cannot write in {existing}; choose another {flag}")


_held: set[str] = set()  # output folders this process holds


@contextlib.contextmanager
def hold_output(out_dir: str | os.PathLike):
    """Create ``out_dir`` and hold it for this process during the ``with`` block; a folder it
    created and that is still empty at the end is removed.

    An exclusive ``flock`` on the folder itself, so two runs never write into one folder, and
    a run that dies (even by ``kill -9``) lets go of it. Re-entrant within a process. Where the
    file system has no locks (or on Windows), nothing is held.

    Raises
    ------
    OutputBusyError
        If another process holds ``out_dir``.
    NotADirectoryError, PermissionError
        As :func:`check_output`.
    """
    out = Path(out_dir)
    check_folder(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(out)
    try:
        import fcntl
    except ImportError:  # Windows
        fcntl = None
    if key in _held or fcntl is None:
        yield
        return
    fd = os.open(out, os.O_RDONLY)  # not inherited by worker processes (PEP 446)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputBusyError(
                f"output folder {out} is in use by another curate run; wait for it to end or choose another -o"
            ) from None
        except OSError:
            pass  # no locks on this file system
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)
            if created:  # a run that wrote nothing (it could not reach its cluster) leaves no folder
                with contextlib.suppress(OSError):
                    out.rmdir()  # only if empty
    finally:
        os.close(fd)  # and with it the lock
