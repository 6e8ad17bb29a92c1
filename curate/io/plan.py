"""Partition planning: which files, or which byte range of a file, each partition reads.

JSONL larger than ``blocksize`` (decompressed) is split into partitions of about that size at
line ends; other files are read whole and packed into partitions of about ``blocksize`` bytes
(or ``files_per_partition`` to a partition). A partition's ``_doc`` range follows from its files
and offsets alone (:func:`source_divisions`), before anything is read.
"""

from dataclasses import dataclass, replace

from fsspec.utils import infer_compression, read_block

from curate.schema import POSITION_BITS


@dataclass(frozen=True)
class Source:
    """One partition's worth of input: whole files, or a byte range of one uncompressed file."""

    paths: tuple[str, ...]
    file_indices: tuple[int, ...]
    fmt: str  # "jsonl" or "parquet"
    offset: int = 0
    length: int | None = None  # None: whole file(s); TO_THE_END: from offset to the end
    first_line: int | None = 1  # line number of the block's first line; None: not counted


# The smallest partition that spreading the input over the workers' threads makes: a partition
# has a fixed cost (its tasks, their scheduling), and an input under twice this finishes in a
# few seconds on one thread anyway (the Bible corpus, 30 MB: 5.6 s in one partition, 5.6 s in
# two of 16 MB, 6.1 s in three cut at 8 MB on 2 threads; docs/benchmarks.md).
SPREAD_FLOOR = 16 << 20

# The length of a compressed file's last block: its size decompressed is estimated from a sample
# (curate.io.files.sample_file), so the last block reads on to the stream's end, wherever that is.
TO_THE_END = 1 << 62

# The most blocks a compressed file is cut in. Each decodes the stream from its start, so k blocks
# decode it (k + 1) / 2 times: a few blocks bound the memory of a partition of short documents
# (MinHash + LSH take 4 KB each) at little cost, where a 4 GB shard cut in 64 MB blocks would
# decode 130 GB. Beyond them a block is larger than --blocksize.
COMPRESSED_BLOCKS = 4


def plan_sources(
    paths: list[str],
    fmt: str,
    blocksize: int | None,
    files_per_partition: int | None,
    sizes: list[int],
    min_partitions: int = 1,
) -> list[Source]:
    """Split the input files into partitions, in input order.

    Parameters
    ----------
    paths : list of str
    fmt : {"jsonl", "parquet"}
    blocksize : int or None
        Target partition size in bytes (of JSONL as read, decompressed). JSONL larger than
        this is split into byte ranges at line ends (of the decompressed stream, where a
        compressed file makes at most :data:`COMPRESSED_BLOCKS` ranges and its last reads on to
        its end); other files are read whole and
        consecutive ones are packed into a partition while their sizes sum to at most
        ``blocksize`` (at least one file each). None: no splitting, one file per partition.
    files_per_partition : int or None
        Instead of packing by size, this many consecutive whole files per partition.
    sizes : list of int
        Each file's size in bytes, decompressed (estimated for compressed JSONL; see
        :func:`curate.io.files.sample_file`); Parquet files count their size on disk.
    min_partitions : int, default=1
        With ``blocksize``: partitions are made smaller than ``blocksize`` where the input
        would otherwise make fewer than this many, down to the input's size divided by it, but
        not under :data:`SPREAD_FLOOR` (16 MiB): so that every worker thread gets a partition
        (whole files may still make fewer).

    Returns
    -------
    list of Source
        Ordered by their first document, so partition order is input order.
    """
    if blocksize and files_per_partition is None and min_partitions > 1:
        blocksize = min(blocksize, max(SPREAD_FLOOR, -(-sum(sizes) // min_partitions)))
    sources: list[Source] = []
    run: list[int] = []  # consecutive whole files not yet placed

    def place_run():
        groups, group, total = [], [], 0
        for index in run:
            full = len(group) == files_per_partition if files_per_partition else total + sizes[index] > (blocksize or 0)
            if group and full:
                groups.append(group)
                group, total = [], 0
            group.append(index)
            total += sizes[index]
        groups += [group] if group else []
        sources.extend(Source(tuple(paths[i] for i in g), tuple(g), fmt) for g in groups)
        run.clear()

    for index, path in enumerate(paths):
        if fmt == "jsonl" and blocksize and sizes[index] > blocksize:
            place_run()
            # A compressed file's blocks each decode it from its start (up to their end): read
            # whole, 48 MiB of lines were one partition whatever --blocksize said (a user's trial).
            compressed = infer_compression(path) is not None
            step = max(blocksize, -(-sizes[index] // COMPRESSED_BLOCKS)) if compressed else blocksize
            offsets = range(0, sizes[index], step)
            last = offsets[-1] if compressed else None
            sources.extend(
                Source((path,), (index,), fmt, off, TO_THE_END if off == last else step, None if off else 1)
                for off in offsets
            )
        else:
            run.append(index)
    place_run()
    return sources


def parse_pieces(source: Source, sizes: list[int], piece: int) -> list[Source]:
    """``source`` as consecutive sources of at most about ``piece`` bytes each, read separately
    and concatenated in order: the same records, rows and keys as ``source`` read whole.

    A byte range is cut into ranges of ``piece`` bytes (the records of consecutive ranges tile
    the whole range's, :func:`fsspec.utils.read_block`); whole files are packed into runs of at
    most ``piece`` bytes (at least one file each). The first piece keeps ``first_line``; the
    others' are unknown (``None``: :func:`with_line_numbers` counts them).

    Parameters
    ----------
    source : Source
        One partition's input (from :func:`plan_sources`).
    sizes : list of int
        Every input file's size in bytes, by file index (as given to :func:`plan_sources`).
    piece : int
        The largest piece in bytes.
    """
    if source.length is not None and infer_compression(source.paths[0]):  # each piece would decode the file again
        return [source]
    if source.length is not None:
        end = min(source.offset + source.length, sizes[source.file_indices[0]])  # a file's last range may pass its end
        return [
            replace(source, offset=cut, length=min(piece, end - cut),
                    first_line=source.first_line if cut == source.offset else None)
            for cut in range(source.offset, end, piece)
        ]  # fmt: skip
    runs, total = [], 0
    for path, index in zip(source.paths, source.file_indices):
        if runs and total + sizes[index] <= piece:
            runs[-1].append((path, index))
            total += sizes[index]
        else:
            runs.append([(path, index)])
            total = sizes[index]
    return [replace(source, paths=tuple(p for p, _ in run), file_indices=tuple(i for _, i in run)) for run in runs]


def source_divisions(sources: list[Source]) -> tuple[int, ...]:
    """The ``_doc`` range of each partition, as Dask divisions: partition ``i`` holds keys in
    ``[divisions[i], divisions[i + 1])`` (the last bound included).

    Whole files start at ``file_index << 40``. A byte range of a file that starts at ``offset
    > 0`` holds the lines that start after the first line end at or after ``offset``
    (:func:`fsspec.utils.read_block`), so its keys are at least ``offset + 1``, and the range
    before it ends with the line that holds byte ``offset``, which starts at or before it.
    """
    starts = [(s.file_indices[0] << POSITION_BITS) | (s.offset + 1 if s.offset else 0) for s in sources]
    return (*starts, ((sources[-1].file_indices[-1] + 1) << POSITION_BITS) - 1)


def with_line_numbers(fs, sources: list[Source]) -> list[Source]:
    """Set ``first_line`` of byte-range sources of uncompressed files by counting the line ends
    before each block (a compressed file's blocks count theirs as they decode up to them)."""
    out, lines, last_path = [], 1, None
    for src in sources:
        if src.length is None or infer_compression(src.paths[0]):
            out.append(src)
            continue
        if src.paths[0] != last_path:
            lines, last_path = 1, src.paths[0]
        out.append(replace(src, first_line=lines))
        with fs.open(src.paths[0], "rb") as f:
            lines += read_block(f, src.offset, src.length, delimiter=b"\n").count(b"\n")
    return out


__all__ = [
    "COMPRESSED_BLOCKS",
    "TO_THE_END",
    "Source",
    "parse_pieces",
    "plan_sources",
    "source_divisions",
    "with_line_numbers",
]
