"""Typed, validated configuration: defaults, then a YAML file, then CLI flags.

The shipped YAML files are package data (``curate/configs/*.yaml``, see :func:`shipped_configs`),
so ``--config NAME`` and ``curate config show NAME`` work from a pip install.
"""

import difflib
import re
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from dask.utils import parse_bytes
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curate.params import DEFAULT_FN_WEIGHT, DEFAULT_FP_WEIGHT, candidate_probability, optimal_bands
from curate.schema import WORKING_COLUMNS

DEFAULT_NUM_PERM = 260  # MinHash values when neither num_perm nor the bands are given (NeMo Curator's 20 x 13)
# Lee et al. (2022, "Deduplicating Training Data Makes Language Models Better") used 9,000 (450 x
# 20). Past 10,000 a 64-bit signature (80 KB a document) outweighs most documents, and choosing
# the bands takes seconds (100,000: 95 s, without a word).
MAX_NUM_PERM = 10_000
# libcudf's shingle width is a size_type (int32); the CPU kernel follows it, so both backends take
# the same widths (2**64 passed validation and failed inside numba, naming no setting).
MAX_WIDTH = 2**31 - 1
# Shingle width when none is given: NeMo Curator's character 24-grams; datatrove's, text-dedup's
# and FineWeb's word 5-grams (24 words, the one default of both, made copies with a changed word
# in every 24 share no shingle).
DEFAULT_WIDTH = {"char": 24, "word": 5}
# A smaller partition holds less than a typical document: "--blocksize 64" (bytes, meant MB) made
# one partition a line, and a run of minutes out of one of seconds.
MIN_BLOCKSIZE = parse_bytes("4KB")
KEEP_RULES = ("first", "longest", "max", "min")
# FuzzyConfig's switches that change the text before shingling, in field order.
NORMALISATION = ("lowercase", "collapse_whitespace", "strip_punctuation", "strip_format", "strip_accents", "nfkc")
SCHEDULER_PROTOCOLS = ("tcp", "tls", "ucx", "ws", "wss")  # distributed's transports (ucx: distributed-ucxx)
# Below this a worker cannot run: an idle one holds 287 MB (measured, curate imported) and Dask
# pauses it at 80% of its limit.
MIN_WORKER_MEMORY = 512e6
# What a CPU worker holds at rest (Python, Dask, pandas, pyarrow, curate's kernels): what its
# memory limit leaves over this is its threads' room for their tasks.
WORKER_AT_REST = 300_000_000


def thread_room(memory_limit: int, nthreads: int) -> float:
    """Bytes of a worker's memory limit that each of its ``nthreads`` threads' tasks may use: the
    limit less :data:`WORKER_AT_REST`, shared equally (negative where the limit is below it)."""
    return (memory_limit - WORKER_AT_REST) / max(1, nthreads)


def parse_keep(spec: str) -> tuple[str, str | None]:
    """``(rule, column)`` of a keep policy written ``first``, ``longest``, ``max:COLUMN`` or ``min:COLUMN``.

    Raises
    ------
    ValueError
        As :func:`check_keep`.
    """
    rule, _, column = spec.partition(":")
    check_keep(rule, column or None)
    return rule, column or None


def check_keep(rule: str, column: str | None) -> None:
    """Raise ValueError unless ``rule`` is one of :data:`KEEP_RULES` with a column exactly for max and min."""
    if rule not in KEEP_RULES:
        raise ValueError(f"keep rule must be first, longest, max:COLUMN or min:COLUMN, got {rule!r}")
    if (rule in ("max", "min")) != (column is not None):
        raise ValueError(f"keep rule {rule!r} {'needs' if column is None else 'takes no'} column")


class _Section(BaseModel):
    # inf and nan are no setting's value: an infinite weight chose 0 x 0 bands (no fuzzy dedup)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _shown(default: str | None, **cli) -> dict:
    """``json_schema_extra`` of a field whose default ``curate dedup --help`` writes as ``default``
    (None: writes none) rather than the value itself; ``cli`` holds the option's other
    settings (``flag``, ``choices``, ``metavar``; see :func:`curate.cli_options.config_options`)."""
    return {"cli": {"default": default, **cli}}


class IOConfig(_Section):
    """Where documents come from and how they are split and written.

    ``id_field`` left unset means "``id`` if the input has it, else ids are assigned"; set (even
    to ``id``) it is required in every record. ``on_error``: what a record that cannot be read
    does, ``fail`` (stop, naming file, line and field) or ``skip`` (list it in ``OUT/rejected/``).
    ``blocksize`` is in bytes (an int, or a string with a unit such as ``"64MB"``), at least 4KB (4000 bytes).

    Raises
    ------
    pydantic.ValidationError
        (a ValueError) On an unknown key or a value out of range, naming the field; on a
        ``blocksize`` that is a bool, empty, not a size or under 4KB.
    """

    id_field: str = Field(
        "id",
        min_length=1,
        description="Field holding unique document ids; once given, every record needs it.",
        json_schema_extra=_shown("id if the input has it, else ids <file>:<line> are assigned"),
    )
    text_field: str = Field("text", min_length=1, description="Field holding the document text.")
    # measured: 256MB blocks doubled peak memory on 2 workers. Validated as given, so the default
    # and "64MB" from a file are the same value (bytes) in stage keys and summary.json.
    blocksize: str | int | None = Field(
        "64MB", validate_default=True,
        description="Partition size: larger JSONL files (compressed: decompressed) are split at line ends, smaller files packed "
        "together; smaller partitions (16MB or more) where the input would leave a worker thread without one. Unless "
        "given, at most what the workers' memory limits hold.",
    )  # fmt: skip
    files_per_partition: int | None = Field(
        None,
        ge=1,
        description="Whole files per partition, instead of packing them by --blocksize.",
        json_schema_extra=_shown("packed by size"),
    )
    output_format: Literal["jsonl", "parquet"] | None = Field(
        None, description="Format of OUT/deduplicated/.", json_schema_extra=_shown("the input format")
    )
    # JSONL: the part files' compression; None: the input's, when every input file has the same.
    # Parquet: the codec inside the files; None: snappy (pyarrow's default).
    output_compression: Literal["none", "gzip", "zstd"] | None = Field(
        None,
        description="JSONL output: part.N.jsonl, .jsonl.gz or .jsonl.zst; Parquet output: the codec inside the files.",
        json_schema_extra=_shown("JSONL: the input files' compression when they all share one; Parquet: snappy"),
    )
    # NeMo Curator's identification without its removal: the lists are the result, and a crawl's
    # deduplicated copy (the storage of the input again) is written only when wanted.
    identify_only: bool = Field(
        False,
        description="Write the lists of duplicates (removed.parquet, duplicates.parquet) and summary.json, not the deduplicated copy OUT/deduplicated/ (with --keep-stages, a later --resume without it writes the copy).",
    )
    # The stages read the input again for MinHash and for the candidates' texts; with this, the
    # first read's partitions stay in the workers (Dask's persist) and those passes read memory.
    cache_input: bool | None = Field(
        None,
        description="Keep the documents the stages read in the workers' memory (device memory with --backend gpu, spilled to host memory or disk when short) instead of reading the input again for MinHash and the candidates' texts. Unset: on for a fuzzy run on CPU workers (not resumed) whose memory limits add up to 4x the input's size decompressed (estimated: 6x its compressed files' size) or more.",
        json_schema_extra={"cli": {"default": "auto"}},
    )
    on_error: Literal["fail", "skip"] = Field(
        "fail",
        description="A record that cannot be read: fail (stop, naming file, line and field) or skip (list it in OUT/rejected/ and go on).",
    )

    @model_validator(mode="before")
    @classmethod
    def _null_id_field_is_unset(cls, data):
        # `id_field: null` in YAML (as the other unset keys are written) means unset, not an error.
        if isinstance(data, dict) and "id_field" in data and data["id_field"] is None:
            data = {k: v for k, v in data.items() if k != "id_field"}
        return data

    @field_validator("blocksize", mode="before")
    @classmethod
    def _no_bool(cls, value):
        if isinstance(value, bool) or value == "":  # Dask reads "" (and pydantic true) as 1 byte
            raise ValueError(f"{value!r} is not a size in bytes (e.g. 64MB)")
        return value

    @field_validator("blocksize")
    @classmethod
    def _bytes(cls, value):
        if isinstance(value, str):
            try:
                value = parse_bytes(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a size in bytes (e.g. 64MB)") from None
        if value is not None and value < MIN_BLOCKSIZE:
            raise ValueError(f"{value} bytes is too small a partition: give 4KB or more, with a unit (e.g. 64MB)")
        return value

    @property
    def blocksize_given(self) -> bool:
        """Whether ``blocksize`` was set rather than defaulted (a default one may be lowered to
        what the workers' memory holds: :func:`curate.cluster.memory_blocksize`)."""
        return "blocksize" in self.model_fields_set

    @property
    def id_field_given(self) -> bool:
        """Whether ``id_field`` was set (then every record must have it) rather than defaulted."""
        return "id_field" in self.model_fields_set


class FuzzyConfig(_Section):
    """MinHash + LSH parameters (char 24-grams as NeMo Curator; bands chosen for the threshold).

    ``width`` left out is 24 for ``ngram="char"`` and 5 for ``ngram="word"`` (datatrove's word
    5-grams); after validation it is set.

    ``threshold`` is the Jaccard similarity at or above which two documents are duplicates;
    verification (on by default) drops LSH candidates below it.

    ``num_perm`` is the number of MinHash values the bands may use, as in datasketch
    (default 260); the signature holds ``num_bands * rows_per_band`` of them
    (:attr:`num_hashes`). Give both ``num_bands`` and ``rows_per_band`` to use them (their
    product must not exceed ``num_perm``; left out, ``num_perm`` is that product), or neither
    to have them chosen by :func:`curate.params.optimal_bands` for ``threshold``, ``num_perm``
    and the weights. The default weights (0.01 false positives, 0.99 false negatives:
    verification removes false positives, a missed pair is lost) make that choice 28 x 9 (252
    of the 260 values) at threshold 0.8, which finds 98% of the pairs at exactly 0.8
    (docs/quality.md has the measurements). After validation all three are set, so a dumped
    config reloads unchanged.

    Raises
    ------
    pydantic.ValidationError
        (a ValueError) On an unknown key or a value out of range (inf and nan included), naming the
        field; when only one of ``num_bands`` and ``rows_per_band`` is given, their product exceeds
        ``num_perm`` or ``MAX_NUM_PERM``.

    References
    ----------
    .. [1] A. Broder, "On the resemblance and containment of documents", 1997.
    .. [2] datasketch ``MinHashLSH`` (``datasketch/lsh.py``): ``num_perm`` and the weighted choice of bands.
    """

    ngram: Literal["char", "word"] = Field("char", description="Shingles of characters or of words.")
    width: int | None = Field(
        None,
        ge=1,
        le=MAX_WIDTH,
        description="Characters (or words) per shingle.",
        json_schema_extra=_shown(f"{DEFAULT_WIDTH['char']} characters, {DEFAULT_WIDTH['word']} words"),
    )
    num_perm: int | None = Field(
        None,
        ge=1,
        le=MAX_NUM_PERM,
        description="MinHash values the bands may use: bands x rows is at most this.",
        json_schema_extra=_shown(f"{DEFAULT_NUM_PERM}, or bands x rows when both are given"),
    )
    num_bands: int | None = Field(
        None,
        ge=1,
        description="LSH bands; give --rows-per-band too.",
        json_schema_extra=_shown("chosen for --threshold, 28 at 0.8 (curate params)"),
    )
    rows_per_band: int | None = Field(
        None,
        ge=1,
        description="MinHash values per band; give --num-bands too.",
        json_schema_extra=_shown("chosen for --threshold, 9 at 0.8"),
    )
    # 0.01 / 0.99: misses weigh far more than false positives (why: curate.params).
    fp_weight: float = Field(
        DEFAULT_FP_WEIGHT, ge=0.0, description="Weight of the false-positive area when bands are chosen."
    )
    fn_weight: float = Field(
        DEFAULT_FN_WEIGHT, ge=0.0, description="Weight of the false-negative area when bands are chosen."
    )
    hash_bits: Literal[32, 64] = Field(
        32, description="MinHash variant: 32 (libcudf nvtext::minhash) or 64 (nvtext::minhash64)."
    )
    seed: int = Field(42, ge=0, lt=2**32, description="MinHash seed (of the hash and of the permutations).")
    threshold: float = Field(
        0.8, gt=0.0, le=1.0, description="Jaccard similarity at or above which two documents are near duplicates."
    )
    verify: bool = Field(
        True, description="Compute candidates' true Jaccard similarity and drop those under --threshold."
    )
    lowercase: bool = Field(
        False, description="Lower-case texts before shingling (exact dedup always compares the raw bytes)."
    )
    collapse_whitespace: bool = Field(
        False, description="Replace every run of whitespace by one space, and trim, before shingling."
    )
    strip_punctuation: bool = Field(False, description="Remove Unicode punctuation before shingling.")
    strip_format: bool = Field(
        False,
        description="Remove Unicode format characters (Cf: zero-width spaces and joiners, soft hyphens, byte "
        "order marks, direction marks) before shingling.",
    )
    strip_accents: bool = Field(
        False,
        description="Remove accents before shingling: nonspacing marks (Mn), and a letter's marks from its "
        "canonical decomposition (é to e, ά to α), as datatrove's and scikit-learn's folding.",
    )
    nfkc: bool = Field(False, description="Apply Unicode NFKC normalisation before shingling.")
    local_components_max_edges: int = Field(
        2_000_000,
        ge=0,
        description="Connected components on one process (scipy) up to this many edges, else distributed on Dask.",
    )
    # A bucket of k mutually dissimilar documents has k^2 / 2 member pairs: bounded per bucket
    # (curate.dedup.edges.member_pairs); 100,000 covers a bucket of 447 such documents.
    max_member_pairs: int = Field(
        100_000,
        ge=1,
        description="Most member pairs per LSH bucket whose anchor failed (failed x failed and failed x passed, "
        "before the pairs the anchor or the components rule out); past it, extra anchors.",
    )

    @model_validator(mode="after")
    def _default_width(self):
        # Derived as the bands are below: counted as not given, so that a copy merged with another
        # ngram (the API's config= with ngram=) derives it again.
        if self.width is None:
            self.__dict__["width"] = DEFAULT_WIDTH[self.ngram]
            self.__pydantic_fields_set__.discard("width")
        return self

    @model_validator(mode="after")
    def _choose_bands(self):
        bands, rows = self.num_bands, self.rows_per_band
        if (bands is None) != (rows is None):
            raise ValueError("give both num_bands and rows_per_band, or neither to have them chosen for the threshold")
        if bands is None:
            num_perm = self.num_perm or DEFAULT_NUM_PERM
            bands, rows = optimal_bands(self.threshold, num_perm, self.fp_weight, self.fn_weight)
        else:
            num_perm = self.num_perm or bands * rows
            if bands * rows > num_perm:
                raise ValueError(
                    f"num_bands x rows_per_band = {bands} x {rows} = {bands * rows} MinHash values, more than num_perm {num_perm}; "
                    "raise num_perm or leave it out"
                )
            if num_perm > MAX_NUM_PERM:
                raise ValueError(
                    f"num_bands x rows_per_band = {bands} x {rows} = {num_perm} MinHash values, more than {MAX_NUM_PERM:,}; "
                    "give fewer bands or rows"
                )
        # The model is frozen; resolving its own fields once, here, is the one exception. What
        # was derived counts as not given (YAML's `num_bands: null` included), so that a copy
        # merged with a new threshold (the API's config= with threshold=) derives it again.
        derived = {"num_bands", "rows_per_band"} if self.num_bands is None else set()
        derived |= {"num_perm"} if self.num_perm is None else set()
        self.__dict__.update(num_bands=bands, rows_per_band=rows, num_perm=num_perm)
        self.__pydantic_fields_set__ -= derived
        return self

    def weak_bands(self, form: str = "flag") -> str | None:
        """A warning when bands and rows that were given (a config file's, e.g.
        ``nemo-curator``'s 20 x 13, with another ``--threshold``) find fewer than half of the pairs
        at the threshold (:func:`curate.params.candidate_probability`), else None. ``form`` says
        how the fix is written: ``"flag"`` (``--num-bands 39``, the CLI's) or ``"keyword"``
        (``num_bands=39``, the Python API's)."""
        if not {"num_bands", "rows_per_band"} <= self.model_fields_set:
            return None
        found = candidate_probability(float(self.threshold), self.num_bands, self.rows_per_band)
        if found >= 0.5:
            return None
        # The choice as leaving the bands out makes it: for num_perm if given, else the default,
        # and `curate params` with the same flags shows it.
        num_perm = self.num_perm if "num_perm" in self.model_fields_set else DEFAULT_NUM_PERM
        bands, rows = optimal_bands(self.threshold, num_perm, self.fp_weight, self.fn_weight)
        flags = f"--threshold {self.threshold}" + (f" --num-perm {num_perm}" if num_perm != DEFAULT_NUM_PERM else "")
        flags += "".join(
            f" --{name.replace('_', '-')} {getattr(self, name)}"
            for name, default in (("fp_weight", DEFAULT_FP_WEIGHT), ("fn_weight", DEFAULT_FN_WEIGHT))
            if getattr(self, name) != default
        )
        fix = {
            "flag": f"--num-bands {bands} --rows-per-band {rows}",
            "keyword": f"num_bands={bands}, rows_per_band={rows}",
        }
        probability = f"{found:.0%}" if found >= 0.005 else "under 1%"  # not "0%": 20 x 13 at 0.5 is 0.24%
        return (
            f"num_bands x rows_per_band = {self.num_bands} x {self.rows_per_band} make a pair at Jaccard "
            f"{self.threshold} (the threshold) a candidate with probability {probability}: most near duplicates "
            f"at the threshold are missed; chosen for it they are {bands} x {rows} (`curate params {flags}`): "
            f"give {fix[form]} (where neither is set, as in a config file of your own without them, "
            "curate chooses them so)"
        )

    def changed(self) -> list[str]:
        """The settings given (by a config file, flags or keywords) whose values differ from the
        defaults, in field order."""
        default = FuzzyConfig()
        return [
            k for k in type(self).model_fields if k in self.model_fields_set and getattr(self, k) != getattr(default, k)
        ]

    @property
    def num_hashes(self) -> int:
        """Signature length, ``num_bands * rows_per_band`` (at most ``num_perm``)."""
        return self.num_bands * self.rows_per_band

    @property
    def normalizes(self) -> bool:
        """Whether any text normalisation (:data:`NORMALISATION`) is switched on."""
        return any(getattr(self, name) for name in NORMALISATION)


def is_fraction(value: str) -> bool:
    """``"0.8"`` is a fraction of device memory; ``"20GB"`` or ``"20000000000"`` is bytes (dask-cuda's reading)."""
    try:
        return "." in value and float(value) >= 0
    except ValueError:
        return False


def field_problem(loc: tuple, message: str, section: str = "") -> str:
    """One problem of a pydantic ``ValidationError`` as ``fuzzy.threshold: <what is wrong>``: the
    key as in the YAML file (``section`` prefixed), pydantic's "Value error, " dropped."""
    key = ".".join(map(str, (section, *loc) if section else loc))
    if message == "Extra inputs are not permitted" and loc:
        message = f"not a setting{_instead((section, *loc[:-1]) if section else loc[:-1], str(loc[-1]))}"
    return ": ".join(filter(None, [key, message.removeprefix("Value error, ")]))


def settings_named(given: list[str], configured: list[str], owner: str) -> str:
    """``given`` then ``configured`` (``owner``'s settings, e.g. "the config's") as one subject
    with its verb: ``--threshold and the config's fuzzy.width configure``."""
    parts = [", ".join(given), f"{owner} {', '.join(configured)}" if configured else ""]
    verb = "configures" if len(given) + len(configured) == 1 else "configure"
    return f"{' and '.join(filter(None, parts))} {verb}"


# curate's fuzzy settings under the names of the tools users come from (NeMo Curator 1.x, its
# FuzzyDuplicatesConfig before, datatrove's MinhashConfig): such a name is answered with curate's
# settings (a value where theirs fixes one), where the nearest spelling misled (NeMo Curator's
# char_ngrams read as ngram, the word/char choice; datatrove's n_grams count words).
PEER_NAMES = {
    "char_ngrams": ("NeMo Curator", {"width": None}),
    "minhashes_per_band": ("NeMo Curator", {"rows_per_band": None}),
    "use_64_bit_hash": ("NeMo Curator", {"hash_bits": 64}),
    "jaccard_threshold": ("NeMo Curator", {"threshold": None}),
    "false_positive_check": ("NeMo Curator", {"verify": None}),
    "num_buckets": ("NeMo Curator and datatrove", {"num_bands": None}),
    "hashes_per_bucket": ("NeMo Curator and datatrove", {"rows_per_band": None}),
    "n_grams": ("datatrove", {"width": None, "ngram": "word"}),
}
# The shipped config holding all of a tool's MinHash settings: a user who maps one name at a
# time misses the rest (datatrove's word 5-grams mapped by hand, without its lower-casing,
# punctuation removal and 64-bit hashes, removed 91 of 20 Newsgroups' posts, not 109).
PEER_CONFIGS = {"NeMo Curator": "nemo-curator", "datatrove": "datatrove"}
# A boolean of theirs named above by what true means: what false means (curate's default), which
# an answer gives too ("use_64_bit_hash: false" was answered with hash_bits 64 alone).
PEER_FALSE = {"use_64_bit_hash": {"hash_bits": 32}}


def peer_settings(name: str) -> tuple[str, str, dict] | None:
    """``(key, tool, {curate setting: value or None})`` where ``name`` (a key, keyword or flag:
    ``--n-grams``, whose key is ``n_grams``) is another tool's name for curate's settings
    (:data:`PEER_NAMES`), else None."""
    key = name.lstrip("-").replace("-", "_")
    return (key, *PEER_NAMES[key]) if key in PEER_NAMES else None


def peer_answer(name: str, form: str, where: str = "curate") -> str | None:
    """Where ``name`` (a key, keyword or flag: ``--n-grams``) is another tool's name for curate's
    settings (:data:`PEER_NAMES`), say which, as ``form`` writes them: ``"flag"`` (``--width
    with --ngram word``), ``"key"`` (``fuzzy.width with fuzzy.ngram: word``) or ``"keyword"``
    (``width= with ngram='word'``), and ``where`` (``"curate dedup"``); else None."""
    if (peer := peer_settings(name)) is None:
        return None
    key, tool, settings = peer
    written = {
        "flag": lambda k, v: f"--{k.replace('_', '-')}" + ("" if v is None else f" {v}"),
        "key": lambda k, v: f"fuzzy.{k}" + ("" if v is None else f": {v}"),
        "keyword": lambda k, v: f"{k}=" + ("" if v is None else repr(v)),
    }[form]

    def joined(values: dict) -> str:
        return " with ".join(written(k, v) for k, v in values.items())

    answer = f"{key} in {tool} is {joined(settings)} in {where}"
    if key in PEER_FALSE:
        answer += f" ({joined(PEER_FALSE[key])} for false, the default)"
    if tool not in PEER_CONFIGS:
        return answer
    name = PEER_CONFIGS[tool]
    shipped = {
        "flag": f"curate dedup --config {name}",
        "key": f"the shipped config {name} (curate config show {name})",
        "keyword": f"config=curate.config.load_config({name!r})",
    }[form]
    return f"{answer}; all of {tool}'s MinHash settings: {shipped}"


def _instead(where: tuple, name: str) -> str:
    """Where ``name`` (unknown at ``where``) is a setting, the setting whose flag it names
    (``cuda_visible_devices``: ``cluster.gpu.devices``), curate's name for another tool's
    (``char_ngrams``: ``fuzzy.width``), or the setting it is a typo of."""
    if answer := peer_answer(name, "key"):
        return f"; {answer}"
    sections = {"io": IOConfig, "fuzzy": FuzzyConfig, "cluster": ClusterConfig, "cluster.gpu": GPUConfig}
    for section, model in sections.items():
        for key, field in model.model_fields.items():
            flag = ((field.json_schema_extra or {}).get("cli") or {}).get("flag", "").split("/")[0]
            if flag and flag[2:].replace("-", "_") == name != key:
                return f"; the flag {flag} is {section}.{key} in a config file"
    model = sections.get(".".join(where)) if where else RunConfig
    owners = [section for section, kind in sections.items() if name in kind.model_fields and kind is not model]
    if owners:
        return f"; it belongs under {owners[0]}:"
    close = difflib.get_close_matches(name, list(model.model_fields) if model else [], n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _check_size(value: str | None, field: str) -> None:
    """Raise ValueError unless ``value`` is None, a byte size or a fraction in (0, 1]."""
    if value is None:
        return
    if is_fraction(value):
        if not 0 < float(value) <= 1:
            raise ValueError(f"{field}: a fraction of device memory must be in (0, 1], got {value}")
        return
    try:
        parse_bytes(value)
    except ValueError:
        raise ValueError(
            f"{field}: {value!r} is not a size (e.g. 20GB) or a fraction of device memory (e.g. 0.8)"
        ) from None


# Options that dask-cuda 26.x no longer has, and what to use instead.
_REMOVED_GPU_OPTIONS = {
    "jit_unspill": "JIT-unspill was deprecated in dask-cuda 26.04 and removed in 26.06; use enable_cudf_spill",
    "rmm_managed_memory": "curate does not support managed memory (it cannot be combined with the async allocator); "
    "use rmm_async with enable_cudf_spill",
}


class GPUConfig(_Section):
    """GPU workers of the embedded ``dask_cuda.LocalCUDACluster`` (backend ``gpu``).

    Defaults follow the RAPIDS / dask-cuda best-practice pages for table (cuDF) workloads: the
    CUDA async memory resource (``rmm_async``) and cuDF's own spilling (``enable_cudf_spill``),
    which spills single buffers while a task runs, rather than dask-cuda's whole-task spilling.

    Attributes
    ----------
    devices : str or None
        ``CUDA_VISIBLE_DEVICES`` for the cluster, e.g. ``"0,1"``; one worker per device. None:
        every visible GPU.
    rmm_async : bool or None
        RMM's ``CudaAsyncMemoryResource``. None (default): on, unless ``rmm_pool_size`` is given
        (dask-cuda refuses a pool together with the async allocator).
    rmm_pool_size : str or None
        Per-worker RMM pool (bytes or a fraction of device memory), in place of the async
        allocator; an explicit ``rmm_async: true`` with a pool is an error.
    rmm_release_threshold : str or None
        With ``rmm_async``, memory above this is returned to the device at synchronisation.
    enable_cudf_spill : bool, default=True
        cuDF spilling of device buffers to host memory.
    device_memory_limit : str or None
        Device memory at which a worker spills to host. With ``enable_cudf_spill`` it must be
        bytes and also becomes cuDF's ``spill_device_limit`` (dask-cuda's own spilling does not
        see cuDF buffers when cuDF spills). None: dask-cuda's default.
    protocol : {"tcp", "ucx"}
        Worker communication; ``ucx`` goes through distributed-ucxx (``"ucxx"`` is accepted as
        its alias; UCX-Py's ``"ucx-old"`` was removed in RAPIDS 25.10).

    Raises
    ------
    pydantic.ValidationError
        (a ValueError) On an unknown key, a removed option or ``protocol: ucx-old`` (saying what
        replaced it), a size that is neither bytes nor a fraction in (0, 1], ``rmm_pool_size`` with ``rmm_async``,
        ``rmm_release_threshold`` without the async allocator, a fractional ``device_memory_limit``
        with ``enable_cudf_spill``, or ``devices`` that is not a ``CUDA_VISIBLE_DEVICES`` list.
    """

    devices: str | None = Field(
        None,
        description="GPU: devices of the embedded cluster, one worker each, e.g. 0,1.",
        json_schema_extra=_shown("all", flag="--cuda-visible-devices"),
    )
    rmm_async: bool | None = Field(
        None,
        description="GPU: CUDA's async memory resource.",
        json_schema_extra=_shown("on, unless --rmm-pool-size is given"),
    )
    rmm_pool_size: str | None = Field(
        None,
        description="GPU: an RMM pool per worker, e.g. 40GB or 0.8 (of device memory), in place of the async allocator (not with an explicit --rmm-async).",
        json_schema_extra=_shown(None),
    )
    rmm_release_threshold: str | None = Field(
        None,
        description="GPU: with --rmm-async, memory above this size is given back to the device.",
        json_schema_extra=_shown(None),
    )
    enable_cudf_spill: bool = Field(
        True,
        description="GPU: cuDF spills device buffers to host memory.",
        json_schema_extra={"cli": {"flag": "--enable-cudf-spill/--disable-cudf-spill"}},
    )
    device_memory_limit: str | None = Field(
        None,
        description="GPU: device memory at which a worker spills, e.g. 20GB.",
        json_schema_extra=_shown("dask-cuda default"),
    )
    protocol: Literal["tcp", "ucx"] = Field(
        "tcp",
        description="GPU: how workers talk to each other (ucx through distributed-ucxx).",
        json_schema_extra={"cli": {"choices": ["tcp", "ucx", "ucxx"]}},
    )

    @field_validator("rmm_pool_size", "rmm_release_threshold", "device_memory_limit", "devices", mode="before")
    @classmethod
    def _as_text(cls, value):
        # YAML reads 0.8 and 20000000000 as numbers and "0,1" may come as a list.
        if isinstance(value, list):
            return ",".join(map(str, value))
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @model_validator(mode="before")
    @classmethod
    def _translate(cls, data):
        if not isinstance(data, dict):
            return data
        for key, why in _REMOVED_GPU_OPTIONS.items():
            if key in data:
                raise ValueError(f"{key}: {why}")
        if data.get("protocol") == "ucxx":  # the same transport since dask-cuda 25.08
            data = {**data, "protocol": "ucx"}
        elif data.get("protocol") == "ucx-old":
            raise ValueError("protocol: 'ucx-old' (UCX-Py) was removed in RAPIDS 25.10; use 'ucx' (distributed-ucxx)")
        return data

    @model_validator(mode="after")
    def _combinations(self):
        for field in ("rmm_pool_size", "rmm_release_threshold", "device_memory_limit"):
            _check_size(getattr(self, field), field)
        if self.rmm_pool_size is not None and self.rmm_async:
            raise ValueError(
                "rmm_pool_size: dask-cuda cannot combine an RMM pool with rmm_async; set rmm_async false or drop the pool"
            )
        if self.rmm_release_threshold is not None and not self.use_async:
            raise ValueError("rmm_release_threshold only applies to the async allocator (rmm_async)")
        if self.enable_cudf_spill and self.device_memory_limit is not None and is_fraction(self.device_memory_limit):
            raise ValueError(
                "device_memory_limit: with enable_cudf_spill give bytes (e.g. 20GB); it also sets cuDF's spill_device_limit"
            )
        if self.devices is not None and not all(
            d.strip().isdigit() or d.strip().startswith(("GPU-", "MIG-")) for d in self.devices.split(",")
        ):
            raise ValueError(f"devices: {self.devices!r} is not a CUDA_VISIBLE_DEVICES list such as '0,1'")
        return self

    @property
    def use_async(self) -> bool:
        """Whether the async allocator is used (``rmm_async``, resolved)."""
        return self.rmm_pool_size is None if self.rmm_async is None else self.rmm_async


class ClusterConfig(_Section):
    """The Dask cluster: an embedded LocalCluster (LocalCUDACluster for ``gpu``) unless a scheduler is given.

    ``stall_timeout``: seconds with no task finished and no worker computing after which a run
    stops with an error naming the limits to change (0: wait for ever); see
    :func:`curate.cluster.gather`.

    ``n_workers``, ``threads_per_worker``, ``memory_limit``, ``local_directory``,
    ``dashboard_address`` and the ``gpu`` settings configure the embedded cluster only: with
    ``scheduler_file`` / ``scheduler_address`` they are refused (ValueError), since a joined
    cluster has them set on its ``dask worker`` / ``dask cuda worker`` command lines (see
    docs/multi-node.md).

    Raises
    ------
    pydantic.ValidationError
        (a ValueError) On an unknown key or a value out of range; a ``memory_limit`` that is not
        bytes, ``auto`` or 0, or too small for a worker; a dashboard or scheduler address that is not
        one; both ``scheduler_address`` and ``scheduler_file``; an embedded-cluster setting beside a
        scheduler, as above.
    """

    n_workers: int | None = Field(
        None,
        ge=1,
        description="Worker processes of the embedded cluster.",
        json_schema_extra=_shown("chosen by Dask for the machine (one per GPU)"),
    )
    threads_per_worker: int | None = Field(
        None,
        ge=1,
        description="Threads in each worker process.",
        json_schema_extra=_shown("chosen by Dask for the machine (GPU: the cores shared among the GPUs)"),
    )
    memory_limit: str | None = Field(
        "auto",
        description="Memory of each worker, e.g. 4GB: over it a worker spills to disk, then pauses, then is restarted.",
        json_schema_extra=_shown("auto: the machine memory shared by the workers"),
    )
    local_directory: str | None = Field(
        None,
        description="Folder for the workers' spill and shuffle files.",
        json_schema_extra=_shown("Dask temporary folder"),
    )
    scheduler_address: str | None = Field(
        None,
        description="Join this running scheduler instead of starting a cluster, e.g. tcp://host:8786.",
        json_schema_extra=_shown(None),
    )
    scheduler_file: str | None = Field(
        None,
        description="Join the scheduler described by this file (dask scheduler --scheduler-file) instead of starting a cluster.",
        json_schema_extra=_shown(None),
    )
    dashboard_address: str | None = Field(
        None,
        description="Serve the embedded cluster's Dask dashboard here, e.g. :8787 (needs bokeh).",
        json_schema_extra=_shown("no dashboard"),
    )
    stall_timeout: float = Field(
        300.0,
        ge=0,
        description="Stop when no task finishes and no worker computes for this many seconds; 0 waits for ever.",
    )
    gpu: GPUConfig = GPUConfig()

    @field_validator("memory_limit", mode="before")
    @classmethod
    def _memory(cls, value):
        # Checked here: a typo was Dask's error at cluster start, without the flag, and "0.5"
        # was 0 bytes (workers paused at once: a stall after 300 s).
        if value in (None, "auto", 0, "0"):  # 0: no limit
            return value
        text = str(value)
        try:
            size = parse_bytes(text)
        except ValueError:
            size = 0
        if size < 1e6:  # "" is 1 byte to Dask: workers restarted over and over
            raise ValueError(f"{text!r} is not a size: give bytes (e.g. 4GB), auto, or 0 for no limit")
        if size < MIN_WORKER_MEMORY:  # a network error at 200MB, a stall after 300 s at 300-400MB
            raise ValueError(
                f"{text!r} is too small for a worker: one holds about 300 MB before any data (Python, pandas, "
                "pyarrow, curate) and pauses at 80% of its limit; give 512MB or more (600MB or more to run "
                "the default --blocksize), auto, or 0 for no limit"
            )
        return text

    @field_validator("dashboard_address")
    @classmethod
    def _dashboard(cls, value):
        # ":abc" or "bogus" failed inside the cluster's start, as a traceback.
        if value is not None and not value.rpartition(":")[2].isdigit():
            raise ValueError(f"{value!r} is not an address: give [HOST]:PORT, e.g. :8787")
        return value

    @field_validator("scheduler_address")
    @classmethod
    def _scheduler(cls, value):
        # "foo" was distributed's "missing port number", naming no flag; port 99999 waited 30 s.
        if value is None:
            return value
        scheme, given, rest = value.rpartition("://")
        host, _, port = rest.rpartition(":")
        bracketed = host.startswith("[") and host.endswith("]")  # IPv6
        if not (
            (scheme in SCHEDULER_PROTOCOLS or not given)
            and re.fullmatch(r"[0-9]{1,5}", port)
            and 0 < int(port) < 65536
            and re.fullmatch(r"[^\s/@\[\]:]+" if not bracketed else r"\[[0-9a-fA-F:.%\w]+\]", host)
        ):
            raise ValueError(
                f"{value!r} is not an address: give [PROTOCOL://]HOST:PORT (PROTOCOL one of "
                f"{', '.join(SCHEDULER_PROTOCOLS)}; an IPv6 HOST in brackets), the `Scheduler at:` line of its log"
            )
        return value

    @model_validator(mode="after")
    def _one_scheduler(self):
        if self.scheduler_address and self.scheduler_file:
            raise ValueError("give scheduler_address or scheduler_file, not both")
        if not (self.scheduler_address or self.scheduler_file):
            return self
        # Set for a joined cluster, these would be ignored without a word: each is named with
        # where such a cluster takes it (distributed's flags are named otherwise).
        embedded = {
            "n_workers": "`dask worker --nworkers` (`dask cuda worker` starts one per GPU)",
            "threads_per_worker": "`dask worker --nthreads` / `dask cuda worker --nthreads`",
            "memory_limit": "`dask worker --memory-limit` / `dask cuda worker --memory-limit`",
            "local_directory": "`dask worker --local-directory` / `dask cuda worker --local-directory`",
            "dashboard_address": "`dask scheduler --dashboard-address`",
        }
        # Every one set is named: naming the first alone took a run per option to find them all.
        changed = [k for k in embedded if getattr(self, k) != ClusterConfig.model_fields[k].default]
        if changed:
            options = "; ".join(f"{k} (--{k.replace('_', '-')})" for k in changed)
            where = "; ".join(embedded[k] for k in changed)
            raise ValueError(
                f"{options} configures the embedded cluster; a joined cluster takes it as {where} (see docs/multi-node.md)"
                if len(changed) == 1
                else f"{options} configure the embedded cluster; a joined cluster takes them as, in turn, {where} "
                "(see docs/multi-node.md)"
            )
        changed = [k for k, v in self.gpu if v != getattr(GPUConfig(), k)]
        if changed:
            options, one = ", ".join("gpu." + k for k in changed), len(changed) == 1
            raise ValueError(
                f"{options} {'configures' if one else 'configure'} the embedded GPU cluster; a joined cluster takes "
                f"{'it' if one else 'them'} on its `dask cuda worker` command line (see docs/multi-node.md)"
            )
        return self


class RunConfig(_Section):
    """Everything one ``curate dedup`` run needs: ``mode``, ``keep``, ``backend`` and the ``io``,
    ``fuzzy`` and ``cluster`` sections.

    Raises
    ------
    pydantic.ValidationError
        (a ValueError) On an unknown key or an invalid value in any section, naming it; a ``keep``
        rule that :func:`check_keep` refuses; an id, text or keep column named as one of curate's
        working columns; ``keep`` ordering by the text field.
    """

    mode: Literal["exact", "fuzzy", "both"] = Field(
        "both", description="exact, fuzzy, or both: exact dedup, then fuzzy dedup of what it kept."
    )
    keep: str = Field(
        "first",
        description="Which document of a group is kept: first (in input order), longest (UTF-8 bytes), max:COLUMN or min:COLUMN.",
        json_schema_extra={"cli": {"metavar": "RULE"}},
    )
    backend: Literal["cpu", "gpu", "auto"] = Field(
        "cpu",
        description="cpu: pandas + numpy; gpu: cudf + cupy on a LocalCUDACluster; auto: gpu when a CUDA device is usable.",
    )
    io: IOConfig = IOConfig()
    fuzzy: FuzzyConfig = Field(default_factory=FuzzyConfig)  # built when needed: choosing its bands imports scipy
    cluster: ClusterConfig = ClusterConfig()

    @field_validator("keep")
    @classmethod
    def _valid_keep(cls, value: str) -> str:
        parse_keep(value)
        return value

    @model_validator(mode="after")
    def _fields_are_not_working_columns(self):
        # The stages add these beside the id, text and keep columns: one so named was overwritten
        # (removed.parquet gave digests for ids) or lost in a shuffle.
        io = self.io
        for setting, value, column in [
            ("id_field", io.id_field, io.id_field),
            ("text_field", io.text_field, io.text_field),
            ("keep", self.keep, parse_keep(self.keep)[1]),
        ]:
            if column in WORKING_COLUMNS:
                raise ValueError(
                    f"{setting}={value!r}: curate adds a column {column!r} while it works "
                    f"({', '.join(WORKING_COLUMNS)}); rename the input's column"
                )
        return self

    @model_validator(mode="after")
    def _keep_column_is_not_the_text(self):
        if parse_keep(self.keep)[1] == self.io.text_field:
            raise ValueError(
                f"keep={self.keep!r} ranks documents by their text field; "
                "keep=longest ranks them by its length, or name another column"
            )
        return self


def load_config(path: str | Path | None = None, overrides: dict | None = None) -> RunConfig:
    """Defaults, updated by a YAML file, updated by ``overrides`` (nested dict, None values ignored).

    Parameters
    ----------
    path : str or pathlib.Path, optional
        A YAML file, or the name of a shipped one (see :func:`config_file`).
    overrides : dict, optional

    Raises
    ------
    FileNotFoundError
        If ``path`` is neither a file nor a shipped config's name.
    ValueError
        If the file is not UTF-8 YAML holding a mapping.
    pydantic.ValidationError
        If a value is invalid; the message names the field.
    """
    return RunConfig.model_validate(config_data(path, overrides))


def config_data(path: str | Path | None = None, overrides: dict | None = None) -> dict:
    """The YAML file's keys updated by ``overrides``, not yet validated (see :func:`load_config`).

    Raises ValueError naming ``path`` (and the line) where the file is not UTF-8, not YAML or
    not a mapping; :func:`config_file`'s error where no such file or shipped config exists."""
    data: dict = {}
    if path is not None:
        file = config_file(path)
        try:
            with open(file, encoding="utf-8") as stream:  # YAML's messages then name the file, not "<unicode string>"
                data = yaml.safe_load(stream) or {}
        except yaml.YAMLError as err:
            raise ValueError(f"{path}: not valid YAML ({' '.join(str(err).split())})") from None
        except UnicodeDecodeError as err:  # was the codec's message alone, naming no file
            line = err.object[: err.start].count(b"\n") + 1
            raise ValueError(f"{path}:{line}: not UTF-8 text ({err.reason}); save the file as UTF-8") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a config file holds a mapping of keys (see `curate config show`)")
    _merge(data, overrides or {})
    return data


def shipped_configs() -> dict[str, Path]:
    """The YAML files shipped with curate (package data), by name (file name without ``.yaml``)."""
    folder = resources.files("curate") / "configs"
    return {
        Path(f.name).stem: Path(str(f))
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".yaml")
    }


def config_file(path: str | Path) -> Path:
    """The YAML file ``path`` names: a file, else the shipped config of that name (``curate config list``).

    Raises
    ------
    FileNotFoundError
        If it is neither, naming the shipped configs.
    """
    path = Path(path)
    if path.is_file():
        return path
    shipped = shipped_configs()
    name = path.name.removesuffix(".yaml")
    if path.parent == Path(".") and name in shipped:
        return shipped[name]
    raise FileNotFoundError(
        f"config {str(path)!r} is neither a file nor a shipped config ({', '.join(shipped)}; see `curate config list`)"
    )


def _merge(data: dict, overrides: dict) -> None:
    """Update nested ``data`` in place with ``overrides``, skipping None values."""
    for key, value in overrides.items():
        if isinstance(value, dict):
            section = data.setdefault(key, {})
            if section is None:
                section = data[key] = {}
            _merge(section, value)
        elif value is not None:
            data[key] = value
