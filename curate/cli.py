"""The ``curate`` command: parse flags, build the config, call the Python API."""

import json
import logging
import sys

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from curate.backend import resolve_backend, use_backend
from curate.cluster import ClusterError, connect
from curate.config import DEFAULT_NUM_PERM, FuzzyConfig, load_config
from curate.params import describe_bands, s_curve_plot
from curate.pipeline import dedup as run_dedup
from curate.report import write_report
from curate.review import Pair, RunOutput, diff_blocks, trailing_space


@click.group()
@click.version_option(package_name="curate")
def main():
    """curate: exact and fuzzy (MinHash + LSH) deduplication of text corpora on Dask."""


@main.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), help="YAML config (see configs/).")
@click.option("--mode", type=click.Choice(["exact", "fuzzy", "both"]), help="Default both: exact, then fuzzy on what is left.")
@click.option("--keep", help="first (default) | longest | max:COLUMN | min:COLUMN")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "auto"]), help="cpu: pandas + numpy (default); gpu: cudf + cupy on a LocalCUDACluster; auto: gpu when a CUDA device is usable.")
@click.option("--overwrite", is_flag=True, help="Replace a previous run's outputs in the output directory.")
@click.option("--resume", is_flag=True, help="Reuse the finished stages of a killed or changed run in the output directory.")
@click.option("--id-field", help="Id field, required in every record (default: id if present, else assigned file:line).")
@click.option("--text-field", help="Text column (default text).")
@click.option("--blocksize", help="Partition size (default 64MB): larger uncompressed JSONL files are split, smaller files packed together.")
@click.option("--files-per-partition", type=int, help="Whole files (compressed JSONL, Parquet) per partition, instead of packing them by size.")
@click.option("--output-format", type=click.Choice(["jsonl", "parquet"]), help="Default: the input's format.")
@click.option("--on-error", type=click.Choice(["fail", "skip"]), help="Bad record: fail (default; names file, line, field) or skip (listed in OUT/rejected/).")
@click.option("--ngram", type=click.Choice(["char", "word"]), help="Shingle unit (default char).")
@click.option("--width", type=int, help="Characters or words per shingle (default 24).")
@click.option("--num-bands", type=int, help="LSH bands (default: chosen for the threshold, 28 at 0.8).")
@click.option("--rows-per-band", type=int, help="Hashes per band (default: chosen, 9 at 0.8).")
@click.option("--num-perm", type=int, help="MinHash values to choose bands x rows within (default 260).")
@click.option("--fp-weight", type=float, help="Weight of false positives when choosing bands (default 0.01).")
@click.option("--fn-weight", type=float, help="Weight of false negatives when choosing bands (default 0.99).")
@click.option("--hash-bits", type=click.Choice(["32", "64"]), help="MinHash variant (default 32).")
@click.option("--seed", type=int, help="MinHash seed (default 42).")
@click.option("--threshold", type=float, help="Jaccard similarity threshold (default 0.8).")
@click.option("--verify/--no-verify", default=None, help="Check candidates' true Jaccard similarity (default on).")
@click.option("--lowercase/--no-lowercase", default=None)
@click.option("--collapse-whitespace/--no-collapse-whitespace", default=None)
@click.option("--strip-punctuation/--no-strip-punctuation", default=None)
@click.option("--nfkc/--no-nfkc", default=None)
@click.option("--n-workers", type=int, help="Embedded LocalCluster workers.")
@click.option("--threads-per-worker", type=int)
@click.option("--memory-limit", help="Per worker, e.g. 4GB (default auto).")
@click.option("--local-directory", help="Spill and shuffle scratch directory.")
@click.option("--scheduler-address", help="Join a running scheduler, e.g. tcp://host:8786.")
@click.option("--scheduler-file", help="Join the scheduler described by this file.")
@click.option("--stall-timeout", type=float, help="Stop when no task finishes and no worker computes for this many seconds (default 300; 0: never).")
@click.option("--cuda-visible-devices", "devices", help="GPU backend: devices for the embedded cluster, e.g. 0,1 (default all).")
@click.option("--rmm-async/--no-rmm-async", default=None, help="GPU: CUDA async memory resource (default on unless --rmm-pool-size).")
@click.option("--rmm-pool-size", help="GPU: per-worker RMM pool, e.g. 40GB or 0.8 (needs --no-rmm-async).")
@click.option("--rmm-release-threshold", help="GPU: with --rmm-async, release pool memory above this size.")
@click.option("--enable-cudf-spill/--disable-cudf-spill", default=None, help="GPU: cuDF spills device buffers to host (default on).")
@click.option("--device-memory-limit", help="GPU: device memory at which a worker spills, e.g. 20GB.")
@click.option("--protocol", type=click.Choice(["tcp", "ucx", "ucxx"]), help="GPU: worker communication (ucx through distributed-ucxx).")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")
@click.option("--report", "with_report", is_flag=True, help="Also write OUT/report.html (as curate report OUT).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def dedup(inputs, out_dir, config_file, overwrite, resume, progress, with_report, verbose, **flags):
    """Remove exact and near-duplicate documents from INPUT files, directories, globs or URLs."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sections = {
        "io": ("id_field", "text_field", "blocksize", "files_per_partition", "output_format", "on_error"),
        "fuzzy": ("ngram", "width", "num_perm", "num_bands", "rows_per_band", "fp_weight", "fn_weight", "hash_bits", "seed",
                  "threshold", "verify", "lowercase", "collapse_whitespace", "strip_punctuation", "nfkc"),
        "cluster": ("n_workers", "threads_per_worker", "memory_limit", "local_directory", "scheduler_address", "scheduler_file",
                    "stall_timeout"),
    }
    overrides = {name: {key: flags.pop(key) for key in keys} for name, keys in sections.items()}
    gpu_keys = ("devices", "rmm_async", "rmm_pool_size", "rmm_release_threshold", "enable_cudf_spill", "device_memory_limit", "protocol")
    overrides["cluster"]["gpu"] = {key: flags.pop(key) for key in gpu_keys}
    if overrides["fuzzy"]["hash_bits"] is not None:
        overrides["fuzzy"]["hash_bits"] = int(overrides["fuzzy"]["hash_bits"])
    overrides.update(flags)
    config = _validated(load_config, config_file, overrides)
    show_progress = sys.stderr.isatty() if progress is None else progress
    try:
        backend = resolve_backend(config.backend)
        config = config.model_copy(update={"backend": backend})  # the summary names what ran ("auto" resolved)
        with use_backend(backend), connect(config.cluster, backend):
            summary = run_dedup(list(inputs), out_dir, config, show_progress=show_progress, overwrite=overwrite, resume=resume)
    except (FileNotFoundError, FileExistsError, PermissionError, ValueError, ClusterError) as err:
        raise click.ClickException(str(err)) from None
    print_summary(summary, out_dir)
    if with_report:
        click.echo(f"report: {write_report(out_dir)}")


@main.command()
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--groups", default=20, show_default=True, type=click.IntRange(min=0), help="Largest groups to show.")
@click.option("--sample", default=20, show_default=True, type=click.IntRange(min=0), help="Removed documents to show, drawn at random.")
@click.option("--seed", default=0, show_default=True, help="Seed of that draw.")
@click.option("--force", is_flag=True, help="Replace report.html even when input files are missing or changed (their texts are then not shown).")
def report(out_dir, groups, sample, seed, force):
    """Write OUT_DIR/report.html: counts, stages, plots and removed documents beside their representatives.

    Texts are read from the run's input files (only those shown); a file moved or changed since
    the run is named in a warning and on the page instead.
    """
    try:
        run = RunOutput(out_dir)
        _warn_inputs(run)
        if run.input_problems and (run.out_dir / "report.html").exists() and not force:
            raise click.ClickException(f"{len(run.input_problems)} input file(s) cannot be read as the run read them, so "
                                       f"{run.out_dir / 'report.html'} is kept; pass --force to replace it with one without their texts")
        click.echo(write_report(run, groups=groups, sample=sample, seed=seed))
    except (FileNotFoundError, ValueError) as err:
        raise click.ClickException(str(err)) from None


def _warn_inputs(run: RunOutput) -> None:
    for path, why in run.input_problems.items():
        click.echo(f"warning: {path}: {why}; its texts are not shown", err=True)


@main.command()
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--group", help="Show what was removed in favour of this kept id (or from the group of that name).")
@click.option("--id", "doc_id", help="Show this removed document beside its representative (or a representative's group).")
@click.option("--sample", type=click.IntRange(min=0), help="Show this many removed documents drawn at random (default 3; with --group/--id: at most this many).")
@click.option("--seed", default=0, show_default=True, help="Seed of the random draw.")
@click.option("--width", type=int, help="Terminal width (default: the terminal's).")
def inspect(out_dir, group, doc_id, sample, seed, width):
    """Removed documents of the run in OUT_DIR beside their representatives, differing words marked."""
    if group is not None and doc_id is not None:
        raise click.UsageError("give --group or --id, not both")
    try:
        run = RunOutput(out_dir)
        if group is not None:
            pairs = run.group(group, sample)
        elif doc_id is not None:
            pairs = run.document(doc_id, sample)
        else:
            pairs = run.sample(3 if sample is None else sample, seed)
    except (FileNotFoundError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    except KeyError as err:
        raise click.ClickException(err.args[0]) from None
    _warn_inputs(run)
    console = Console(width=width)
    counts = run.summary["counts"]
    console.print(f"{out_dir}: {counts['input']['documents']:,} documents in, {counts['output']['removed']:,} removed, "
                  f"{counts['output']['kept']:,} kept; showing {len(pairs)}")
    for pair in pairs:
        print_pair(console, pair)


def print_pair(console: Console, pair: Pair) -> None:
    """A removed document beside its representative: common text plain, differing words in colour
    (or, without colour, marked ``[-removed's-]`` and ``{+kept's+}`` as in ``git diff --word-diff``)."""
    title = f"[bold]{pair.kind}[/]: " + pair.headline(lambda doc: f"[bold]{escape(str(doc))}[/]")
    if pair.diff is None:
        console.print(title)
        console.print(f"  text unavailable: {escape(pair.unavailable)}")
        return
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column(f"removed: {escape(str(pair.removed))}", ratio=1, overflow="fold")
    table.add_column(f"kept: {escape(str(pair.representative))}", ratio=1, overflow="fold")
    width = max(8, (console.width - 7) // 2)  # of each column: the borders and padding take 7
    for block in diff_blocks(pair.diff):
        if isinstance(block, int):
            gap = Text(f"… {block:,} identical words …", style="dim italic")
            table.add_row(gap, gap)
            continue
        left, right = Text(), Text()
        for segment in block:
            if segment.kind == "same":
                if (left or right) and _drifted(console, left, right, segment.a, width):
                    table.add_row(left, right)  # a row is as tall as its taller side: they meet again below
                    left, right = Text(), Text()
                left.append(segment.a)
                right.append(segment.b)
            else:  # the whitespace after the words is not part of the change
                (a, a_space), (b, b_space) = trailing_space(segment.a), trailing_space(segment.b)
                if console.color_system is None:  # piped or redirected: mark the words themselves
                    left.append(f"[-{a}-]{a_space}" if a else a_space)
                    right.append(f"{{+{b}+}}{b_space}" if b else b_space)
                else:
                    left.append(a, style="bold red strike").append(a_space)
                    right.append(b, style="bold green").append(b_space)
        table.add_row(left, right)
    console.print(table)


def _drifted(console: Console, left: Text, right: Text, common: str, width: int) -> bool:
    """Whether common text that follows ``left`` / ``right`` would start on different lines of
    the two columns, or wrap differently from different columns: then it starts a new row."""
    a, b = left.wrap(console, width), right.wrap(console, width)
    if len(a) != len(b):
        return True
    ends = a[-1].cell_len, b[-1].cell_len
    return ends[0] != ends[1] and max(ends) + len(common.rstrip()) > width


def _validated(build, *args, **kwargs):
    """``build(...)``, with a validation error turned into a usage error naming the fields."""
    try:
        return build(*args, **kwargs)
    except ValidationError as err:
        problems = "; ".join(
            ": ".join(filter(None, [".".join(map(str, e["loc"])), e["msg"].removeprefix("Value error, ")])) for e in err.errors()
        )
        raise click.UsageError(f"invalid configuration: {problems}") from None


def _bands_by_rows(ctx, param, values):
    """Parse ``BxR`` (e.g. ``20x13``) into ``(bands, rows)``."""
    pairs = []
    for value in values:
        b, _, r = value.lower().partition("x")
        if not (b.isdigit() and r.isdigit() and int(b) > 0 and int(r) > 0):
            raise click.BadParameter(f"{value!r} is not BANDSxROWS with positive integers (e.g. 20x13)")
        pairs.append((int(b), int(r)))
    return pairs


@main.command()
@click.option("--threshold", type=float, required=True, help="Jaccard similarity that makes two documents duplicates.")
@click.option("--num-perm", type=int, help=f"MinHash values available (default {DEFAULT_NUM_PERM}).")
@click.option("--fp-weight", type=float, help="Weight of the false-positive area (default 0.01).")
@click.option("--fn-weight", type=float, help="Weight of the false-negative area (default 0.99).")
@click.option("--compare", multiple=True, callback=_bands_by_rows, metavar="BxR", help="Also show this choice, e.g. 17x15 (repeatable).")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write the S-curve to this PNG file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of tables.")
def params(threshold, num_perm, fp_weight, fn_weight, compare, plot, as_json):
    """Bands x rows that minimise the weighted false-positive + false-negative area (as datasketch).

    These are the bands and rows `curate dedup` uses for the same --threshold, --num-perm,
    --fp-weight and --fn-weight when --num-bands and --rows-per-band are not given.
    """
    given = {"threshold": threshold, "num_perm": num_perm, "fp_weight": fp_weight, "fn_weight": fn_weight}
    config = _validated(FuzzyConfig, **{k: v for k, v in given.items() if v is not None})
    request = {
        "threshold": threshold,
        "num_perm": num_perm or DEFAULT_NUM_PERM,
        "fp_weight": config.fp_weight,
        "fn_weight": config.fn_weight,
    }
    choices = [describe_bands(threshold, config.num_bands, config.rows_per_band)]
    choices += [describe_bands(threshold, b, r) for b, r in compare]
    if plot:
        s_curve_plot(plot, config.num_bands, config.rows_per_band, threshold, compare=compare)
    if as_json:
        click.echo(json.dumps({**request, **choices[0], "compare": choices[1:]}, indent=2))
    else:
        print_params(request, choices)


def print_params(request: dict, choices: list[dict]) -> None:
    """Each choice's figures, then its candidate probability at a range of similarities."""
    console = Console()
    console.print(
        f"threshold {request['threshold']}, {request['num_perm']} hashes available, "
        f"weights FP {request['fp_weight']} / FN {request['fn_weight']}"
    )
    figures = Table(title="bands and rows")
    figures.add_column("")
    for k in range(len(choices)):
        figures.add_column("chosen" if k == 0 else "compare", justify="right")
    rows = [
        ("bands x rows", lambda c: f"{c['num_bands']} x {c['rows_per_band']}"),
        ("hashes used", lambda c: f"{c['hashes']}"),
        ("false-positive area", lambda c: f"{c['false_positive_area']:.4f}"),
        ("false-negative area", lambda c: f"{c['false_negative_area']:.4f}"),
        ("similarity at P = 0.5", lambda c: f"{c['similarity_at_half']:.3f}"),
        ("(1/b)^(1/r)", lambda c: f"{c['approximate_threshold']:.3f}"),
    ]
    for name, cell in rows:
        figures.add_row(name, *(cell(c) for c in choices))
    curve = Table(title="P(candidate) at similarity s")
    curve.add_column("s", justify="right")
    for c in choices:
        curve.add_column(f"{c['num_bands']} x {c['rows_per_band']}", justify="right")
    for k, point in enumerate(choices[0]["candidate_probability"]):
        # small probabilities in scientific notation: at low similarity they set the candidate volume
        cells = (c["candidate_probability"][k]["probability"] for c in choices)
        curve.add_row(f"{point['similarity']:.2f}", *(f"{p:.4f}" if p == 0 or p >= 1e-3 else f"{p:.1e}" for p in cells))
    console.print(figures)
    console.print(curve)


def print_summary(summary: dict, out_dir: str) -> None:
    """One screen: documents in, removed per kind, kept, time and memory."""
    counts, seconds = summary["counts"], summary["seconds"]
    table = Table(title=f"curate dedup -> {out_dir}", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("documents in", f"{counts['input']['documents']:,}")
    table.add_row("  empty", f"{counts['input']['empty']:,}")
    if "exact" in counts:
        table.add_row("exact duplicates removed", f"{counts['exact']['removed']:,} ({counts['exact']['groups']:,} groups)")
    if "fuzzy" in counts:
        f = counts["fuzzy"]
        members = f" + {f['member_pairs']:,} member pairs" if "member_pairs" in f else ""
        table.add_row("fuzzy candidates / verified", f"{f['candidate_edges']:,}{members} / {f['verified_edges']:,} edges")
        table.add_row("fuzzy duplicates removed", f"{f['removed']:,} ({f['groups']:,} groups)")
    table.add_row("documents kept", f"{counts['output']['kept']:,}")
    if counts["output"].get("rejected"):
        table.add_row("records rejected (OUT/rejected/)", f"{counts['output']['rejected']:,}")
    if summary["reused_stages"]:
        table.add_row("stages reused", ", ".join(summary["reused_stages"]))
    for stage, secs in seconds.items():
        table.add_row(f"time {stage}", f"{secs:.1f} s")
    table.add_row("peak RSS (all processes)", f"{summary['peak_rss_bytes']['total'] / 1e9:.2f} GB")
    if summary["spilled_bytes"]:
        table.add_row("spilled to disk", f"{summary['spilled_bytes'] / 1e9:.2f} GB")
    Console().print(table)
