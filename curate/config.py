"""Typed, validated configuration: defaults, then a YAML file (``configs/*.yaml``), then CLI flags."""

from pathlib import Path
from typing import Literal

import yaml
from dask.utils import parse_bytes
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curate.params import optimal_bands

DEFAULT_NUM_PERM = 260  # MinHash values when neither num_perm nor the bands are given (NeMo Curator's 20 x 13)

class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IOConfig(_Section):
    """Where documents come from and how they are split and written."""

    id_field: str = "id"
    text_field: str = "text"
    blocksize: str | int | None = "64MB"  # measured: 256MB blocks doubled peak memory on 2 workers
    files_per_partition: int = Field(1, ge=1)
    output_format: Literal["jsonl", "parquet"] | None = None  # None: same as the input

    @field_validator("blocksize")
    @classmethod
    def _bytes(cls, value):
        if isinstance(value, str):
            try:
                value = parse_bytes(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a size in bytes (e.g. 64MB)") from None
        if value is not None and value <= 0:
            raise ValueError("must be positive")
        return value


class FuzzyConfig(_Section):
    """MinHash + LSH parameters (char 24-grams as NeMo Curator; bands chosen for the threshold).

    ``threshold`` is the Jaccard similarity at or above which two documents are duplicates;
    verification (on by default) drops LSH candidates below it.

    Bands and rows: give both ``num_bands`` and ``rows_per_band`` to use them (``num_perm``,
    if given, must equal their product), or neither to have them chosen by
    :func:`curate.params.optimal_bands` for ``threshold``, ``num_perm`` (default 260) and the
    weights. The default weights (0.01 false positives, 0.99 false negatives: verification
    removes false positives, a missed pair is lost) make that choice 28 x 9 at threshold 0.8,
    which finds 98% of the pairs at exactly 0.8 (docs/quality.md has the measurements).
    After validation all three are set: ``num_perm == num_bands * rows_per_band`` (the
    optimiser may use fewer than ``num_perm`` hashes), so a dumped config reloads unchanged.
    """

    ngram: Literal["char", "word"] = "char"
    width: int = Field(24, ge=1, description="characters or words per shingle")
    num_perm: int | None = Field(None, ge=1, description="MinHash values per document; None: bands x rows, or 260")
    num_bands: int | None = Field(None, ge=1, description="None (with rows_per_band None): chosen for the threshold")
    rows_per_band: int | None = Field(None, ge=1)
    # Verification removes false positives (they cost time), a missed pair is lost: so misses
    # weigh far more than datasketch's equal weights. Measured in docs/quality.md: 0.01 / 0.99
    # (28 x 9 at 0.8) finds all but 0.2% of the true pairs on four corpora at every threshold
    # from 0.5 to 0.9; 0.3 / 0.7 (NeMo Curator's 20 x 13 at 0.8) lost up to 40% at 0.5.
    fp_weight: float = Field(0.01, ge=0.0, description="weight of the false-positive area")
    fn_weight: float = Field(0.99, ge=0.0, description="weight of the false-negative area")
    hash_bits: Literal[32, 64] = 32
    seed: int = Field(42, ge=0, lt=2**32)
    threshold: float = Field(0.8, gt=0.0, le=1.0)
    verify: bool = True
    lowercase: bool = False
    collapse_whitespace: bool = False
    strip_punctuation: bool = False
    nfkc: bool = False
    local_components_max_edges: int = Field(2_000_000, ge=0)

    @model_validator(mode="after")
    def _choose_bands(self):
        bands, rows = self.num_bands, self.rows_per_band
        if (bands is None) != (rows is None):
            raise ValueError("give both num_bands and rows_per_band, or neither to have them chosen for the threshold")
        if bands is None:
            try:
                bands, rows = optimal_bands(self.threshold, self.num_perm or DEFAULT_NUM_PERM, self.fp_weight, self.fn_weight)
            except ValueError as err:
                raise ValueError(f"cannot choose num_bands and rows_per_band ({err}); give both") from None
        elif self.num_perm not in (None, bands * rows):
            raise ValueError(
                f"num_perm {self.num_perm} differs from num_bands x rows_per_band = {bands} x {rows} = {bands * rows}; "
                "give matching values or leave num_perm out"
            )
        # The model is frozen; resolving its own fields once, here, is the one exception.
        self.__dict__.update(num_bands=bands, rows_per_band=rows, num_perm=bands * rows)
        return self

    @property
    def num_hashes(self) -> int:
        """Signature length, ``num_bands * rows_per_band``."""
        return self.num_bands * self.rows_per_band

    @property
    def normalizes(self) -> bool:
        """Whether any text normalisation is switched on."""
        return self.lowercase or self.collapse_whitespace or self.strip_punctuation or self.nfkc


class ClusterConfig(_Section):
    """The Dask cluster: an embedded LocalCluster unless a scheduler is given."""

    n_workers: int | None = Field(None, ge=1)
    threads_per_worker: int | None = Field(None, ge=1)
    memory_limit: str | None = "auto"
    local_directory: str | None = None
    scheduler_address: str | None = None
    scheduler_file: str | None = None

    @model_validator(mode="after")
    def _one_scheduler(self):
        if self.scheduler_address and self.scheduler_file:
            raise ValueError("give scheduler_address or scheduler_file, not both")
        return self


class RunConfig(_Section):
    """Everything one ``curate dedup`` run needs."""

    mode: Literal["exact", "fuzzy", "both"] = "both"
    keep: str = "first"
    backend: Literal["cpu"] = "cpu"
    io: IOConfig = IOConfig()
    fuzzy: FuzzyConfig = FuzzyConfig()
    cluster: ClusterConfig = ClusterConfig()

    @field_validator("keep")
    @classmethod
    def _valid_keep(cls, value: str) -> str:
        from curate.dedup.keep import KeepPolicy  # the stages import this module

        KeepPolicy.parse(value)
        return value


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> RunConfig:
    """Defaults, updated by a YAML file, updated by ``overrides`` (nested dict, None values ignored).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    pydantic.ValidationError
        If a value is invalid; the message names the field.
    """
    data: dict = {}
    if path is not None:
        data = yaml.safe_load(Path(path).read_text()) or {}
    for key, value in (overrides or {}).items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update({k: v for k, v in value.items() if v is not None})
        elif value is not None:
            data[key] = value
    return RunConfig.model_validate(data)
