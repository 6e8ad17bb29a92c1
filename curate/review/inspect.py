"""A finished run, read back for people: which documents went, next to the one kept, and why.

``curate report`` (:mod:`curate.review.report`) and ``curate inspect`` read an output folder through
:class:`RunOutput`. They read ``summary.json`` and the two small tables (``removed.parquet``,
``duplicates.parquet``), and only the texts they show. Those texts come from the input files,
at the ``source`` and ``position`` that ``duplicates.parquet`` records for every group
member: the deduplicated output no longer holds the removed documents. An input file that is
missing, or changed since the run (size or modification time), gives no text rather than a
wrong one.
"""

import functools
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from fsspec.utils import infer_compression
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from curate.checkpoints import modified
from curate.io.files import counted, decompressed, first_few, source_names
from curate.io.lookup import read_records
from curate.review.diff import CJK, UNSPACED, Diff, word_diff
from curate.schema import POSITION_BITS

# The columns of the two tables that a review reads.
REVIEWED_COLUMNS = {
    "removed": ("id", "kind", "representative", "jaccard"),
    "duplicates": ("id", "group", "kind", "kept", "jaccard", "source", "position"),
}
_OLDER = "{} was written by curate {}, which did not record {}; rerun it with curate >= 0.2 (--overwrite)"
# Crawled text holds control characters: in a terminal ESC [ 31 m recolours and others clear the
# screen or retitle the window; in a page they are drawn as empty boxes or not at all (Reuters'
# U+0003 ends every article). The report and inspect show each as \xNN, never send it.
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
# and the format characters (Unicode category Cf): the bidirectional overrides and isolates,
# which reorder what follows them on the line, and the invisible ones (zero-width space, soft
# hyphen, BOM), which made two words that differ look the same, one of them marked changed.
_CONTROL |= {c: f"\\u{c:04x}" for c in range(0x10000) if unicodedata.category(chr(c)) == "Cf"}


# A pair shows about 4,000 characters a side, but at least one word: a 2.7 MB one made a 10.8 MB page.
_WORD_SHOWN = 1_000
_LONG_WORD = re.compile(rf"[^\s{CJK}{UNSPACED}]{{{_WORD_SHOWN + 1},}}")  # a word as word_diff cuts them


def visible(text: str) -> str:
    """``text`` with its control characters (C0 but tab and newline, DEL, C1) written as ``\\xNN``,
    a CR before a newline left out (Windows line ends: Gutenberg's), the format characters
    (bidirectional controls, zero-width ones) of the Basic Multilingual Plane as ``\\uNNNN``, and
    a word longer than 1,000 characters (a base64 blob) cut there: "… (N more characters)"."""
    text = _LONG_WORD.sub(
        lambda m: f"{m[0][:_WORD_SHOWN]}… ({counted(len(m[0]) - _WORD_SHOWN, 'more character')})", text
    )
    return text.replace("\r\n", "\n").translate(_CONTROL)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")  # a summary holds more than a review reads


class _InputFile(_Open):
    path: str
    size: int
    modified: str


class _Config(_Open):
    class _IO(_Open):
        text_field: str
        output_format: str | None
        output_compression: str | None

    class _Fuzzy(_Open):
        threshold: float
        num_bands: int
        rows_per_band: int
        verify: bool

    mode: str
    keep: str
    backend: str
    io: _IO
    fuzzy: _Fuzzy


class _Counts(_Open):
    class _Input(_Open):
        documents: int

    class _Output(_Open):
        kept: int
        removed: int

    input: _Input
    output: _Output
    exact: dict[str, int] = {}
    fuzzy: dict[str, int] = {}
    rejected: dict[str, int] = {}


class _Peak(_Open):
    client: int
    workers: dict[str, int]
    total: int


class _Versions(_Open):
    curate: str


class RunSummary(_Open):
    """What ``curate report`` and ``curate inspect`` read of a run's ``summary.json`` (its other
    keys are allowed): the shape :class:`RunOutput` checks before a review, so that an edited or
    damaged file is named rather than failing deep inside the report.

    Raises
    ------
    pydantic.ValidationError
        (a ValueError) If a key it reads is missing or of the wrong type, ``input_files`` is empty
        or ``seconds`` has no ``total``.
    """

    inputs: list[str]
    input_files: list[_InputFile] = Field(min_length=1)
    output_format: str | None
    output_compression: str | None
    config: _Config
    counts: _Counts
    reused_stages: list[str]
    seconds: dict[str, float]
    peak_rss_bytes: _Peak
    stage_peak_rss_bytes: dict[str, _Peak] = {}
    spilled_bytes: int | None = None
    versions: _Versions

    @field_validator("seconds")
    @classmethod
    def _total(cls, value):
        if "total" not in value:
            raise ValueError("no total")
        return value


def _release(version: str) -> tuple[int, ...]:
    """``(0, 2)`` of ``"0.2.0"`` or ``"0.2.dev3"``."""
    return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


@dataclass(frozen=True)
class Pair:
    """A removed document beside its representative (the kept document that stands for it).

    Attributes
    ----------
    removed, representative : str or int
        The documents' ids.
    kind : {"exact", "fuzzy"}
        How the document was removed.
    jaccard : float
        Jaccard similarity of the two documents' shingle sets (1.0 for exact copies; NaN when
        the run did not verify candidates).
    group : str or int
        The group the pair is shown for (its representative's id).
    group_size : int
        Documents in that group, its representative included.
    diff : Diff or None
        Word-level differences (:func:`curate.review.diff.word_diff`); None when a text is unavailable.
    unavailable : str
        Why a text could not be read ("" when both were).
    """

    removed: object
    representative: object
    kind: str
    jaccard: float
    group: object
    group_size: int
    diff: Diff | None
    unavailable: str = ""
    null: str = ""  # which text is null in the input ("removed", "kept", "both"), read as empty
    reference: bool = False  # the representative is a reference document (--reference): kept, not written

    @property
    def kept_label(self) -> str:
        """What the representative is, for a column's head: ``kept``, or ``kept (reference)``."""
        return "kept (reference)" if self.reference else "kept"

    @property
    def via(self):
        """For an exact copy of a document that then went as a near duplicate: that document's id (else None)."""
        return self.group if self.kind == "exact" and self.group != self.representative else None

    def headline(self, mark) -> str:
        """One line saying what was removed for what, how similar, and how much differs.

        ``mark(id) -> str`` escapes and emphasises an id for the medium (HTML, rich markup); the
        rest is plain text.
        """
        via = f" (exact copy of {mark(self.via)}, itself removed as a near duplicate)" if self.via is not None else ""
        similarity = (
            "Jaccard not computed (--no-verify)" if np.isnan(self.jaccard) else f"Jaccard {jaccard_text(self.jaccard)}"
        )
        line = f"removed {mark(self.removed)}{via} · kept {mark(self.representative)} · {similarity} · {self.kind} group of {self.group_size:,}"
        if self.diff is None:
            return line
        diff = self.diff
        # The same words and yet not the same shingles: the texts differ in whitespace, which the diff does not mark.
        spaces = diff.complete and diff.words_a and not (diff.changed_a or diff.changed_b) and self.jaccard < 1.0
        null = {"removed": "the removed text is null", "kept": "the kept text is null", "both": "both texts are null"}
        nulls = f" ({null[self.null]}, read as empty)" if self.null else ""
        return f"{line} · {differing(diff)}{nulls}{', only spaces and line breaks differ' if spaces else ''}"


# `curate inspect --id` searches the kept copy for an id in no duplicate group up to this size on disk (bytes).
SEARCHED_BYTES = 2 * 10**9


class KeptAlone(KeyError):
    """An id in no duplicate group whose document was kept (:meth:`RunOutput.document`): the
    message names the part file that holds it, and where other records with the id were rejected."""


_PLAIN = re.compile(r"[A-Za-z0-9 _.:@+/-]*")
_UNREADABLE = object()  # a rejected record's id that cannot be read (:func:`_record_id`)
_JSON = json.JSONDecoder()
_BLANK = re.compile(r"[ \t\n\r]*")


def _leading_members(text: str):
    """The members of the JSON object that ``text`` begins, in order, up to the first that cannot
    be parsed: what a record that is cut off, or invalid further on, still says."""
    at, separator = _BLANK.match(text).end(), "{"
    while text.startswith(separator, at):
        at = _BLANK.match(text, at + 1).end()
        if not text.startswith('"', at):
            return
        try:
            key, at = json.decoder.scanstring(text, at + 1)
            at = _BLANK.match(text, at).end()
            if not text.startswith(":", at):
                return
            value, at = _JSON.raw_decode(text, _BLANK.match(text, at + 1).end())
        except (ValueError, RecursionError):
            return
        yield key, value
        at, separator = _BLANK.match(text, at).end(), ","


def _record_id(record: bytes, field: str):
    """The id of a record in ``rejected/`` (its bytes as read) as a string (``7`` and ``"7"`` are
    one id); None where the record, read whole, holds no ``field``; :data:`_UNREADABLE` where it
    cannot be read as far as its id: not JSON, cut off or invalid before the id, or invalid UTF-8
    in the id itself. Invalid UTF-8 or JSON elsewhere (in a text, after the id) does not hide it."""
    text = record.decode("utf-8", "surrogateescape")  # invalid bytes as lone surrogates, kept apart
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # invalid JSON, or nested past Python's recursion limit
        value = dict(_leading_members(text))
        if field not in value:  # it may come after what could be read
            return _UNREADABLE
    if not isinstance(value, dict) or field not in value:
        return None
    held = str(value[field])
    try:
        held.encode("utf-8")
    except UnicodeEncodeError:  # invalid bytes in the id: no id that can be typed
        return _UNREADABLE
    return held


def _lines_matching(data: bytes, pattern: re.Pattern):
    """The lines of ``data`` (JSONL) where ``pattern`` matches, each once."""
    end = 0
    while (found := pattern.search(data, end)) is not None:
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        end = len(data) if end < 0 else end
        yield data[start:end]


class RunOutput:
    """The outputs of one ``curate dedup`` run, read for review.

    Parameters
    ----------
    out_dir : str or path-like
        A folder written by ``curate dedup`` (it holds ``summary.json``).
    max_chars : int, default=4000
        About how many characters of each text a pair shows (:func:`curate.review.diff.word_diff`).

    Attributes
    ----------
    summary : dict
        ``summary.json``.
    removed : pandas.DataFrame
        ``removed.parquet``: ``id``, ``kind``, ``representative``, ``jaccard``, in input order.
    duplicates : pandas.DataFrame
        ``duplicates.parquet``: ``id``, ``group``, ``kind``, ``kept``, ``jaccard``, ``source``,
        ``position``, one row per document per group.

    Raises
    ------
    FileNotFoundError
        If ``out_dir`` holds no finished run (no ``summary.json``), or lacks ``removed.parquet``
        or ``duplicates.parquet``.
    ValueError
        If one of those files is damaged (not JSON or Parquet, ``summary.json`` not shaped as
        :class:`RunSummary`, a table without the columns of :data:`REVIEWED_COLUMNS`, or the
        tables naming input files the summary does not list), or the run was written by a curate
        without what a review needs (before 0.2).
    """

    def __init__(self, out_dir, *, max_chars: int = 4_000):
        self.out_dir, self.max_chars = Path(out_dir), max_chars
        summary = self.out_dir / "summary.json"
        if not summary.is_file():
            raise FileNotFoundError(f"{self.out_dir}: no summary.json, so not a finished curate dedup run")
        # Damaged outputs (a copy cut short, an edit) are named with the fix, not a KeyError
        # or a traceback from deep inside the report.
        again = "run curate dedup again with --overwrite"
        try:
            self.summary = json.loads(summary.read_text())
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"{summary} is damaged ({err}); {again}") from None
        if not isinstance(self.summary, dict):
            raise ValueError(f"{summary} is damaged: it holds no JSON object; {again}")
        version = (
            self.summary.get("versions", {}).get("curate") if isinstance(self.summary.get("versions"), dict) else None
        )
        older = isinstance(version, str) and _release(version) < (0, 2)
        if older and "input_files" not in self.summary:  # before 0.2 no review was possible
            raise ValueError(_OLDER.format(self.out_dir, version, ["input_files"]))
        try:
            RunSummary.model_validate(self.summary)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the file"
            raise ValueError(f"{summary} is damaged: {where}: {first['msg']}; {again}") from None
        for name, columns in REVIEWED_COLUMNS.items():
            path = self.out_dir / f"{name}.parquet"
            if not path.exists():
                raise FileNotFoundError(f"{self.out_dir}: no {path.name}, so the run's outputs are incomplete; {again}")
            try:
                setattr(self, name, pd.read_parquet(path))
            except (OSError, pa.ArrowException) as err:
                raise ValueError(f"{path} is damaged ({err}); {again}") from None
            missing = sorted(set(columns) - set(getattr(self, name).columns))
            if missing and older:
                raise ValueError(_OLDER.format(self.out_dir, version, missing))
            if missing:
                raise ValueError(f"{path} is damaged: it lacks the column(s) {missing}; {again}")
        listed = set(source_names([f["path"] for f in self.summary["input_files"]]))
        unlisted = sorted(set(self.duplicates.source.unique()) - listed)
        if unlisted:
            raise ValueError(
                f"{self.out_dir / 'duplicates.parquet'} names input files that summary.json does not list "
                f"(e.g. {unlisted[0]!r}): the two are from different runs; {again}"
            )
        self.text_field = self.summary["config"]["io"]["text_field"]

    @functools.cached_property
    def group_sizes(self) -> pd.DataFrame:
        """``kind``, ``group`` (its representative's id), ``size`` (documents, >= 2) and ``least``
        (the smallest Jaccard similarity of a member with the representative) of every group.

        Largest first; among groups of one size the kinds take turns (so the largest exact groups
        show even where near-duplicate groups of that size are many), least similar first within
        a kind, then by group id.
        """
        members = self.duplicates.groupby(["kind", "group"], sort=True)
        sizes = pd.DataFrame({"size": members.size(), "least": members.jaccard.min()}).reset_index()
        sizes = sizes.sort_values(["size", "kind", "least"], ascending=[False, True, True], kind="stable")
        sizes["turn"] = sizes.groupby(["size", "kind"]).cumcount()
        return sizes.sort_values(["size", "turn"], ascending=[False, True], kind="stable", ignore_index=True).drop(
            columns="turn"
        )

    def largest_groups(self, n: int) -> list[Pair]:
        """For each of the ``n`` largest groups (see :attr:`group_sizes`), its least similar removed
        member beside its representative."""
        sizes = self.group_sizes.head(n)
        members = self.duplicates.merge(sizes, on=["kind", "group"])
        removed = self.removed.set_index("id")
        rows = []
        for (kind, group), size in zip(zip(sizes.kind, sizes.group), sizes["size"]):
            # Not the representative itself, which is not kept either when it went as a near duplicate.
            gone = members[(members.kind == kind) & (members.group == group) & (members.id != group)]
            member = gone.sort_values("jaccard", kind="stable").id.iloc[0]
            rows.append(
                (member, removed.loc[member, "representative"], kind, removed.loc[member, "jaccard"], group, size)
            )
        return self._pairs(rows)

    def sample(self, n: int, seed: int = 0) -> list[Pair]:
        """``n`` removed documents drawn at random, in input order, beside their representatives:
        as many of each kind (fuzzy, exact) as it has, up to an even share, and of each kind one
        per representative before any representative's second, so that thousands of exact
        copies (of empty documents, say) do not crowd out the near duplicates a reviewer has to
        judge, nor one large group the others.

        Each kind's draw is the first of an order of its rows (a numpy ``default_rng(seed)``
        permutation, each row then ranked by how many of its representative's came before it),
        so a smaller sample with the same seed is part of a larger one (``inspect``'s 3 are
        among the report's 20).
        """
        rows = {kind: np.flatnonzero(self.removed.kind.to_numpy() == kind) for kind in ("fuzzy", "exact")}
        n = max(0, min(n, len(self.removed)))
        fuzzy = min(len(rows["fuzzy"]), max(-(-n // 2), n - len(rows["exact"])))  # the odd one to fuzzy
        shares = {"fuzzy": fuzzy, "exact": n - fuzzy}
        chosen = []
        for kind, kind_rows in rows.items():
            drawn = kind_rows[np.random.default_rng(seed).permutation(len(kind_rows))]
            representatives = pd.Series(self.removed.representative.to_numpy()[drawn])
            rank = representatives.groupby(representatives, sort=False).cumcount().to_numpy()
            chosen.append(drawn[np.argsort(rank, kind="stable")][: shares[kind]])
        return self._pairs_of(self.removed.iloc[np.sort(np.concatenate(chosen))])

    def group(self, group, limit: int | None = None) -> tuple[list[Pair], int]:
        """The documents removed in favour of ``group`` (a kept id), or removed from the group
        that ``duplicates.parquet`` names ``group``, least similar first, at most ``limit``; and
        how many there are in all (a group of paragraphs' boilerplate holds thousands).

        Raises
        ------
        KeyError
            If ``group`` names no group, saying what it is instead when it was removed or rejected.
        """
        group = self._id(group)
        members = self.duplicates[(self.duplicates.group == group) & ~self.duplicates.kept]
        rows = self.removed[(self.removed.representative == group) | self.removed.id.isin(members.id)]
        if not len(rows):
            gone = self.removed[self.removed.id == group]
            if len(gone):
                kept = gone.representative.iloc[0]
                raise KeyError(
                    f"{group!r} was removed ({gone.kind.iloc[0]}, kept: {kept!r}): try --id {group} or --group {kept}"
                )
            if rejected := self.rejected_as(group):
                places = first_few([f"{where} ({kind})" for where, kind in rejected], sep=", ")
                raise KeyError(
                    f"no duplicate group has representative {group!r}; records with this id were rejected: "
                    f"{places} (listed in {self.out_dir / 'rejected'})"
                )
            raise KeyError(f"no duplicate group has representative {group!r}")
        return self._pairs_of(rows.sort_values("jaccard", kind="stable").head(limit)), len(rows)

    def document(self, doc_id, limit: int | None = None) -> tuple[list[Pair], int]:
        """The removed document ``doc_id`` beside its representative, or, for a representative,
        its group's removed members (:meth:`group`); and how many there are in all.

        Raises
        ------
        KeptAlone
            If ``doc_id`` is in no duplicate group and a kept document has it (:meth:`kept_file`),
            naming the part file, and where ``--on-error skip`` rejected other records with the id
            (a repeated id, say), from ``rejected/``.
        KeyError
            If ``doc_id`` is in no duplicate group otherwise: its records were rejected (then
            naming where, from ``rejected/``), or it is not in the input (then saying how many
            rejected records have no readable id, :meth:`rejected_as`); or, where the kept copy was
            not searched, either of those or kept.
        """
        doc_id = self._id(doc_id)
        row = self.removed[self.removed.id == doc_id]
        if len(row):
            return self._pairs_of(row), len(row)
        if (self.duplicates.group == doc_id).any() or (self.removed.representative == doc_id).any():
            return self.group(doc_id, limit)
        # A record rejected before one with its id was read leaves that one kept: both are searched.
        rejected = self.rejected_as(doc_id)
        kept, unsearched = self.kept_file(doc_id)
        places = first_few([f"{where} ({kind})" for where, kind in rejected], sep=", ")
        listed = f"(listed in {self.out_dir / 'rejected'})"
        if kept is not None:
            also = f"; records with this id were rejected: {places} {listed}" if rejected else ""
            raise KeptAlone(f"{doc_id!r} was kept and is in no duplicate group: {kept}{also}")
        if unsearched and any(kind == "duplicate-id" for _, kind in rejected):  # a first record was read
            raise KeyError(
                f"{doc_id!r} is in no duplicate group: it was kept as unique ({unsearched}); later records with "
                f"this id were rejected as repeated ids: {places} {listed}"
            )
        if rejected:
            raise KeyError(f"{doc_id!r} was rejected, so not deduplicated: {places} {listed}")
        note = ""  # the id may be in a rejected record that cannot be read
        if unreadable := self._unreadable():
            have = "has" if len(unreadable) == 1 else "have"
            note = (
                f"; {counted(len(unreadable), 'rejected record')} {have} no readable id (not JSON, say): "
                f"--id FILE:LINE finds one, e.g. --id {unreadable[0]} {listed}"
            )
        if self.summary.get("reference"):  # read, but neither written nor searched
            note += "; or it is a reference document (--reference), in no duplicate group"
        if unsearched:
            raise KeyError(
                f"{doc_id!r} is in no duplicate group: it was kept as unique, or is not an input id ({unsearched}){note}"
            )
        raise KeyError(f"{doc_id!r} is not an input id: no duplicate group and no kept document has it{note}")

    def kept_file(self, doc_id) -> tuple[Path | None, str]:
        """The part file of ``deduplicated/`` that holds the kept document ``doc_id`` (None if
        none does), and why it was not searched (``""`` if it was): no kept copy was written, or
        it is larger than :data:`SEARCHED_BYTES` on disk.

        Parquet parts are read for their id column. JSONL ones are decompressed, and only the
        lines where the id field has the id's text (a pattern on the bytes, for a field and id of
        letters, digits, spaces and ``_.:@+-/``, which JSON writers leave unescaped or write
        a backslash before ``/``; every line otherwise) are parsed to compare.
        """
        folder = self.out_dir / "deduplicated"
        parts = sorted(folder.glob("part.*"), key=lambda f: int(f.name.split(".")[1])) if folder.is_dir() else []
        if not parts:
            return None, "the run wrote no kept copy to search: --identify-only"
        size = sum(f.stat().st_size for f in parts)
        if size > SEARCHED_BYTES:
            return None, f"the kept copy, {size / 1e9:.1f} GB, was not searched"
        field, wanted = self.summary["config"]["io"].get("id_field") or "id", str(doc_id)
        pattern = None
        if _PLAIN.fullmatch(field + wanted):  # characters JSON writers leave as they are ("/" or "\/")
            value = re.escape(wanted.encode()).replace(b"/", rb"(?:/|\\/)")
            pattern = re.compile(
                rb'"' + re.escape(field.encode()) + rb'"\s*:\s*(?:"' + value + rb'"|' + value + rb")\s*[,}]"
            )
        for part in parts:
            if part.suffix == ".parquet":
                if any(str(v) == wanted for v in pq.read_table(part, columns=[field]).column(field).to_pylist()):
                    return part, ""
                continue
            with part.open("rb") as f:
                data, _ = decompressed(f, infer_compression(str(part)))
            lines = data.splitlines() if pattern is None else _lines_matching(data, pattern)
            for line in lines:
                record = json.loads(line)
                if isinstance(record, dict) and field in record and str(record[field]) == wanted:
                    return part, ""
        return None, ""

    def rejected_as(self, doc_id) -> list[tuple[str, str]]:
        """Where ``--on-error skip`` rejected a record with id ``doc_id``, from ``rejected/``:
        ``("file:line", kind)`` for each record whose JSON holds the run's id field with that
        value (as a string: ``7`` and ``"7"`` are one id), or, for one that holds no id (assigned
        ids) or none that can be read (not JSON, say), whose ``file:line`` it is. A record's id is
        read though its text has invalid UTF-8 or it is invalid JSON after the id (cut off,
        say). Empty where nothing was rejected (or ``rejected/`` is unreadable)."""
        rejected = self._rejected
        if rejected is None:
            return []
        field, wanted = self.summary["config"]["io"].get("id_field") or "id", str(doc_id)
        found = []
        for source, line, kind, record in zip(rejected.source, rejected.line, rejected.kind, rejected.record):
            where = f"{source}:{line}"
            if where != wanted and wanted.isascii() and wanted.encode() not in record:  # most: no JSON parse
                continue
            held = _record_id(record, field)
            if (held == wanted) if isinstance(held, str) else (where == wanted):
                found.append((where, kind))
        return found

    def _unreadable(self) -> list[str]:
        """``file:line`` of each record in ``rejected/`` whose id cannot be read (:func:`_record_id`):
        :meth:`rejected_as` finds these only by that ``file:line``."""
        rejected = self._rejected
        if rejected is None:
            return []
        field = self.summary["config"]["io"].get("id_field") or "id"
        return [
            f"{source}:{line}"
            for source, line, record in zip(rejected.source, rejected.line, rejected.record)
            if _record_id(record, field) is _UNREADABLE
        ]

    @functools.cached_property
    def _rejected(self) -> pd.DataFrame | None:
        """``rejected/`` (``source``, ``line``, ``kind``, ``record``); None where there is none (a
        run that rejected nothing has no folder) or it is damaged."""
        try:
            return pd.read_parquet(self.out_dir / "rejected", columns=["source", "line", "kind", "record"])
        except (OSError, pa.ArrowException):
            return None

    def _id(self, value):
        """A command-line id in the id column's type."""
        if not pd.api.types.is_integer_dtype(self.duplicates.id.dtype):
            return str(value)
        try:
            return int(value)
        except ValueError:  # "invalid literal for int() with base 10"
            raise KeyError(f"{value!r} is not an id of this run: its ids are integers") from None

    def _pairs_of(self, removed: pd.DataFrame) -> list[Pair]:
        # Each is shown in the group it was removed from: for an exact copy whose representative
        # then went as a near duplicate, that is the exact group, not its final representative's.
        member = self.duplicates[~self.duplicates.kept][["id", "kind", "group"]]
        rows = removed.merge(member, on=["id", "kind"], how="left").merge(
            self.group_sizes[["kind", "group", "size"]], on=["kind", "group"], how="left"
        )
        return self._pairs(list(zip(rows.id, rows.representative, rows.kind, rows.jaccard, rows.group, rows["size"])))

    def _pairs(self, rows: list[tuple]) -> list[Pair]:
        texts, unavailable = self.texts({doc for row in rows for doc in row[:2]})
        pairs = []
        for removed, representative, kind, jaccard, group, size in rows:
            missing = "; ".join(dict.fromkeys(unavailable[d] for d in (removed, representative) if d in unavailable))
            a, b = (None, None) if missing else (texts[removed], texts[representative])
            diff = None if missing else word_diff(a or "", b or "", max_chars=self.max_chars)
            null = {(True, True): "both", (True, False): "removed", (False, True): "kept"}.get(
                (not missing and a is None, not missing and b is None), ""
            )
            reference = representative in self.reference_ids
            pairs.append(
                Pair(removed, representative, kind, float(jaccard), group, int(size), diff, missing, null, reference)
            )
        return pairs

    @functools.cached_property
    def reference_ids(self) -> set:
        """Ids of the group members read from the run's reference (``curate dedup --reference``):
        its files are the first ``reference_files`` of ``input_files``."""
        n = self.summary.get("reference_files", 0)
        if not n:
            return set()
        names = source_names([f["path"] for f in self.summary["input_files"]])[:n]
        return set(self.duplicates.id[self.duplicates.source.isin(names)])

    @functools.cached_property
    def input_problems(self) -> dict[str, str]:
        """Input files (path -> why) that are missing, or changed since the run (size or modification time)."""
        files = self.summary["input_files"]
        fs, _ = url_to_fs(files[0]["path"])
        problems = {f["path"]: _changed(fs, f) for f in files}
        return {path: problem for path, problem in problems.items() if problem}

    def texts(self, ids) -> tuple[dict, dict]:
        """The input texts of documents (ids of group members), read from the input files.

        Returns
        -------
        texts : dict
            id -> text (str), or None where the input's text is null (the run read it as empty).
        unavailable : dict
            id -> why it could not be read (the file is missing or changed since the run).
        """
        where = self.duplicates[self.duplicates.id.isin(list(ids))].drop_duplicates("id")
        paths = [f["path"] for f in self.summary["input_files"]]
        index = {name: i for i, name in enumerate(source_names(paths))}
        problems = self.input_problems
        readable = [i for i in sorted({index[source] for source in where.source}) if paths[i] not in problems]
        slot = {i: k for k, i in enumerate(readable)}  # a file's index in the list read
        keys, wanted, unavailable = [], [], {}
        for doc, source, position in zip(where.id, where.source, where.position):
            i = index[source]
            if paths[i] in problems:
                unavailable[doc] = f"{paths[i]}: {problems[paths[i]]}"
            else:
                keys.append((slot[i] << POSITION_BITS) | int(position))
                wanted.append(doc)
        records = read_records([paths[i] for i in readable], keys) if keys else []
        # (a Parquet text column of binary, as Hive writes strings, was read as UTF-8 by the run)
        texts = [record[self.text_field] for record in records]
        texts = [text.decode("utf-8") if isinstance(text, bytes) else text for text in texts]
        return dict(zip(wanted, texts)), unavailable


def jaccard_text(value: float) -> str:
    """A Jaccard similarity to 3 decimals, or to 6 (rounded down) where 3 would read 1.000 for less
    than 1: two books of 26 million words differing in 20 places read as identical copies."""
    if value < 1.0 and f"{value:.3f}" == "1.000":
        return f"{math.floor(value * 1e6) / 1e6:.6f}"
    return f"{value:.3f}"


def differing(diff: Diff) -> str:
    """How many words differ on each side, e.g. "3 of 504 words differ (4 of 505 in the kept)"."""
    if not (diff.words_a or diff.words_b):  # empty or whitespace-only texts, an exact group
        return "no words on either side"
    if not diff.complete:  # "1 of 26,146,646 words differ" read as the whole texts' count (20 edits)
        return (
            f"only the first words compared: {diff.changed_a:,} differ there ({diff.changed_b:,} in the kept), "
            f"of {diff.words_a:,} words ({diff.words_b:,} in the kept)"
        )
    return f"{diff.changed_a:,} of {diff.words_a:,} words differ ({diff.changed_b:,} of {diff.words_b:,} in the kept)"


def trailing_space(text: str) -> tuple[str, str]:
    """``text`` split before its trailing whitespace, which a changed segment shows unmarked."""
    words = text.rstrip()
    return words, text[len(words) :]


def diff_blocks(diff: Diff) -> list:
    """The diff's segments as display blocks: runs of "same"/"changed" segments (a list, shown as
    one side-by-side row of flowing text) and, between them, words not shown (a str: :func:`elided`)."""
    blocks, run = [], []
    for segment in diff.segments:
        if segment.kind in ("gap", "rest"):
            blocks += [run, elided(segment)] if run else [elided(segment)]
            run = []
        else:
            run.append(segment)
    return blocks + [run] if run else blocks


def elided(segment) -> str:
    """What a gap or the rest of a shortened diff leaves out: "2,000 identical words" (a gap)
    or "132 more words, not shown" (the rest, where words may differ)."""
    if segment.kind == "gap":
        return counted(segment.skipped, "identical word")
    return f"{counted(segment.skipped, 'more word')}, not shown"


def _changed(fs, recorded: dict) -> str:
    """Why the input file no longer holds what the run read ("" if it does)."""
    try:
        info = fs.info(recorded["path"])
    except FileNotFoundError:
        return "missing (moved or deleted since the run)"
    if int(info["size"]) != recorded["size"] or modified(info) != recorded["modified"]:
        return "changed since the run (size or modification time)"
    return ""


__all__ = ["KeptAlone", "Pair", "RunOutput", "diff_blocks", "differing", "elided", "trailing_space"]
