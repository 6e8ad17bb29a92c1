"""Random access to input records by ``_doc`` key: for ``curate report``/``inspect`` and error messages.

A key is ``file_index << 40 | position`` (:mod:`curate.schema`), so a record is found from the
input list alone: JSONL by its byte offset (seeking, or decompressing up to it), Parquet by its
row (reading only the row groups that hold it).
"""

import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from fsspec.utils import infer_compression

from curate.io.files import BOM, Broken, decompressed_chunks, expand_paths, lines_before, parquet_file, source_names
from curate.io.records import json_kind
from curate.schema import POSITION_BITS


def locate(inputs, keys) -> list[str]:
    """``"<file>:<line>"`` (JSONL, from 1) or ``"<file>:<row>"`` (Parquet, from 0) of documents by ``_doc`` key.

    Parameters
    ----------
    inputs : list of str
        The inputs given to :func:`curate.io.read_documents` (files are named as in ``OUT/rejected/``).
    keys : iterable of int
        ``_doc`` keys of that read, e.g. ``result.rejected._doc`` of :func:`curate.deduplicate`.

    Reads each JSONL file that holds a key once, up to its last key (decompressing if needed).

    Raises
    ------
    FileNotFoundError
        If an input matches no file.
    IndexError
        For a key whose file index is not among the inputs' files.
    """
    fs, paths, fmt = expand_paths(inputs)
    names = source_names(paths)
    wanted = [(key >> POSITION_BITS, key & ((1 << POSITION_BITS) - 1)) for key in map(int, keys)]
    where = {(index, position): position for index, position in wanted}  # a Parquet row
    if fmt != "parquet":  # the line: each file read once, to its last key
        for index in sorted({index for index, _ in wanted}):
            positions = sorted({position for i, position in wanted if i == index})
            lines = lines_before(fs, paths[index], positions)
            where |= {(index, position): line + 1 for position, line in zip(positions, lines)}
    return [f"{names[index]}:{where[index, position]}" for index, position in wanted]


def read_records(inputs, keys) -> list[dict]:
    """The input records with the given ``_doc`` keys, reading only as far as they lie.

    Each file holding a wanted record is read once, in position order, and no further than its
    last wanted record: uncompressed JSONL by seeking to each record, compressed JSONL by
    decompressing in chunks (the bytes before a wanted record are dropped as they pass),
    Parquet by reading only the row groups that hold the wanted rows. So reading a few records
    of a large run costs at most one decompression of each file they lie in.

    Parameters
    ----------
    inputs : str or list of str
        The inputs of the run, as given to :func:`read_documents` (the file list and its order
        must be the same, or the keys point elsewhere).
    keys : iterable of int
        ``_doc`` keys (``file_index << 40 | position``); repeats allowed.

    Returns
    -------
    list of dict
        One record per key, in the order of ``keys``: the parsed JSON object, or the Parquet row
        (all its fields), as in the input: no assigned id, and a null text stays ``None``. A
        repeated key gives the same dict object each time.

    Raises
    ------
    FileNotFoundError
        If an input matches no file, or a file with wanted records is missing.
    ValueError
        If a key's file index is beyond the input files, or its position is not the start of a
        record in that file (or lies past its end), naming the file and position, and the line
        where known; if a wanted line is not a JSON object.
    """
    fs, paths, fmt = expand_paths(inputs)
    names = source_names(paths)
    keys = [int(k) for k in keys]
    wanted: dict[int, set[int]] = {}
    for key in keys:
        index, position = key >> POSITION_BITS, key & ((1 << POSITION_BITS) - 1)
        if key < 0 or index >= len(paths):
            raise ValueError(
                f"_doc key {key}: file index {key >> POSITION_BITS} is beyond the {len(paths)} input file(s)"
            )
        wanted.setdefault(index, set()).add(position)

    def read_file(index: int) -> dict[int, dict]:
        positions = sorted(wanted[index])
        if fmt == "parquet":
            return _parquet_rows(fs, paths[index], names[index], positions)
        return _jsonl_records(fs, paths[index], names[index], positions)

    # Decompression is CPU work: more threads than cores only slowed it down (measured).
    with ThreadPoolExecutor(max(1, min(len(wanted), os.cpu_count() or 1))) as pool:
        found = dict(zip(wanted, pool.map(read_file, wanted)))
    return [found[key >> POSITION_BITS][key & ((1 << POSITION_BITS) - 1)] for key in keys]


def _jsonl_records(fs, path: str, name: str, positions: list[int]) -> dict[int, dict]:
    """Records of one JSONL file at byte ``positions`` (increasing, in the decompressed stream)."""
    out = {}
    codec = infer_compression(path)
    with fs.open(path, "rb") as f:
        lines = (
            _lines_at_offsets(f, positions)
            if codec is None
            else _lines_in_stream(decompressed_chunks(f, codec), positions)
        )
        try:
            for position, line in zip(positions, lines):
                out[position] = _parse_record(fs, path, name, position, line)
        except Broken as err:
            raise ValueError(f"{name}: {err} before byte position {positions[len(out)]}") from None
    return out


def _lines_at_offsets(f, positions: list[int]):
    """The line (with its ``\\n``) at each byte position of an uncompressed file.

    Yields None where no line starts at the position (a line starts at 0, at 3 after a UTF-8
    BOM, and after every ``\\n``) and ``b""`` past the end of the file.
    """
    first = len(BOM) if f.read(len(BOM)) == BOM else 0
    for position in positions:
        if position <= first:
            start = position == first
        else:
            f.seek(position - 1)
            start = f.read(1) == b"\n"
        f.seek(position)
        line = f.readline()
        yield line if start or not line else None


def _lines_in_stream(chunks, positions: list[int]):
    """Like :func:`_lines_at_offsets` for a file read as a stream of chunks.

    Holds only the bytes from the byte before the wanted line to the end of that line (and the
    rest of the chunk that ends it), so memory stays about one chunk plus one line.
    """
    chunks, buf, base = iter(chunks), bytearray(), 0  # buf holds the stream from byte base on
    while len(buf) < len(BOM) and (chunk := next(chunks, None)) is not None:
        buf += chunk
    first = len(BOM) if buf.startswith(BOM) else 0
    for position in positions:
        ended = False
        while True:
            drop = min(max(position - 1 - base, 0), len(buf))  # keep the byte before the line
            del buf[:drop]
            base += drop
            at = position - base
            if ended or (at < len(buf) and buf.find(b"\n", at) >= 0):
                break
            chunk = next(chunks, None)
            ended = chunk is None
            buf += chunk or b""
        if at >= len(buf):
            yield b""
            continue
        start = position == first if position <= first else buf[at - 1] == 0x0A
        end = buf.find(b"\n", at)
        yield bytes(buf[at : end + 1 if end >= 0 else len(buf)]) if start else None


def _parse_record(fs, path: str, name: str, position: int, line: bytes | None) -> dict:
    """The JSON object on a wanted line; ValueError naming file, position and line if it is none."""
    if line == b"":
        raise ValueError(f"{name}: byte position {position} is past the end of the file")
    record, problem = None, "is not the start of a record" if line is None else "is a blank line"
    if line is not None and line.strip():
        try:
            record = json.loads(line)
            problem = f"holds {json_kind(record)}, not a JSON object"
        except ValueError as err:
            problem = f"is not valid JSON ({err})"
    if isinstance(record, dict):
        return record
    line_number = lines_before(fs, path, [position])[0] + 1  # counted on this error path only
    raise ValueError(f"{name}: byte position {position} (line {line_number}) {problem}")


def _parquet_rows(fs, path: str, name: str, rows: list[int]) -> dict[int, dict]:
    """Rows of one Parquet file, reading only the row groups that hold them."""
    out = {}
    with fs.open(path, "rb") as f:
        parquet = parquet_file(f)
        sizes = [parquet.metadata.row_group(g).num_rows for g in range(parquet.num_row_groups)]
        ends = np.cumsum(sizes, dtype=np.int64)
        if rows[-1] >= parquet.metadata.num_rows:
            raise ValueError(f"{name}: row {rows[-1]} is past the end of the file ({parquet.metadata.num_rows} rows)")
        groups = np.searchsorted(ends, rows, side="right")
        for group in np.unique(groups):
            table = parquet.read_row_group(int(group))
            first = int(ends[group] - sizes[group])
            mine = [row for row, g in zip(rows, groups) if g == group]
            out.update(zip(mine, table.take([row - first for row in mine]).to_pylist()))
    return out


__all__ = ["locate", "read_records"]
