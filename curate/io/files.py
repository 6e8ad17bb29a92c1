"""What the input files are: their paths, format, compression and fields, without reading them whole.

Light on purpose (fsspec, pyarrow, numpy; no Dask, no pandas): the command line checks its
inputs with it before it starts a cluster (:mod:`curate.checks`), and
:func:`curate.io.read_documents` builds on the same functions.
"""

import contextlib
import io
import json
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from fsspec.utils import get_protocol, infer_compression
from zlib_ng import gzip_ng, zlib_ng

from curate.io.records import TOO_DEEP, Fields, Layout, parse_records, record_lines, without_views

_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_COMPRESSED = {".gz": "gzip", ".zst": "zstd"}
BOM = b"\xef\xbb\xbf"
_SAMPLE_BYTES = 1 << 20  # of each JSONL file, to find its fields and their types
_CHUNK = 1 << 20
# The files an input folder is searched for, as help and messages name them.
FORMATS = "JSONL (.jsonl, .json, .ndjson; also .gz or .zst) or Parquet (.parquet)"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_DECODERS = {
    "gzip": lambda: zlib.decompressobj(zlib.MAX_WBITS | 16),
    "zstd": lambda: zstandard.ZstdDecompressor().decompressobj(),
}
# The packages through which fsspec reaches remote storage, whose own errors are no OSErrors
# (botocore's EndpointConnectionError, NoCredentialsError): a 156-line traceback in a trial.
_STORAGE_CLIENTS = frozenset({"botocore", "aiobotocore", "s3fs", "gcsfs", "google", "aiohttp", "adlfs", "azure"})


def storage_client_error(err: BaseException) -> bool:
    """Whether ``err`` is a remote storage client's own error (a wrong endpoint, no
    credentials), raised by one of the packages fsspec reaches S3, GCS or Azure through."""
    return type(err).__module__.split(".")[0] in _STORAGE_CLIENTS


@contextlib.contextmanager
def naming(fs, where: str):
    """Errors of the remote storage behind the input ``where`` (a URL on ``fs``) raised as
    OSErrors that name it: a storage client's own error as a ConnectionError (``s3://b/x:
    EndpointConnectionError: ...``), an OSError whose words lack it (s3fs's ``Access Denied``)
    with ``where:`` in front, in its own class. On the local file system, errors as they are
    (an OSError names its file)."""
    if isinstance(fs, LocalFileSystem):
        yield
        return
    try:
        yield
    except OSError as err:
        if where in str(err):
            raise
        try:
            renamed = type(err)(f"{where}: {err}")
        except TypeError:  # a class of its own arguments
            renamed = OSError(f"{where}: {err}")
        raise renamed from err
    except Exception as err:
        if not storage_client_error(err):
            raise
        raise ConnectionError(f"{where}: {type(err).__name__}: {err}") from err


def expand_paths(inputs: list[str] | str) -> tuple[object, list[str], str]:
    """Files named by paths, directories, globs or fsspec URLs: one canonical list, one format.

    Each argument's files are sorted; the arguments keep their order. Local paths become
    absolute, so files, folders and globs, absolute or relative, mix freely. A file named by
    more than one argument (a folder and a file inside it, a glob and a path, a symlink and its
    target) is listed once, where it first appears; :func:`read_documents` logs such overlaps.
    A folder's or glob's files named otherwise than as data are left out, and
    :func:`read_documents` logs them; names starting with ``.`` or ``_``, and all that folders
    so named hold, are not data by convention and are left out without a word.

    Returns
    -------
    fs : fsspec.AbstractFileSystem
    paths : list of str
    fmt : {"jsonl", "parquet"}

    Raises
    ------
    FileNotFoundError
        If an input matches no file, or a broken symbolic link.
    ValueError
        If the files mix formats or have an unknown extension, the inputs lie on several file
        systems (local and ``s3://``), the package that reads a URL's protocol (s3fs,
        gcsfs, ...) is not installed, or a file's name is not UTF-8.
    """
    fs, paths, fmt, _, _ = find_inputs(inputs)
    return fs, paths, fmt


def reference_files(reference: list[str], inputs: list[str]) -> int:
    """How many files ``reference`` names: read before those ``inputs`` names (``curate dedup
    --reference``), they are the first files of ``expand_paths([*reference, *inputs])``.

    Raises
    ------
    ValueError
        If a file is named both as a reference and as an input (which would it be?), or as
        :func:`expand_paths` (of either, or of both together: one format, one file system).
    FileNotFoundError
        As :func:`expand_paths`.
    """
    try:
        _, ours, _ = expand_paths(reference)
    except (FileNotFoundError, ValueError) as err:  # "input ... matches no file" of a reference
        raise type(err)(f"--reference: {err}") from None
    try:  # one format and one file system for both; the files that several of them name
        _, _, _, repeats, _ = find_inputs([*reference, *inputs])
    except ValueError as err:
        raise ValueError(f"--reference and INPUT: {err}") from None
    # A file first named by a reference and named again by an input (under any spelling: a link too).
    given, named = set(reference), set(inputs)
    both = sorted({path for path, first, again, _ in repeats if first in given and again in named})
    if both:
        raise ValueError(
            f"{counted(len(both), 'file')} named both as --reference and as input: {first_few(both)}; "
            "a reference document is kept and not written, an input's may be removed: name each file once"
        )
    return len(ours)


def find_inputs(inputs) -> tuple[object, list[str], str, list[tuple[str, str, str, str]], list[str]]:
    """:func:`expand_paths`, the repeats left out: (path as first named, the input that first
    named it, the input naming it again, the path as named again), and the files that folders
    and globs hold under names other than data's (not those starting with . or _), left out.

    Raises FileNotFoundError and ValueError as :func:`expand_paths` (which calls this) documents."""
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    # One file system reads every input: a URL after local paths was looked for on the local disk.
    systems = {"local" if protocol in ("file", "local") else protocol for protocol in map(get_protocol, inputs)}
    if len(systems) > 1:
        raise ValueError(
            f"the inputs lie on {len(systems)} file systems ({', '.join(sorted(systems))}): give one run the inputs "
            "of one, local files or URLs of one protocol"
        )
    try:
        fs, _ = url_to_fs(inputs[0])
    except ImportError as err:  # fsspec knows the protocol; the package that reads it is missing
        raise ValueError(f"input {inputs[0]!r}: {err}") from None
    local = isinstance(fs, LocalFileSystem)
    if not local:  # the store as it is now: s3fs answered from the listing it cached at the start, so an
        fs.invalidate_cache()  # object replaced mid-run was no change, and its read's error named none
    first: dict[str, tuple[str, str]] = {}  # identity -> (path, input)
    repeats, skipped = [], []
    for item in inputs:
        with naming(fs, item):
            root, listed = _listed(fs, item)
        found, others, hidden, base = [], [], [], None if root is None else fs._strip_protocol(root)
        named = lambda path: os.path.abspath(path) if local else fs.unstrip_protocol(path)  # noqa: E731 (in messages)
        for path in sorted(listed):
            # Names starting with . or _, and whatever folders so named hold, are not data by
            # convention (as Spark and Arrow datasets read them): .crc, _SUCCESS, Parquet's
            # _metadata, Spark's _temporary/, .ipynb_checkpoints/, .git/. Any other file a folder
            # or glob holds is named in a warning (a .jl or .bz2 file was lost without a word).
            # A file named itself is read, or refused below.
            below = None if base is None else os.path.relpath(path, base).split(os.sep)
            if below and any(part.startswith((".", "_")) for part in below):
                hidden.append(named(path))
                continue
            if below is None or _format_of(path):
                found.append(path)
            else:
                others.append(named(path))
        if base is not None and (why := _not_data(item, base, found, others, named)):
            raise ValueError(why)
        if not found:
            with naming(fs, item):
                why = _nothing_found(fs, item, others, hidden)
            raise FileNotFoundError(f"input {item!r} matches no JSONL or Parquet file: {why}")
        skipped += others
        for path in found:
            path = fs._strip_protocol(path)  # file:///a/b is /a/b
            path = os.path.abspath(path) if local else path
            if local and os.path.islink(path) and not os.path.exists(path):
                raise FileNotFoundError(
                    f"input {item!r}: {path} is a broken symbolic link (to {os.readlink(path)}); remove it, or name the other files"
                )
            # The same file under another spelling: a relative path, a symlink, "a/../a".
            identity = os.path.realpath(path) if local else path
            if identity in first:  # shown under the spelling that first named it (a URL with its protocol)
                path_first, item_first = first[identity]
                repeats.append((named(path_first), item_first, item, named(path)))
            else:
                first[identity] = (path, item)
    paths = [path for path, _ in first.values()]
    for path in paths:
        # A name that is not UTF-8 (from an old archive) reaches Python as surrogates, which no
        # assigned id, source column or message holds: the run failed with "Error: " alone.
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise ValueError(
                f"input file {shown}: its name is not UTF-8, which curate records it in (ids, removed.parquet); "
                "rename it (convmv -f latin1 -t utf-8 renames files named in Latin-1)"
            ) from None
    formats = {_format_of(p) for p in paths}
    if None in formats:
        bad = next(p for p in paths if _format_of(p) is None)
        raise ValueError(f"{bad}: unknown file type (expected {FORMATS})")
    if len(formats) > 1:
        examples = ", ".join(f"{fmt} {next(p for p in paths if _format_of(p) == fmt)}" for fmt in sorted(formats))
        raise ValueError(
            f"inputs mix formats ({examples}); give one kind of file per run, or read each kind with "
            'curate.read_documents and concatenate them (README, "Sources of several shapes")'
        )
    if not local:
        paths = [fs.unstrip_protocol(p) for p in paths]
    return fs, paths, formats.pop(), repeats, list(dict.fromkeys(skipped))


def _not_data(item: str, base: str, found: list[str], others: list[str], named) -> str | None:
    """Why the folder or glob ``item`` (``base``: the folder it lists) is not documents, where it
    holds a curate run's output or is a Hugging Face ``save_to_disk`` folder (``found``: its
    files named as data, ``others``: the rest; ``named``: a path as messages give it); None for
    any other. Read as documents, an output's ``summary.json`` mixed formats with its Parquet,
    and a saved dataset's ``dataset_info.json`` was read as a record (its ``.arrow`` files
    skipped): the errors named neither."""
    held = set(found)
    kept = lambda run: any(path.startswith(os.path.join(run, "deduplicated", "")) for path in found)  # noqa: E731
    folders = {os.path.dirname(path) for path in found if os.path.basename(path) == "summary.json"}
    runs = sorted(d for d in folders if kept(d) or os.path.join(d, "removed.parquet") in held)
    if runs:
        if any(c in item for c in "*?["):  # a glob: the folders found, not the pattern joined to them
            show = named
        else:
            show = lambda path: os.path.normpath(os.path.join(item, os.path.relpath(path, base)))  # noqa: E731
        copies = [show(os.path.join(run, "deduplicated")) for run in runs if kept(run)]
        advice = [f"name the kept documents, {first_few(copies)}"] if copies else []
        if len(copies) < len(runs):
            advice.append(
                "a run with --identify-only wrote none (its removed.parquet lists the documents to leave out)"
            )
        return (
            f"input {item!r} holds the output of {counted(len(runs), 'curate run')} "
            f"({first_few([show(os.path.join(run, 'summary.json')) for run in runs])}): {'; '.join(advice)}"
        )
    saved = {"dataset_info.json", "state.json", "dataset_dict.json"}
    if any(path.endswith(".arrow") for path in others) and any(os.path.basename(path) in saved for path in found):
        return (
            f"input {item!r} is a Hugging Face datasets folder (save_to_disk: .arrow files), which curate "
            "does not read: write the dataset with Dataset.to_parquet or Dataset.to_json"
        )
    return None


def _listed(fs, item: str) -> tuple[str | None, list[str]]:
    """The folder an input's files are named below (None: a file named itself), and its files."""
    if fs.isdir(item):
        return item, fs.find(item)
    if (root := glob_root(fs, item)) is not None:  # a glob's files, below the folder its pattern starts in
        # and in the folders it matches (published/week[0-3] matched no file: a trial)
        matched = fs.glob(item, detail=True).items()
        return root or ".", list(dict.fromkeys(found for path, info in matched for found in _files_of(fs, path, info)))
    return None, [item] if fs.exists(item) else []


def _files_of(fs, path: str, info: dict) -> list[str]:
    return fs.find(path) if info["type"] == "directory" else [path]


def _nothing_found(fs, item: str, others: list[str], hidden: list[str]) -> str:
    """Why input ``item`` gave no file to read: ``others``, the files of other names it holds or
    matches, and ``hidden``, those left out as not data (names starting with . or _)."""
    if isinstance(fs, LocalFileSystem) and os.path.islink(item):
        return f"a broken symbolic link (to {os.readlink(item)})"
    if fs.isdir(item):
        return f"the folder holds no {FORMATS} file (names starting with . or _ are left out)"
    root = glob_root(fs, item)
    if root is None:
        bucket = fs._strip_protocol(item).split("/")[0]  # a missing bucket was "no such file or folder" too
        if not isinstance(fs, LocalFileSystem) and bucket and not fs.exists(bucket):
            return f"no such bucket {fs.unstrip_protocol(bucket)}"
        return "no such file or folder"
    if others:
        return f"the pattern matches {counted(len(others), 'file')}, none named as {FORMATS}: {first_few(others)}"
    if hidden:
        return (
            f"the pattern matches only names starting with . or _, which are not data (as Spark and Arrow "
            f"read folders): {first_few(hidden)}"
        )
    # A pattern of the wrong suffix (*.jsonl for a folder of .jsonl.gz files): name what is there.
    folder = root or "."
    try:
        there = sorted(os.path.basename(p) for p in fs.ls(folder, detail=False) if _format_of(p))
    except OSError:  # no such folder either
        there = []
    if not there:
        return "no file matches the pattern"
    return (
        f"no file matches the pattern; {folder} holds {counted(len(there), 'file')} that curate reads "
        f"({first_few(there, sep=', ')}): give the folder, or a pattern that matches them"
    )


def overlap_message(repeats: list[tuple[str, str, str, str]]) -> str:
    """One line naming the files that several inputs named (from :func:`find_inputs`), e.g. for a log.

    Each file is counted and shown once, with every input that named it, or, named by one input
    only, its other spelling (a symbolic link found in a folder) or "given twice".
    """
    named: dict[str, list[str]] = {}
    spellings: dict[str, str] = {}
    for path, first, again, again_path in repeats:
        inputs = named.setdefault(path, [first])
        if again not in inputs:
            inputs.append(again)
        if again_path != path:
            spellings.setdefault(path, again_path)
    shown = first_few(
        [
            f"{path} (in {' and '.join(map(repr, inputs))})"
            if len(inputs) > 1
            else f"{path} (in {inputs[0]!r}, also as {spellings[path]})"
            if path in spellings
            else f"{path} (in {inputs[0]!r}, given twice)"
            for path, inputs in named.items()
        ]
    )
    return f"inputs overlap: {len(named)} file(s) named more than once are read once: {shown}"


def skipped_message(skipped: list[str]) -> str:
    """One line naming the files that folders hold under other names than data's (from
    :func:`find_inputs`), left out, e.g. for a log: how many, and the first three."""
    shown = first_few(skipped)
    return f"inputs skipped: {len(skipped)} file(s) in folders or globs are not read, not named as {FORMATS}: {shown}"


def hive_keys_message(paths: list[str]) -> str | None:
    """One line where input files lie in Hive partition folders (``lang=en/part-0.parquet``), whose
    keys Spark and pyarrow datasets read as columns: curate reads plain files, so the keys are
    not in the output. None where no folder is named so."""
    keys = {part.split("=", 1)[0]: None for p in paths for part in re.split(r"[/\\]", p)[:-1] if _HIVE.fullmatch(part)}
    if not keys:
        return None
    return (
        f"inputs in Hive partition folders ({', '.join(f'{k}=...' for k in keys)}): curate reads the files, not a "
        "dataset, so these keys are not columns of the output; each file's path keeps them (source in "
        "duplicates.parquet)"
    )


_HIVE = re.compile(r"[^=]+=[^=]*")


def first_few(items: list[str], tail: str = "and {} more", sep: str = "; ") -> str:
    """The first three of ``items`` joined by ``sep``, then ``tail`` with how many more there are."""
    return sep.join(items[:3] + ([tail.format(len(items) - 3)] if len(items) > 3 else []))


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` (thousands separated) and ``noun``, in the plural (``plural``, else ``noun`` + "s")
    unless ``n`` is 1: "1 group", "2,000 groups", "1 exact copy", "2 exact copies"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def source_names(paths: list[str]) -> tuple[str, ...]:
    """How files are named in ids, messages and ``rejected/``: relative to their common folder;
    whole where that is the root (``work/data/a.jsonl`` read as relative to the current folder)
    or they are URLs."""
    if "://" in paths[0]:
        return tuple(paths)
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    if root == os.sep:
        return tuple(paths)
    return tuple(os.path.relpath(p, root) for p in paths)


def glob_root(fs, item: str) -> str | None:
    """The folder a glob's pattern starts in: ``data/`` of ``data/**/*.jsonl``, ``""`` (the
    current folder) of ``*.jsonl``; None when ``item`` is no glob: it has none of ``*?[``, or names
    a file (a folder's ``x[1].jsonl``, found and named again, was a pattern that matched nothing)."""
    magic = min((item.find(c) for c in "*?[" if c in item), default=-1)
    if magic < 0 or fs.exists(item):
        return None
    return item[: item.rfind("/", 0, magic) + 1]


def _format_of(path: str) -> str | None:
    name = path.lower()
    for suffix in _COMPRESSED:
        name = name.removesuffix(suffix)
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet") and not path.lower().endswith(tuple(_COMPRESSED)):
        return "parquet"
    return None


def common_compression(paths: list[str]) -> str | None:
    """The compression (``"gzip"``, ``"zstd"``) every one of ``paths`` has by its name, or None
    (uncompressed, or the files differ)."""
    codecs = {infer_compression(path) for path in paths}
    return codecs.pop() if len(codecs) == 1 else None


class Broken(Exception):
    """A compressed stream that ends early or is corrupt: ``what`` happened, and the decoder's ``detail``."""

    def __init__(self, what: str, detail):
        super().__init__(f"{what} ({detail})")
        self.what, self.detail = what, detail


def decompressed_chunks(f, codec: str | None):
    """Decompressed chunks (bytes) of an open binary file; raises :class:`Broken` where the stream breaks.

    Decoder objects rather than file wrappers: ``gzip.GzipFile`` drops the data decoded in the
    read that hits a cut, and zstandard's stream reader stops at one without a word.

    Raises
    ------
    Broken
        On a truncated (or empty) or corrupt compressed stream.
    ValueError
        If ``codec`` is neither None nor a supported compression.
    """
    if codec is None:
        yield from iter(lambda: f.read(_CHUNK), b"")
        return
    if codec not in _DECODERS:
        raise ValueError(f"{codec}: unsupported compression")
    decoder, fed, empty, ended = _DECODERS[codec](), False, True, False
    try:
        for data in iter(lambda: f.read(_CHUNK), b""):
            empty = False
            while data:  # a file may hold several members (gzip) or frames (zstd)
                # Zero bytes between members pad the file (tape blocks), as gzip(1) reads it: no
                # member starts with one. Inside a member (fed) a zero byte is data.
                if ended and not fed and codec == "gzip":
                    data = data.lstrip(b"\0")
                    if not data:
                        break
                yield _gzip_piece(decoder, data) if codec == "gzip" else decoder.decompress(data)
                fed = True
                if not decoder.eof:
                    break
                data, decoder, fed, ended = decoder.unused_data, _DECODERS[codec](), False, True
    except _Salvaged as salvaged:
        yield salvaged.good
        raise Broken(f"corrupt {codec} stream", salvaged.err) from None
    except (zlib.error, zstandard.ZstdError) as err:
        raise Broken(f"corrupt {codec} stream", err) from None
    if fed and not decoder.eof:
        raise Broken(f"truncated {codec} stream", "it ends inside a compressed block")
    if empty:  # even a stream of nothing has a header: an aborted download, say
        raise Broken(f"truncated {codec} stream", "the file is empty, 0 bytes")


def decompressed(f, codec: str | None) -> tuple[bytes, Broken | None]:
    """All of an open binary file's decompressed bytes, and why the stream broke (else None).

    What :func:`decompressed_chunks` gives, joined, and its :class:`Broken` returned with what
    came before the break. A whole, sound file decodes in one call instead, about twice the
    speed of the chunks' decoders and without joining them: zstd one frame that states its
    size (what ``zstd`` and most libraries write), gzip by zlib-ng (the same format; its
    members, and zero bytes of padding after them, as gzip(1) reads them). Anything else,
    several zstd frames, damage or a file cut short, is decoded again by the chunks, whose
    output and errors are the ones the messages quote.

    Raises
    ------
    ValueError
        If ``codec`` is neither None nor a supported compression.
    """
    data = f.read()
    if codec is None:
        return data, None
    whole = _in_one_call(codec, data)
    if whole is not None:
        return whole, None
    chunks, broken = [], None
    try:
        for chunk in decompressed_chunks(io.BytesIO(data), codec):
            chunks.append(chunk)  # what came before a break is kept
    except Broken as err:
        broken = err
    return b"".join(chunks), broken


def decompressed_block(f, codec: str | None, offset: int, length: int) -> tuple[bytes, int, int, Broken | None]:
    """A block of an open binary file's decompressed stream, as :func:`fsspec.utils.read_block`
    cuts one at line ends: the lines that start after the first line end at or after ``offset``
    (from the stream's start where ``offset`` is 0), through the line end at or after ``offset +
    length``. Returns the block, its position in the stream, the line ends before it, and the
    stream's :class:`Broken` where it breaks in this block's key range (else None), so that of
    the blocks that tile a stream exactly one reports a break: the one where the cut line starts
    (:func:`curate.io.plan.source_divisions`: ``offset`` excluded, but 0 included).

    A compressed stream cannot be entered in the middle: it is decoded from its start up to the
    block's end, and only the bytes from ``offset`` on are kept.

    Raises
    ------
    ValueError
        If ``codec`` is neither None nor a supported compression.
    """
    held, base, lines, stop, broken = bytearray(), 0, 0, -1, None  # held: the stream from `offset` on
    try:
        for chunk in decompressed_chunks(f, codec):
            if base < offset:  # the stream before the block: only its line ends are counted
                before = min(len(chunk), offset - base)
                lines += chunk.count(b"\n", 0, before)
                chunk, base = chunk[before:], base + before
            held += chunk
            stop = held.find(b"\n", max(length, len(held) - len(chunk)))
            if stop >= 0:
                break
    except Broken as err:
        broken = err
    end = stop + 1 if stop >= 0 else len(held)
    first = held.find(b"\n", 0, end) + 1 if offset else 0
    start = first if first or not offset else end  # no line end at or after offset: the block is empty
    lines += 1 if offset and first else 0
    if broken is not None and offset and b"\n" not in held:  # the cut line started before this block
        broken = None
    return bytes(held[start:end]), offset + start, lines, broken


def _in_one_call(codec: str, data: bytes) -> bytes | None:
    """``data`` decompressed in one call, or None where that would not give what the chunks give."""
    try:
        if codec == "gzip" and data.startswith(b"\x1f\x8b"):  # an empty file is an error, not b""
            return gzip_ng.decompress(data)
        # A zstd frame's size: 0 (an empty frame, maybe more after it) and -1 (not stated) are
        # left to the chunks; data after the frame (a second frame) fails the call.
        if codec == "zstd" and data.startswith(_ZSTD_MAGIC) and (size := zstandard.frame_content_size(data)) > 0:
            whole = zstandard.ZstdDecompressor().decompress(data, allow_extra_data=False)
            return whole if len(whole) == size else None
    except (EOFError, OSError, zlib.error, zlib_ng.error, zstandard.ZstdError):  # BadGzipFile: an OSError
        return None
    return None


def _gzip_piece(decoder, data: bytes) -> bytes:
    """``decoder.decompress(data)``, and where that fails, what decoded before the damage.

    zlib drops what it decoded in a call that then fails (a bad checksum at the end of a member,
    after every byte decoded well): that call's input is fed again to a copy of the decoder, a
    byte at a time, and what it decodes before the damage is returned with the error.
    """
    saved = decoder.copy()
    try:
        return decoder.decompress(data)
    except zlib.error as err:
        good = bytearray()
        with contextlib.suppress(zlib.error):
            for i in range(len(data)):
                good += saved.decompress(data[i : i + 1])
        raise _Salvaged(bytes(good), err) from None


class _Salvaged(Exception):
    """A broken gzip stream and the bytes decoded before the damage."""

    def __init__(self, good: bytes, err: zlib.error):
        super().__init__(str(err))
        self.good, self.err = good, err


def shared_metadata(fs, paths: list[str], columns: list[str]) -> dict[bytes, bytes]:
    """The schema metadata that every Parquet file of ``paths`` holds alike, pandas' own left out
    (its index and dtypes, which pandas cannot read back for nested Arrow columns), where every
    file also has the same fields and types, and those fields are ``columns`` (the output's: no
    assigned id); else none.

    So Hugging Face ``datasets``' features (``huggingface``: class labels, images) or a
    pipeline's own keys come through a Parquet to Parquet run, and are never stated of columns
    that differ from the ones they describe.

    Returns
    -------
    dict of bytes to bytes
        Empty where the files differ, hold none, or cannot be read (the read names those).
    """

    def read(path: str) -> pa.Schema | None:
        try:
            with fs.open(path, "rb") as f:
                return parquet_file(f).schema_arrow
        except (pa.ArrowInvalid, OSError):
            return None

    with ThreadPoolExecutor(min(16, len(paths))) as pool:
        schemas = list(pool.map(read, paths))
    first = schemas[0]
    if first is None or first.names != columns:
        return {}
    if any(s is None or not s.equals(first, check_metadata=True) for s in schemas[1:]):
        return {}
    return {k: v for k, v in (first.metadata or {}).items() if k != b"pandas"}


def record_bytes(fs, paths: list[str], fmt: str, most: int = 16) -> float | None:
    """The smallest mean size of a record, in bytes as read, over up to ``most`` of the files
    spread over the list: JSONL's lines in the first MiB of a file (decompressed), Parquet's rows
    over their uncompressed size. None where none of them holds a record. For sizing partitions
    by what their documents take (:func:`curate.cluster.memory_blocksize`), not for counting.
    """
    means = []
    for path in paths[:: max(1, len(paths) // most)][:most]:
        with fs.open(path, "rb") as f:
            if fmt == "parquet":
                try:
                    meta = pq.ParquetFile(f).metadata
                except pa.ArrowInvalid:  # reported when the file is read
                    continue
                size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
                means += [size / meta.num_rows] if meta.num_rows else []
                continue
            raw, _ = _head(f, infer_compression(path))
            lines = raw.count(b"\n")
            means += [(raw.rindex(b"\n") + 1) / lines] if lines else ([len(raw)] if raw else [])
    return min(means, default=None)


# A run samples its inputs three times (the command's checks, the first read, the write's read):
# 26,277 small files of a crawl took 31 s each time. The samples are kept by file system, path,
# format and fsspec ukey (size and modification time, or ETag), for this many files at most.
SAMPLED_FILES = 1 << 15
_SAMPLED: dict = {}


def parquet_file(f) -> pq.ParquetFile:
    """``pyarrow.parquet.ParquetFile(f)`` with INT96 timestamps (Spark's and Impala's legacy ones)
    read as microseconds: as nanoseconds, pyarrow's default, a time before 1677 or after 2262
    wrapped around without a word (1500-01-01 read as 2084-07-20)."""
    return pq.ParquetFile(f, coerce_int96_timestamp_unit="us")


def sample_files(fs, paths: list[str], fmt: str, versions=None) -> list[tuple[list[pa.Schema], int]]:
    """:func:`sample_file` of every file, in order, read in a thread pool (remote stores: the
    requests overlap), or as sampled before where the file's ``fs.ukey`` is the same
    (``versions``: the files' ukeys where the caller has them, else asked here).

    Raises
    ------
    PermissionError, OSError
        If a file cannot be opened (the first such file's error).
    """
    versions = [fs.ukey(path) for path in paths] if versions is None else versions
    keys = [(fs, path, fmt, version) for path, version in zip(paths, versions)]
    todo = [i for i, key in enumerate(keys) if key not in _SAMPLED]
    found = {}
    if todo:
        with ThreadPoolExecutor(min(16, len(todo))) as pool:
            found = dict(zip((keys[i] for i in todo), pool.map(lambda i: sample_file(fs, paths[i], fmt), todo)))
        if len(_SAMPLED) + len(found) > SAMPLED_FILES:
            _SAMPLED.clear()
        if len(found) <= SAMPLED_FILES:
            _SAMPLED.update(found)
    return [found[key] if key in found else _SAMPLED[key] for key in keys]


def input_columns(columns: list[str], fs, paths: list[str], reference: list[str], fmt: str) -> list[str]:
    """``columns`` (an output frame's, read from ``reference`` and ``paths``) less the fields that
    only the reference files hold, the others in the order the input files first hold them
    (columns no file holds, ``_doc`` and an assigned id, first): a week's output had every
    column of what was published before, null in every row, in the reference's order."""

    def fields(files: list[str]) -> dict[str, None]:
        return dict.fromkeys(f.name for schemas, _ in sample_files(fs, files, fmt) for s in schemas for f in s)

    ours, theirs = fields(paths), fields(reference)
    rank = {name: i for i, name in enumerate(ours)}
    return sorted((c for c in columns if c in ours or c not in theirs), key=lambda c: rank.get(c, -1))


def sample_file(fs, path: str, fmt: str) -> tuple[list[pa.Schema], int]:
    """A file's fields and types, and its size in bytes as read (decompressed JSONL; Parquet on disk).

    JSONL: the types of the records in the first MiB (decompressed), one schema per run of
    records pyarrow reads alike (several where a field's type changes within the sample); none
    for a file without records. A compressed file's size is exact when the sample reached its
    end, else its size on disk times the sample's compression ratio, or what the file states
    where that is more (:func:`_stated_size`).
    """
    with fs.open(path, "rb") as f:
        size = f.size if getattr(f, "size", None) is not None else fs.size(path)
        if fmt == "parquet":
            try:
                schema = without_views(parquet_file(f).schema_arrow.remove_metadata())
            except pa.ArrowInvalid:  # not Parquet, or cut short: reported with the file when it is read
                return [], size
            return ([schema] if len(schema) else []), size
        codec = infer_compression(path)
        raw, ended = _head(f, codec)
        if codec is not None:
            size = len(raw) if ended else max(int(len(raw) * size / max(f.tell(), 1)), _stated_size(f, codec))
    raw = bytes(raw).removeprefix(BOM)
    if b"\n" in raw:
        raw = raw[: raw.rindex(b"\n") + 1]
    starts, ends, keep = record_lines(raw)
    starts, ends = starts[keep], ends[keep]
    pieces, bad = parse_records(raw, starts, ends, Layout(None, Fields(None, None)))  # bad lines: reported later
    schemas = [_exact_numbers(table, [raw[starts[i] : ends[i]] for i in rows]) for rows, table in pieces]
    for b in bad:  # lines Python's json reads but pyarrow does not: learn their fields one by one
        if b.reason == TOO_DEEP:  # refused by every read, and beyond Python's json
            continue
        try:
            record = json.loads(raw[starts[b.index] : ends[b.index]])
        except ValueError:
            continue
        if isinstance(record, dict):
            schemas.append(pa.schema([value_field(name, value) for name, value in record.items()]))
    return schemas, size


def _head(f, codec: str | None) -> tuple[bytearray, bool]:
    """The first MiB or so of an open file's decompressed stream, through a line end where the
    stream has one past that (:data:`_SAMPLE_BYTES`), and whether that is the whole stream (a
    stream that breaks ends there: its damage is reported when the file is read)."""
    raw = bytearray()
    try:
        for chunk in decompressed_chunks(f, codec):
            raw += chunk
            if len(raw) >= _SAMPLE_BYTES and b"\n" in chunk:
                return raw, False
    except Broken:
        pass
    return raw, True


def _stated_size(f, codec: str) -> int:
    """The decompressed size a compressed file states, or 0: zstd's first frame header, gzip's
    last 4 bytes (the last member's size modulo 2**32). Exact for one frame or member (under 4
    GiB for gzip), less for several: taken only where it is more than the sample's estimate,
    which fell short of a file of lines so that its last block was a quarter larger than
    --blocksize (a user's trial)."""
    try:
        if codec == "zstd":
            f.seek(0)
            return max(zstandard.frame_content_size(f.read(18)), 0)
        if codec == "gzip":
            f.seek(-4, 2)
            return int.from_bytes(f.read(4), "little")
    except (OSError, ValueError, zstandard.ZstdError):  # too short, or not a frame: the estimate stands
        pass
    return 0


def json_type(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` as JSON holds it: pyarrow's JSON reader takes strings that look like ISO 8601
    dates for timestamps (dropping a zone offset), but JSON has strings only."""
    return _each_type(dtype, lambda t: pa.string() if pa.types.is_timestamp(t) else t)


def _each_type(dtype: pa.DataType, leaf) -> pa.DataType:
    """``dtype`` with ``leaf`` (a function of a type) applied to every type that is not a list or
    a struct, at any depth; lists, large lists and structs keep their kind and field names."""
    if pa.types.is_list(dtype):
        return pa.list_(dtype.value_field.with_type(_each_type(dtype.value_type, leaf)))
    if pa.types.is_large_list(dtype):
        return pa.large_list(dtype.value_field.with_type(_each_type(dtype.value_type, leaf)))
    if pa.types.is_struct(dtype):
        return pa.struct(
            [dtype.field(i).with_type(_each_type(dtype.field(i).type, leaf)) for i in range(dtype.num_fields)]
        )
    return leaf(dtype)


# Marks a field whose value no Arrow type holds (a list of numbers and objects): it holds JSON text.
_UNTYPED = {b"curate": b"untyped"}
_HUGE = {b"curate": b"huge"}  # the same for a field with an integer beyond int64
# The same for a field of doubles and integers a double would round (read as doubles, rounded).
_MIXED = {b"curate": b"mixed"}
# Marks an int64 field holding an integer a double would round: widened with doubles, it holds JSON text.
_WIDE = {b"curate": b"wide"}
# What a marked field holds, for messages.
_MARKED = {
    b"untyped": "values of no one type",
    b"huge": "integers beyond int64",
    b"mixed": "double, integers beyond 2**53",
    b"wide": "integers beyond 2**53",
}
_EXACT = 1 << 53  # integers of at most this size are doubles exactly
_LONG_NUMBER = re.compile(rb"\d{16}")


def _exact_numbers(table: pa.Table, lines: list[bytes]) -> pa.Schema:
    """The schema of a sample's records as JSON holds them (:func:`json_type`), with the top-level
    fields of integers a double cannot hold marked: pyarrow reads integers beyond int64 as
    doubles, rounded (``_HUGE``), and integers beyond 2**53 beside doubles too (``_MIXED``), and
    widens int64 with double (``_WIDE``)."""
    fields, records = [], None
    for field in table.schema:
        field = field.with_type(json_type(field.type))
        if pa.types.is_int64(field.type):
            bounds = pc.min_max(table[field.name]).values()
            if any(value is not None and abs(value.as_py()) > _EXACT for value in bounds):
                field = field.with_metadata(_WIDE)
        elif pa.types.is_floating(field.type):
            if records is None:  # such an integer has 16 digits or more: only those lines are parsed again
                records = [json.loads(line) for line in lines if _LONG_NUMBER.search(line)]
            wide = [value for record in records if _wide_int(value := record.get(field.name))]
            if wide:
                huge = any(not -(1 << 63) <= value < (1 << 63) for value in wide)
                field = pa.field(field.name, pa.null(), metadata=_HUGE if huge else _MIXED)
        fields.append(field)
    return pa.schema(fields)


def _wide_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > _EXACT


def value_field(name: str, value) -> pa.Field:
    """The field pyarrow's JSON reader would give one value, marked as :func:`_exact_numbers` marks them."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not -(1 << 63) <= value < (1 << 63):
            return pa.field(name, pa.null(), metadata=_HUGE)
        return pa.field(name, pa.int64(), metadata=_WIDE if abs(value) > _EXACT else None)
    if isinstance(value, str):  # a text, even one Arrow refuses (a lone surrogate): the reader names its line
        return pa.field(name, pa.string())
    try:
        return pa.field(name, pa.array([value]).type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
        return pa.field(name, pa.null(), metadata=_UNTYPED)


def unify_schemas(schemas: list[pa.Schema], text_field: str, id_field: str) -> tuple[pa.Schema, set[str]]:
    """One schema for all files, and the fields whose types differ beyond widening.

    Fields are in the order first seen; the text is a string, a field that is always null a
    string. Where a field's types differ, they are widened where Arrow can (``int64`` and
    ``double`` to ``double``, unless the int64 field was marked as holding integers a double
    would round: :func:`_exact_numbers`); otherwise the field holds JSON text (a string;
    returned in the set), as a field marked ``_UNTYPED``, ``_HUGE`` or ``_MIXED`` does, and one
    whose type Parquet cannot store (``{}`` in every record seen). An id is an integer
    type only where every id seen is an integer, else a string.
    """
    types: dict[str, pa.DataType] = {}
    json_text: set[str] = set()
    wide: set[str] = set()  # int64 fields with integers a double would round
    for schema in schemas:
        for field in schema:
            if field.metadata == _WIDE:
                wide.add(field.name)
            seen = types.get(field.name)
            if field.metadata in (_UNTYPED, _HUGE, _MIXED):
                json_text.add(field.name)
                types.setdefault(field.name, pa.null())
            elif seen is None or pa.types.is_null(seen):
                types[field.name] = field.type
            elif seen != field.type and not pa.types.is_null(field.type) and field.name not in json_text:
                try:
                    types[field.name] = _wider(seen, field.type)
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    json_text.add(field.name)
    json_text |= {name for name in wide if pa.types.is_floating(types[name])}  # widening would round them
    json_text |= {name for name, dtype in types.items() if not _parquet_holds(dtype)}
    out = []
    for name, dtype in types.items():
        if name == id_field:
            dtype = dtype if pa.types.is_integer(dtype) and name not in json_text else pa.string()
        elif name == text_field or pa.types.is_null(dtype) or name in json_text:
            dtype = pa.string()
        out.append(pa.field(name, dtype))
    return pa.schema(out), json_text - {text_field, id_field}


def _wider(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type that holds values of both ``a`` and ``b``, as pyarrow's permissive unification
    finds it; timestamps in two time zones, which pyarrow refuses, are the same instants in UTC
    (the finer unit): JSON text of each value was the alternative, a string in Parquet output.
    Dictionary-encoded values (pandas' categoricals) widen as their values, and a date with a
    timestamp without a time zone is that timestamp (its midnight): pyarrow refuses both, and
    their values were written as JSON text, each string in quotes (``'"ham"'``).

    Raises
    ------
    pyarrow.ArrowInvalid, pyarrow.ArrowTypeError
        If no type holds both (int64 and string).
    """
    a, b = _decoded(a), _decoded(b)
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.tz and b.tz and a.tz != b.tz:
        return pa.timestamp(_wider(pa.timestamp(a.unit), pa.timestamp(b.unit)).unit, tz="UTC")
    if pa.types.is_date(a) and pa.types.is_timestamp(b) and not b.tz:  # a date is its midnight
        return b
    if pa.types.is_date(b) and pa.types.is_timestamp(a) and not a.tz:
        return a
    schemas = [pa.schema([pa.field("x", a)]), pa.schema([pa.field("x", b)])]
    return pa.unify_schemas(schemas, promote_options="permissive").field(0).type


def _decoded(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every dictionary encoding, at any depth, replaced by its values' type."""
    return _each_type(dtype, lambda t: t.value_type if pa.types.is_dictionary(t) else t)


def _parquet_holds(dtype: pa.DataType) -> bool:
    """Whether Parquet can store ``dtype``: not a struct without fields (JSON's ``{}``), at any depth.
    Such a field failed the Parquet output's write, after the whole run."""
    if pa.types.is_struct(dtype):
        return dtype.num_fields > 0 and all(_parquet_holds(dtype.field(i).type) for i in range(dtype.num_fields))
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _parquet_holds(dtype.value_type)
    return True


def check_ordered(
    name: str, schema: pa.Schema, json_text: set[str], samples: list[tuple[str, list[pa.Schema]]]
) -> None:
    """Raise ValueError unless field ``name`` has one type that orders in every file sampled.

    ``samples`` holds each file's name and sampled schemas; ``schema`` and ``json_text`` are
    :func:`unify_schemas`' of all those schemas. Values of several types (numbers and strings)
    are read as their JSON text, which orders as text: 7.5 before 12 and 100, a string or
    ``true`` anywhere. The error names the types found in each file (the first three files)."""
    if name not in schema.names:
        return
    if name in json_text:
        found = types_found(name, samples)
        huge = [source for source, kinds in found.items() if _MARKED[b"huge"] in kinds]
        if huge:  # read as their exact text, which does not order as numbers
            raise ValueError(
                f"field {name!r}, which --keep orders, holds integers beyond int64 "
                f"({first_few(huge, '{} more files', ', ')}),"
                " which it cannot order: give a field of numbers within int64, strings or dates"
            )
        # One type read as JSON text all the same: an empty object (struct<>), which Arrow cannot store.
        kinds = {kind for each in found.values() for kind in each}
        if len(kinds) == 1 and next(iter(kinds)).startswith(("struct", "list", "large_list", "map")):
            _refuse_nested(name, kinds.pop())
        raise ValueError(f"field {name!r}, which --keep orders, holds values of several types ({shown_types(found)})")
    dtype = schema.field(name).type
    if pa.types.is_nested(dtype):
        _refuse_nested(name, dtype)


def types_found(name: str, samples: list[tuple[str, list[pa.Schema]]]) -> dict[str, dict[str, None]]:
    """Each sampled file's types for field ``name``, as messages name them (``int64``, "values of
    no one type"), nulls left out; files without the field left out.

    ``samples`` holds each file's name and sampled schemas, as :func:`check_ordered`'s."""
    found: dict[str, dict[str, None]] = {}
    for source, schemas in samples:
        for field in (f for s in schemas for f in s if f.name == name):
            kind = _MARKED.get(field.metadata and dict(field.metadata).get(b"curate"), str(field.type))
            if kind != "null":
                found.setdefault(source, {})[kind] = None
    return found


def shown_types(found: dict[str, dict[str, None]]) -> str:
    """:func:`types_found`'s result for a message: ``a.parquet: int64; b.parquet: string`` (three
    files at most), the first file of each type first: of 44 files, the one that held integers
    was among "41 more files"."""
    shown = [f"{source}: {', '.join(sorted(kinds))}" for source, kinds in found.items()]
    firsts = {", ".join(sorted(kinds)): i for i, kinds in reversed(list(enumerate(found.values())))}
    order = sorted(firsts.values()) + [i for i in range(len(shown)) if i not in firsts.values()]
    return first_few([shown[i] for i in order], "{} more files", "; ")


def _refuse_nested(name: str, dtype) -> None:
    raise ValueError(f"field {name!r}, which --keep orders, holds {dtype}: give a field of numbers, strings or dates")


def lines_before(fs, path: str, offsets: list[int]) -> list[int]:
    """Line ends in the (decompressed) file before each byte offset of ``offsets`` (ascending), in
    one pass that stops at the last (an offset past the end counts every line end)."""
    counts, count, seen = [], 0, 0
    with fs.open(path, "rb") as f:
        for chunk in decompressed_chunks(f, infer_compression(path)):
            start = 0
            while len(counts) < len(offsets) and offsets[len(counts)] - seen <= len(chunk):
                end = offsets[len(counts)] - seen
                count += chunk.count(b"\n", start, end)
                counts.append(count)
                start = end
            if len(counts) == len(offsets):
                break
            count += chunk.count(b"\n", start)
            seen += len(chunk)
    return counts + [count] * (len(offsets) - len(counts))
