"""The one place that knows what a partition is made of (pandas today, cudf with the GPU backend).

Each backend-specific operation is a :class:`dask.utils.Dispatch` keyed on the partition's
(or series') type, following ``dask/dataframe/dispatch.py``. Stage code calls these inside
``map_partitions`` and never branches on the backend. Creation of new collections follows
``dask.config``'s ``dataframe.backend``, as Dask's own readers do (see :func:`use_backend`).

The pandas implementations are below, named ``<op>_pandas``; the cudf ones are in
:mod:`curate.backend_cudf`, registered lazily (``register_lazy("cudf")``, as Dask registers its
own cudf dispatches), so nothing imports cudf until a cudf partition reaches a dispatcher.
"""

import ctypes
import functools
import importlib.util

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from dask.utils import Dispatch
from distributed import get_worker

from curate.config import thread_room
from curate.dask_fixes import HOST_STEP  # (Dask's expressions fixed before a graph is built)
from curate.kernels import components as _components
from curate.kernels import digests as _digests
from curate.kernels import jaccard as _jaccard
from curate.kernels import lsh as _lsh
from curate.kernels import minhash as _minhash
from curate.kernels import normalize as _normalize

BACKENDS = {
    "cpu": {"dataframe.backend": "pandas", "array.backend": "numpy"},
    # Task shuffles keep cudf partitions on the device. P2P shuffles (distributed's default)
    # copy every partition to a host Arrow table and back, and cudf names an unnamed index
    # `__index_level_0__` there when it is a RangeIndex and `index` otherwise, so partitions
    # of both kinds in one shuffle came back with an extra `index` column (first H200 run).
    "gpu": {"dataframe.backend": "cudf", "array.backend": "cupy", "dataframe.shuffle.method": "tasks"},
}
GPU_PACKAGES = ("cudf", "dask_cudf", "dask_cuda", "cupy")
# From curate's checkout: "curate" on PyPI is another project.
GPU_INSTALL_HINT = "in curate's checkout, pip install '.[gpu-cu13]' (CUDA 13) or '.[gpu-cu12]' (CUDA 12)"

text_buffers = Dispatch("text_buffers")
md5_hex = Dispatch("md5_hex")
sha256_hex = Dispatch("sha256_hex")
normalize_text = Dispatch("normalize_text")
minhash_signatures = Dispatch("minhash_signatures")
band_buckets = Dispatch("band_buckets")
jaccard = Dispatch("jaccard")
greedy_representatives = Dispatch("greedy_representatives")
label_components = Dispatch("label_components")
to_host = Dispatch("to_host")
to_arrow = Dispatch("to_arrow")
parquet_engine = Dispatch("parquet_engine")


def _register_cudf():
    import curate.backend_cudf  # noqa: F401  (registers the cudf and cupy implementations)


for _dispatch in (
    text_buffers,
    md5_hex,
    sha256_hex,
    normalize_text,
    minhash_signatures,
    jaccard,
    greedy_representatives,
    label_components,
    to_host,
    to_arrow,
    parquet_engine,
):
    _dispatch.register_lazy("cudf", _register_cudf)
band_buckets.register_lazy("cupy", _register_cudf)


def missing_gpu_packages() -> list[str]:
    """The GPU packages (``GPU_PACKAGES``) that are not installed, found without importing them."""
    return [name for name in GPU_PACKAGES if importlib.util.find_spec(name) is None]


def driver_devices() -> int:
    """CUDA devices the NVIDIA driver reports, asked through its C library (``cuInit``,
    ``cuDeviceGetCount``) with ctypes, so without any GPU package; 0 where no driver loads."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0:
            return count.value
        return 0
    return 0


def gpu_usable() -> bool:
    """Whether a CUDA device can be used: the driver answers and reports at least one device.

    Decided by asking the device (through CuPy's runtime API), not by importing cudf, which
    succeeds on machines without a GPU.
    """
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except (ImportError, RuntimeError, OSError):  # no cupy, no driver, no device (CUDARuntimeError is a RuntimeError)
        return False


def resolve_backend(name: str) -> str:
    """The backend a run uses: ``cpu``, ``gpu`` (checked) or, for ``auto``, gpu when usable.

    Raises
    ------
    ValueError
        If ``name`` is unknown, or ``gpu`` is asked for and its packages or a CUDA device are
        missing; the message says how to install the packages, or, where no driver reports a
        device, to use the CPU.
    """
    if name == "auto":
        return "gpu" if not missing_gpu_packages() and gpu_usable() else "cpu"
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {sorted(BACKENDS)} or 'auto'")
    if name == "gpu":
        missing = missing_gpu_packages()
        if missing and not driver_devices():  # installing the packages would not help
            raise ValueError(
                f"backend 'gpu' needs a CUDA device and none is here (no NVIDIA driver reports one), nor "
                f"{', '.join(missing)}; use --backend cpu (or auto, which takes a GPU where one is usable)"
            )
        if missing:
            raise ValueError(f"backend 'gpu' needs {', '.join(missing)}, not installed: {GPU_INSTALL_HINT}")
        if not gpu_usable():
            raise ValueError(
                "backend 'gpu': no usable CUDA device (check nvidia-smi and CUDA_VISIBLE_DEVICES); use --backend cpu"
            )
    return name


def use_backend(name: str):
    """Context manager setting ``dask.config`` for backend ``name``.

    Parameters
    ----------
    name : {"cpu", "gpu"}
        ``cpu``: pandas partitions, numpy arrays; ``gpu``: cudf partitions, cupy arrays.

    Raises
    ------
    ValueError
        If the backend is unknown.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {sorted(BACKENDS)}")
    return dask.config.set(BACKENDS[name])


def from_arrow(table: pa.Table, frame_backend: str):
    """A device partition from an Arrow table, for a ``frame_backend`` other than pandas (``cudf``).

    Readers have no partition to dispatch on, so they pass ``dask.config``'s
    ``dataframe.backend``, read when the graph is built (workers do not see the client's config).
    Pandas partitions are built by the reader itself (:func:`curate.io.read.arrow_typed`).

    Raises
    ------
    ValueError
        For an unknown backend.
    """
    if frame_backend != "cudf":
        raise ValueError(f"no Arrow conversion for dataframe backend {frame_backend!r}")
    import cudf

    return cudf.DataFrame.from_arrow(table)


@to_host.register((pd.DataFrame, pd.Series, pd.Index))
def to_host_pandas(frame):
    """The frame itself: pandas already lives in host memory."""
    return frame


def on_device(frame) -> bool:
    """Whether ``frame`` (a partition, series or meta) lives in device memory: :func:`to_host` copies it."""
    return to_host(frame) is not frame


def backend_of(frame) -> str:
    """The ``dataframe.backend`` of ``frame``'s kind (a partition, series or meta): "cudf" or "pandas",
    for :meth:`dask.dataframe.DataFrame.to_backend`."""
    return "cudf" if on_device(frame) else "pandas"


def host_step(func) -> str:
    """Key prefix of a step that computes on the host whatever the backend: ``host-<name>``
    from ``func``'s name (``_split`` -> ``host-split``), for ``map_partitions(..., token=...)``.

    Such a step may start by copying its partition from the device (:func:`to_host`) but then
    runs pandas and numpy code only, so its tasks need no GPU: on workers that declare one,
    :func:`curate.cluster.task_resources` lets them run on any of the worker's threads while
    the other tasks take the GPU one at a time.
    """
    return HOST_STEP + func.__name__.strip("_").replace("_", "-")


def arrow_partitions(
    read, partitions, convert, *, meta, divisions=None, label: str, host: bool = False
) -> dd.DataFrame:
    """A frame of one partition per entry of ``partitions``: ``convert`` of the Arrow tables that
    ``read`` makes of the entry's pieces on the host (parsing JSONL, decoding Parquet), in order.

    Pandas partitions (``meta`` on the host): one task per partition (``dd.from_map``), named
    ``label``, or ``host-<label>`` with ``host`` (a read that no device step follows in its task:
    see :func:`host_step`). Device partitions: each piece's read is a host step of its own,
    ``host-<label>`` (``dd.from_graph``: Dask fuses no later step into it), a partition of several
    pieces joins their tables in one more such step (Arrow's concatenation, which copies
    nothing), and ``convert`` is the first step of the next task, named ``label``, which holds the
    GPU. So on GPU workers the reads run on the host's threads side by side while the GPU takes
    one task at a time, and a device partition may hold many pieces (a GPU computes a few large
    partitions faster than many small ones: each of its tasks waits its turn) while its input is
    still parsed in pieces on all of them. Fused, each read held the GPU (on the H200, each of four
    passes over a 1.1 GB input took about 11 s: one thread's JSON parsing).

    Parameters
    ----------
    read : callable
        ``read(piece)`` returns a ``pyarrow.Table``; picklable (a module-level function or a
        ``functools.partial`` of one).
    partitions : list of list
        Each partition's pieces, in order (usually one each; see :func:`curate.io.plan.parse_pieces`).
    convert : callable
        ``convert(table)`` returns the partition (pandas or cudf); picklable.
    meta : pandas.DataFrame or cudf.DataFrame
        The partitions' empty frame.
    divisions : tuple, optional
        ``len(partitions) + 1`` values; default unknown.
    label : str
        The tasks' name (without ``host-``).
    host : bool, default=False
        Name the pandas read a host step.

    Returns
    -------
    dask.dataframe.DataFrame

    Raises
    ------
    ValueError
        If ``host`` is given with device partitions (their conversion needs the GPU).
    """
    if not on_device(meta):
        return dd.from_map(
            _read_then, partitions, read=read, convert=convert, meta=meta, divisions=divisions,
            enforce_metadata=False, label=f"{HOST_STEP if host else ''}{label}",
        )  # fmt: skip
    if host:
        raise ValueError(f"{label}: a read into device partitions cannot be a host step")
    name = f"{HOST_STEP}{label}"
    key = f"{name}-{dask.base.tokenize(read, partitions)}"
    layer = {}
    for i, pieces in enumerate(partitions):
        if len(pieces) == 1:
            layer[(key, i)] = (read, pieces[0])
        else:
            layer |= {(key, i, j): (read, piece) for j, piece in enumerate(pieces)}
            layer[(key, i)] = (_joined, [(key, i, j) for j in range(len(pieces))])
    keys = [(key, i) for i in range(len(partitions))]
    tables = dd.from_graph(layer, meta, divisions or (None,) * (len(partitions) + 1), keys, name)
    return tables.map_partitions(convert, meta=meta, enforce_metadata=False, token=label)


def _read_then(pieces, read, convert):
    return convert(_joined([read(piece) for piece in pieces]))


def _joined(tables: list[pa.Table]) -> pa.Table:
    # Permissive: a skip-mode read past 2 GiB comes with large offsets, the others not (curate.io.read).
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")


def on_host(collection):
    """``collection`` with its partitions copied to host memory (pandas) on the workers.

    Everything the client gathers goes through this (see :class:`curate.runner.Runner`), so
    the client never deserialises a cudf object: with cudf spilling on in the workers (the GPU
    default) their frames arrive as spillable buffers, which a client without cudf's global
    spill manager cannot build, and a process that already used cudf cannot start one.
    Collections of other kinds (scalars, writes) are returned as they are.
    """
    if isinstance(collection, (dd.DataFrame, dd.Series, dd.Index)):
        return collection.map_partitions(to_host, meta=to_host(collection._meta))
    return collection


@parquet_engine.register(pd.DataFrame)
def parquet_engine_pandas(meta: pd.DataFrame) -> str:
    """Dask's Parquet engine for pandas partitions: ``"pyarrow"``."""
    return "pyarrow"


def to_parquet(frame: dd.DataFrame, path: str, **options):
    """Lazily write ``frame`` (without its index) as Parquet with the engine of its partitions' type.

    The one way curate writes a collection to Parquet. Dask picks the engine from
    ``dataframe.backend`` when none is given, so on the GPU backend a collection of host
    (pandas) partitions, such as a group table, went to dask-cudf's engine and failed; the
    engine here follows the collection's meta instead (:data:`parquet_engine`).

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
    path : str
        Output folder.
    **options
        Passed to ``dask.dataframe.to_parquet`` (e.g. ``row_group_size``).

    Returns
    -------
    dask collection
        The write; compute it (with other work, to share reads).
    """
    return frame.to_parquet(path, engine=parquet_engine(frame._meta), write_index=False, compute=False, **options)


@to_arrow.register(pd.DataFrame)
def to_arrow_pandas(frame: pd.DataFrame, schema: pa.Schema | None = None) -> pa.Table:
    """Arrow table of a partition (with ``schema`` if given), without its index or pandas metadata."""
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False).replace_schema_metadata(None)


def _arrow_strings(text: pd.Series) -> pa.LargeStringArray:
    if text.dtype == object and pd.api.types.infer_dtype(text, skipna=True) not in ("string", "empty"):
        # An API frame's object column (pandas' own, or Dask's string conversion turned off):
        # Arrow would take bytes as text and refuse a number without naming the column.
        i = first_non_string(text.to_numpy())
        value = text.iloc[i]
        raise ValueError(
            f"text column {text.name!r} holds {type(value).__name__} {shown(value)} (index {shown(text.index[i])}): "
            "texts must be strings"
        )
    arr = pa.array(text, type=pa.large_string(), from_pandas=True)
    # Arrow-backed series may hold several chunks; kernels want one contiguous buffer.
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def stable_sort(part, by, **options):
    """``part.sort_values(by, **options)`` keeping ties in their order, on either backend: pandas
    needs ``kind="stable"``; cudf always sorts stably (libcudf ``stable_sorted_order``) and warns
    on every call that names a kind."""
    return part.sort_values(by, **options) if on_device(part) else part.sort_values(by, kind="stable", **options)


def shown(value, width: int = 40) -> str:
    """``repr(value)`` cut to ``width`` characters (and ``…``): a message that quotes a user's value
    (a text, an id) stays readable whatever the value holds. A string is cut inside its quotes,
    and one of ``width`` characters is whole: a 39-character id lost its closing quote, and read
    as cut (a trial)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= width else f"{value[:width]!r}…"
    text = repr(value)
    return text if len(text) <= width else f"{text[:width]}…"


def first_non_string(values) -> int:
    """Position of the first value of an object array that is neither a string nor a null."""
    return next(i for i, v in enumerate(values) if not isinstance(v, str) and not is_missing(v))


def is_missing(value) -> bool:
    """Whether an object column's value is a null: None, NaN or ``pd.NA`` (never a list or array)."""
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def byte_lengths(text):
    """UTF-8 bytes of each text of a series, where the text lies: numpy (or cupy) array of shape (n,), dtype
    int64, a null as 0.

    Raises
    ------
    ValueError
        If ``text`` is an object column holding a value that is neither a string nor a null, naming it.
    """
    offsets, _ = text_buffers(text)
    return (offsets[1:] - offsets[:-1]).astype(np.int64)  # cudf's offsets are int32


@text_buffers.register(pd.Series)
def text_buffers_pandas(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 buffers of a string series: ``(offsets int64 (n + 1,), data uint8 (n_bytes,))``.

    Nulls count as empty strings. The data buffer is shared with Arrow where it can be.

    Raises
    ------
    ValueError
        If ``text`` is an object column holding a value that is neither a string nor a null, naming it.
    """
    return _arrow_buffers(_arrow_strings(text))


def _arrow_buffers(arr: pa.LargeStringArray) -> tuple[np.ndarray, np.ndarray]:
    # Nulls as empty strings; the data buffer shared with Arrow.
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, data


@md5_hex.register(pd.Series)
def md5_hex_pandas(text: pd.Series) -> pd.Series:
    """Hex md5 (32 digits) of each string's UTF-8 bytes, chunked for long texts (:mod:`curate.kernels.digests`).

    Nulls hash as empty strings; the GPU backend computes the same digests. Returns a ``str`` series with
    ``text``'s index.

    Raises
    ------
    ValueError
        If ``text`` is an object column holding a value that is neither a string nor a null, naming it.
    """
    return pd.Series(_digests.hex_digests(*text_buffers(text), "md5"), index=text.index, dtype="str")


@sha256_hex.register(pd.Series)
def sha256_hex_pandas(text: pd.Series) -> pd.Series:
    """Hex SHA-256 (64 digits) of each string's UTF-8 bytes, chunked as :func:`md5_hex_pandas`.

    Exact dedup's second, independent digest: with the md5 and the length it stands for the
    text, which then never moves. Nulls hash as empty strings; the GPU backend computes the same digests.
    Returns a ``str`` series with ``text``'s index.

    Raises
    ------
    ValueError
        If ``text`` is an object column holding a value that is neither a string nor a null, naming it.
    """
    return pd.Series(_digests.hex_digests(*text_buffers(text), "sha256"), index=text.index, dtype="str")


PUNCTUATION = r"\p{P}+"
FORMAT = r"\p{Cf}+"  # invisible characters that NFKC keeps: a zero-width space inside a word split its shingles
# RE2's \s is ASCII without \v; \p{Z} adds Unicode spaces (no-break, ideographic, ...), and
# \x1c-\x1f, \x85 (separators, next line) the rest of what Arrow's utf8_trim_whitespace trims
# at the ends, which is also what str.isspace calls whitespace.
WHITESPACE = r"[\s\x0b\x1c-\x1f\x85\p{Z}]+"


MARKS = r"\p{Mn}+"  # nonspacing marks: accents, and the vowel signs some scripts write as marks


@functools.cache
def _every_code_point() -> tuple[np.ndarray, pa.LargeStringArray]:
    """Every Unicode scalar value (no surrogates), as int64 and as a string of one code point each."""
    points = np.r_[np.arange(0, 0xD800), np.arange(0xE000, 0x110000)]
    return points, pa.array(list(points.astype("<u4").tobytes().decode("utf-32-le")), pa.large_string())


@functools.cache
def accent_table() -> dict[int, str]:
    """What stripping accents does to each code point it changes: a nonspacing mark (Unicode
    category Mn) becomes ``""``; a character whose canonical decomposition (NFD) is one character
    and nonspacing marks becomes that character (``é`` and ``ệ`` ``e``, ``ά`` ``α``, ``ç`` ``c``).

    A character map, as scikit-learn's ``strip_accents="unicode"`` and datatrove's diacritics
    folding (NFD, then nonspacing marks removed) are on composed text, but character by
    character: a Hangul syllable, whose NFD is several letters, or a Bengali two-part vowel
    stays whole, and a text gets the same result composed (NFC) or decomposed (NFD). Arrow's
    NFD and RE2's ``\\p{Mn}``, so the installed pyarrow's Unicode version.

    Returns
    -------
    dict of int to str
        Code point -> ``""`` or the one character it becomes.
    """
    points, chars = _every_code_point()
    stripped = pc.replace_substring_regex(pc.utf8_normalize(chars, "NFD"), MARKS, "")
    one = pc.less_equal(pc.utf8_length(stripped), 1)
    changed = pc.indices_nonzero(pc.and_(one, pc.not_equal(chars, stripped))).to_numpy()
    return {int(points[i]): v for i, v in zip(changed, stripped.take(pa.array(changed)).to_pylist())}


def _normalize_chars(
    arr, *, lowercase: bool, whitespace: bool, punctuation: bool, format_chars: bool = False, accents: bool = False
):
    # Everything but NFKC and the final trim: lowercase, strip punctuation, format characters and
    # accents, each run of whitespace to one space.
    if lowercase:
        arr = pc.utf8_lower(arr)
    if punctuation:
        arr = pc.replace_substring_regex(arr, PUNCTUATION, "")
    if format_chars:
        arr = pc.replace_substring_regex(arr, FORMAT, "")
    if accents:  # a character map by definition (Arrow's NFD of a whole text would split Hangul)
        table = accent_table()
        arr = pa.array([None if t is None else t.translate(table) for t in arr.to_pylist()], arr.type)
    if whitespace:
        arr = pc.replace_substring_regex(arr, WHITESPACE, " ")
    return arr


@normalize_text.register(pd.Series)
def normalize_text_pandas(
    text: pd.Series,
    *,
    lowercase: bool,
    whitespace: bool,
    punctuation: bool,
    nfkc: bool,
    format_chars: bool = False,
    accents: bool = False,
) -> pd.Series:
    """Normalise text before shingling, each step only when its flag is set.

    In order: Unicode NFKC (``nfkc``; Unicode Standard Annex #15, by Arrow's ``utf8_normalize``),
    lowercase (``lowercase``; Arrow's ``utf8_lower``), remove punctuation (``punctuation``; RE2
    ``\\p{P}``), remove format characters (``format_chars``; RE2 ``\\p{Cf}``: zero-width spaces and
    joiners, soft hyphens, byte order marks, which NFKC keeps), strip accents (``accents``;
    :func:`accent_table`), replace each run of whitespace with one space and trim both ends
    (``whitespace``).
    All but NFKC and the trim are applied as their character map (:func:`normalization_table`),
    in one compiled pass (:func:`curate.kernels.normalize.map_and_collapse`): the same strings.
    Returns a ``str`` series with ``text``'s index; nulls stay null.

    Raises
    ------
    ValueError
        If ``text`` is an object column holding a value that is neither a string nor a null, naming it.
    """
    arr = _arrow_strings(text)
    if nfkc:
        arr = pc.utf8_normalize(arr, "NFKC")
    options = {
        "lowercase": lowercase,
        "whitespace": whitespace,
        "punctuation": punctuation,
        "format_chars": format_chars,
        "accents": accents,
    }
    table, trim = normalization_table(**options)
    if table:
        # The operations' character map in one compiled pass (Arrow's lowercase and two RE2
        # replacements ran at about 35 MB/s on books), nulls put back after.
        offsets, data = _arrow_buffers(arr)
        growth = max(len(v.encode()) / len(chr(point).encode()) for point, v in table.items())
        offsets, data = _normalize.map_and_collapse(offsets, data, character_map(**options), whitespace, growth)
        mapped = pa.LargeStringArray.from_buffers(len(arr), pa.py_buffer(offsets), pa.py_buffer(data))
        arr = pc.if_else(arr.is_valid(), mapped, None) if arr.null_count else mapped
    if whitespace:
        arr = pc.utf8_trim(arr, trim)
    return pd.Series(arr.to_pandas(), dtype="str").set_axis(text.index)


@functools.cache
def character_map(
    *, lowercase: bool, whitespace: bool, punctuation: bool, format_chars: bool = False, accents: bool = False
) -> np.ndarray:
    """:func:`normalization_table`'s map as an array for :func:`curate.kernels.normalize.map_characters`.

    Parameters
    ----------
    lowercase, whitespace, punctuation, format_chars, accents : bool
        As :func:`normalize_text_pandas`.

    Returns
    -------
    numpy.ndarray of int32 (0x110000,), read-only
        The code point each code point becomes (itself where the map has none); -1 where removed.
    """
    table, _ = normalization_table(
        lowercase=lowercase, whitespace=whitespace, punctuation=punctuation, format_chars=format_chars, accents=accents
    )
    target = np.arange(_normalize.CODE_POINTS, dtype=np.int32)
    for point, value in table.items():
        target[point] = ord(value) if value else -1
    target.flags.writeable = False
    return target


@functools.cache
def normalization_table(
    *, lowercase: bool, whitespace: bool, punctuation: bool, format_chars: bool = False, accents: bool = False
) -> tuple[dict[int, str], str]:
    """What :func:`normalize_text_pandas` does to each character, for the GPU backend's cudf string ops.

    Arrow's lowercase maps each code point to one code point, without context (utf8proc's simple
    case mapping; no final sigma), and the punctuation and whitespace rules look at one character
    at a time, so but for whitespace runs and the trim the normalisation is a character map: the
    one found here by running the CPU operations on every code point, so it is the installed
    pyarrow's and RE2's, whatever their Unicode version. Then the map (:func:`character_map`,
    :func:`curate.kernels.normalize.map_characters`), one space for each run of spaces and
    stripping the trim characters from both ends give :func:`normalize_text_pandas`'s result
    without NFKC (tests/test_normalize_device.py checks that against it on real text and on every
    code point).

    Parameters
    ----------
    lowercase, whitespace, punctuation, format_chars, accents : bool
        As :func:`normalize_text_pandas`.

    Returns
    -------
    table : dict of int to str
        For each code point the operations change: the one character it becomes, or ``""`` when
        removed.
    trim : str
        The characters Arrow's ``utf8_trim_whitespace`` removes from the ends (when ``whitespace``;
        ``""`` otherwise). Always holds the space when not empty.

    Raises
    ------
    ValueError
        If the installed pyarrow maps a code point to several characters (no version does so far),
        which a character map cannot reproduce.
    """
    points, chars = _every_code_point()
    mapped = _normalize_chars(
        chars,
        lowercase=lowercase,
        whitespace=whitespace,
        punctuation=punctuation,
        format_chars=format_chars,
        accents=accents,
    )
    changed = pc.indices_nonzero(pc.not_equal(chars, mapped)).to_numpy()
    values = mapped.take(pa.array(changed)).to_pylist()
    if any(len(v) > 1 for v in values):
        raise ValueError("pyarrow maps a character to several in normalisation, which a character map cannot reproduce")
    table = {int(points[i]): v for i, v in zip(changed, values)}
    trim = ""
    if whitespace:
        trimmed = pc.indices_nonzero(pc.equal(pc.utf8_trim_whitespace(chars), "")).to_numpy()
        trim = "".join(chr(points[i]) for i in trimmed)
    return table, trim


@minhash_signatures.register(pd.Series)
def minhash_signatures_pandas(text, seed, a, b, width, words):
    """MinHash signatures, array of shape (n, num_perm), dtype of ``a`` (uint32 or uint64), and shingle counts,
    shape (n,), dtype int64; see :func:`curate.kernels.minhash.minhash` (which raises ValueError on bad ``a``,
    ``b``)."""
    offsets, data = text_buffers(text)
    return _minhash.minhash(offsets, data, seed, a, b, width, words)


@band_buckets.register(np.ndarray)
def band_buckets_numpy(signatures, num_bands, rows_per_band):
    """Bucket ids, array of shape (n, num_bands), dtype uint64; see :func:`curate.kernels.lsh.band_buckets`
    (ValueError if the signatures hold fewer than ``num_bands * rows_per_band`` values)."""
    return _lsh.band_buckets(signatures, num_bands, rows_per_band)


# The host kernels' budget (jaccard_indexed, greedy_representatives): 32 MiB of text, whose
# shingle sets take up to 256 MB. Where a worker has less room, the sets take at most a quarter
# of a thread's: at 600 MB a worker (300 MB of room), 256 MB of sets beside a partition's texts
# restarted the workers in verification until the run stopped (docs/benchmarks.md).
SETS_BUDGET = 1 << 25
SETS_SHARE = 4


def sets_budget() -> int:
    """Text bytes whose shingle sets the host kernels build at once (their ``budget``; the sets
    take up to 8 bytes a text byte): :data:`SETS_BUDGET`, or, in a task of a worker with a memory
    limit, what gives the sets at most 1/:data:`SETS_SHARE` of a thread's room
    (:func:`curate.config.thread_room`), at least 1 MiB. The values the kernels compute do not
    depend on it, only how often a document's set is built again."""
    try:
        worker = get_worker()
    except ValueError:  # not in a task
        return SETS_BUDGET
    limit = worker.memory_manager.memory_limit
    if not limit:
        return SETS_BUDGET
    room = thread_room(limit, worker.state.nthreads)
    return int(min(SETS_BUDGET, max(1 << 20, room / 8 / SETS_SHARE)))


@jaccard.register(pd.Series)
def jaccard_pandas(texts: pd.Series, x, y, width, words, at_least=0.0) -> np.ndarray:
    """Jaccard similarity of ``texts[x[i]]`` and ``texts[y[i]]``'s shingle sets (positions), float64 ``(n,)``; each
    document's set built once per chunk of :func:`sets_budget` text bytes; below ``at_least``, an
    upper bound below it; see :func:`curate.kernels.jaccard.jaccard_indexed`."""
    offsets, data = text_buffers(texts)
    return _jaccard.jaccard_indexed(offsets, data, x, y, width, words, budget=sets_budget(), at_least=at_least)


@greedy_representatives.register(pd.Series)
def greedy_representatives_pandas(
    text: pd.Series, group_starts, threshold, width, words, known=None, fixed=None
) -> tuple[np.ndarray, np.ndarray]:
    """Representative row (int64) and Jaccard similarity with it (float64) per row, arrays of shape (n,);
    ``known``: similarities with each group's first row already found (float64, NaN unknown);
    ``fixed``: rows never taken (bool); see :func:`curate.kernels.jaccard.greedy_representatives`
    (its budget :func:`sets_budget`)."""
    offsets, data = text_buffers(text)
    return _jaccard.greedy_representatives(
        offsets, data, group_starts, threshold, width, words, known, budget=sets_budget(), fixed=fixed
    )


@label_components.register(pd.DataFrame)
def label_components_pandas(edges: pd.DataFrame) -> pd.DataFrame:
    """Columns ``node``, ``component`` (int64, host): each node of the edges ``u``, ``v`` with the
    smallest node of its component; see :func:`curate.kernels.components.components_local`."""
    node, component = _components.components_local(edges["u"].to_numpy("int64"), edges["v"].to_numpy("int64"))
    return pd.DataFrame({"node": node, "component": component})
