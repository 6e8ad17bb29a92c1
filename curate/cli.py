"""The ``curate`` command: parse flags, build the config, call the Python API."""

import logging
import sys

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from curate.backend import resolve_backend, use_backend
from curate.cluster import connect
from curate.config import load_config
from curate.pipeline import dedup as run_dedup


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
@click.option("--id-field", help="Id column (default id; assigned from file:line if absent).")
@click.option("--text-field", help="Text column (default text).")
@click.option("--blocksize", help="Partition size for uncompressed JSONL (default 64MB).")
@click.option("--files-per-partition", type=int, help="Whole files (compressed JSONL, Parquet) per partition.")
@click.option("--output-format", type=click.Choice(["jsonl", "parquet"]), help="Default: the input's format.")
@click.option("--ngram", type=click.Choice(["char", "word"]), help="Shingle unit (default char).")
@click.option("--width", type=int, help="Characters or words per shingle (default 24).")
@click.option("--num-bands", type=int, help="LSH bands (default 20).")
@click.option("--rows-per-band", type=int, help="Hashes per band (default 13).")
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
@click.option("--cuda-visible-devices", "devices", help="GPU backend: devices for the embedded cluster, e.g. 0,1 (default all).")
@click.option("--rmm-async/--no-rmm-async", default=None, help="GPU: CUDA async memory resource (default on unless --rmm-pool-size).")
@click.option("--rmm-pool-size", help="GPU: per-worker RMM pool, e.g. 40GB or 0.8 (needs --no-rmm-async).")
@click.option("--rmm-release-threshold", help="GPU: with --rmm-async, release pool memory above this size.")
@click.option("--enable-cudf-spill/--disable-cudf-spill", default=None, help="GPU: cuDF spills device buffers to host (default on).")
@click.option("--device-memory-limit", help="GPU: device memory at which a worker spills, e.g. 20GB.")
@click.option("--protocol", type=click.Choice(["tcp", "ucx", "ucxx"]), help="GPU: worker communication (ucx through distributed-ucxx).")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def dedup(inputs, out_dir, config_file, overwrite, progress, verbose, **flags):
    """Remove exact and near-duplicate documents from INPUT files, directories, globs or URLs."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    sections = {
        "io": ("id_field", "text_field", "blocksize", "files_per_partition", "output_format"),
        "fuzzy": ("ngram", "width", "num_bands", "rows_per_band", "hash_bits", "seed", "threshold", "verify",
                  "lowercase", "collapse_whitespace", "strip_punctuation", "nfkc"),
        "cluster": ("n_workers", "threads_per_worker", "memory_limit", "local_directory", "scheduler_address", "scheduler_file"),
    }
    overrides = {name: {key: flags.pop(key) for key in keys} for name, keys in sections.items()}
    gpu_keys = ("devices", "rmm_async", "rmm_pool_size", "rmm_release_threshold", "enable_cudf_spill", "device_memory_limit", "protocol")
    overrides["cluster"]["gpu"] = {key: flags.pop(key) for key in gpu_keys}
    if overrides["fuzzy"]["hash_bits"] is not None:
        overrides["fuzzy"]["hash_bits"] = int(overrides["fuzzy"]["hash_bits"])
    overrides.update(flags)
    try:
        config = load_config(config_file, overrides)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise click.UsageError(f"invalid configuration: {problems}") from None
    show_progress = sys.stderr.isatty() if progress is None else progress
    try:
        backend = resolve_backend(config.backend)
        config = config.model_copy(update={"backend": backend})  # the summary names what ran ("auto" resolved)
        with use_backend(backend), connect(config.cluster, backend):
            summary = run_dedup(list(inputs), out_dir, config, show_progress=show_progress, overwrite=overwrite)
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    print_summary(summary, out_dir)


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
        table.add_row("fuzzy candidates / verified", f"{f['candidate_edges']:,} / {f['verified_edges']:,} edges")
        table.add_row("fuzzy duplicates removed", f"{f['removed']:,} ({f['groups']:,} groups)")
    table.add_row("documents kept", f"{counts['output']['kept']:,}")
    for stage, secs in seconds.items():
        table.add_row(f"time {stage}", f"{secs:.1f} s")
    table.add_row("peak RSS (all processes)", f"{summary['peak_rss_bytes']['total'] / 1e9:.2f} GB")
    Console().print(table)
