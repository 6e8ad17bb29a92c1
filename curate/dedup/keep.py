"""Keep policy: which document of a duplicate group is kept (the representative)."""

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from curate.backend import byte_lengths, is_missing
from curate.config import check_keep, parse_keep
from curate.schema import DOC, LENGTH

REFERENCE = "_after_reference"  # KeepPolicy.sort's own column: not a reference document


@dataclass(frozen=True)
class KeepPolicy:
    """Orders a group's documents best first; the first is kept.

    Parameters
    ----------
    rule : {"first", "longest", "max", "min"}
        ``first``: earliest in input order. ``longest``: most UTF-8 bytes of text. ``max`` /
        ``min``: largest / smallest value of ``column`` (missing values, null or NaN, rank last).
        Ties always fall back to input order, so the choice is deterministic.
    column : str, optional
        Required for ``max`` / ``min``.
    reference : int, default=0
        Documents whose ``_doc`` key is below this are the reference (``curate dedup
        --reference``: a corpus already published, read before the inputs): they rank before
        every other document of their group, whatever the rule, and are never removed (two of
        them that are duplicates both stay). 0: none.

    Raises
    ------
    ValueError
        On an unknown rule, or ``max``/``min`` without a column.
    """

    rule: str = "first"
    column: str | None = None
    reference: int = 0

    def __post_init__(self):
        check_keep(self.rule, self.column)

    @classmethod
    def parse(cls, spec: "str | KeepPolicy") -> "KeepPolicy":
        """From ``"first"``, ``"longest"``, ``"max:COLUMN"`` or ``"min:COLUMN"`` (a policy as it is).

        Raises
        ------
        ValueError
            On a bad spec.
        TypeError
            If ``spec`` is neither a string nor a policy.
        """
        if isinstance(spec, KeepPolicy):
            return spec
        if not isinstance(spec, str):
            raise TypeError(f"keep must be a KeepPolicy or a string such as 'longest' or 'max:date', got {spec!r}")
        return cls(*parse_keep(spec))

    def __str__(self) -> str:
        return f"{self.rule}:{self.column}" if self.column else self.rule

    def stage_params(self) -> dict:
        """The policy as a stage's parameters (:func:`curate.checkpoints.stage_key`)."""
        return {"keep": str(self), **({"reference": self.reference} if self.reference else {})}

    def fixed(self, doc) -> np.ndarray | None:
        """Which of the ``_doc`` keys ``doc`` (int64, host) are the reference's (bool, numpy); None without one."""
        return np.asarray(doc, dtype=np.int64) < self.reference if self.reference else None

    def columns(self) -> list[str]:
        """Input columns the policy reads besides ``_doc`` and the text."""
        return [self.column] if self.column else []

    def measure(self, part, text_field: str):
        """``part`` with what :meth:`sort` needs from the text, computed where the text lies.

        For ``longest``: a ``_length`` column (int64, UTF-8 bytes of ``text_field``), so that
        the text itself need not travel to where groups are sorted. Other rules: ``part``.
        """
        if self.rule != "longest":
            return part
        return part.assign(**{LENGTH: byte_lengths(part[text_field])})

    def sort(self, part: pd.DataFrame, by: list[str]) -> pd.DataFrame:
        """Sort a partition by ``by`` (group keys), then best first within each group.

        ``longest`` sorts by the ``_length`` column of :meth:`measure`.
        """
        keys, ascending = list(by), [True] * len(by)
        if self.reference:  # the reference's documents first
            part = part.assign(**{REFERENCE: part[DOC].to_numpy() >= self.reference})
            keys.append(REFERENCE)
            ascending.append(True)
        if self.rule == "longest":
            keys.append(LENGTH)
            ascending.append(False)
        elif self.column:
            _check_orders(part[self.column], self)
            keys.append(self.column)
            ascending.append(self.rule == "min")
        ordered = part.sort_values(
            keys + [DOC], ascending=ascending + [True], na_position="last", kind="stable", key=self._nan_missing
        )
        return ordered.drop(columns=REFERENCE) if self.reference else ordered

    def _nan_missing(self, values: pd.Series) -> pd.Series:
        # A float NaN ranks last, as a null does: an Arrow float column (the CPU read) sorts NaN
        # above every number and apart from nulls, while the host copy of a cuDF column is numpy
        # float64, where both are NaN, so a GPU run kept another representative.
        return values.astype("float64") if values.name == self.column and values.dtype.kind == "f" else values


def dictionary_decoded(docs, keep: KeepPolicy):
    """``docs`` (a Dask DataFrame) whose keep column, where it is Arrow dictionary-encoded (a
    Parquet column pandas wrote from a categorical, read by curate), holds the values themselves:
    sorted, such a column orders by its codes, which each file numbers in its own order of first
    appearance, and a stage file cannot be read back with its type. Other columns, and other
    types, as they are."""
    dtype = docs._meta[keep.column].dtype if keep.column else None
    if not (isinstance(dtype, pd.ArrowDtype) and pa.types.is_dictionary(dtype.pyarrow_dtype)):
        return docs
    return docs.assign(**{keep.column: docs[keep.column].astype(pd.ArrowDtype(dtype.pyarrow_dtype.value_type))})


# What pandas infers for an object column whose values order with each other.
_ORDERED = {
    *("empty", "string", "bytes", "integer", "floating", "mixed-integer-float", "decimal", "boolean"),
    *("datetime", "date", "time", "timedelta"),
}  # pandas' infer_dtype kinds whose values order (bytes byte by byte, as Arrow's binary)


def _check_orders(column: pd.Series, keep: KeepPolicy) -> None:
    # An API frame's object column may hold anything (arrow and numpy columns are checked at the call).
    if column.dtype == object and pd.api.types.infer_dtype(column, skipna=True) not in _ORDERED:
        # A list reaches here as a numpy array where a P2P shuffle's Arrow round trip made it one.
        kinds = sorted({"list" if isinstance(v, np.ndarray) else type(v).__name__ for v in column if not is_missing(v)})
        raise ValueError(
            f"keep={str(keep)!r}: column {keep.column!r} holds {', '.join(kinds)} values, which do not order"
        )
