"""The ``curate`` command: parse flags, build the config, call the Python API.

A user's mistake should cost a second, not a cluster start: ``curate dedup`` validates the
config and checks inputs, fields and the output folder (:mod:`curate.checks`) before it imports
Dask or starts anything, so this module imports only light modules at the top; each command
imports what it needs.
"""

from __future__ import annotations  # the annotations name classes imported inside functions

import contextlib
import errno
import itertools
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource
from pydantic import ValidationError

from curate.checks import STAGES, OutputBusyError, check_folder, check_inputs, check_output, hold_output
from curate.cli_options import SECTIONS, config_options, default_help, field_default, overrides
from curate.config import (
    DEFAULT_NUM_PERM,
    NORMALISATION,
    ClusterConfig,
    FuzzyConfig,
    GPUConfig,
    IOConfig,
    RunConfig,
    config_data,
    field_problem,
    peer_answer,
    peer_settings,
    settings_named,
    shipped_configs,
)
from curate.io.files import FORMATS, counted, first_few, reference_files, storage_client_error
from curate.io.records import BadRecordError

if TYPE_CHECKING:  # imported inside the commands that use them: they cost start-up time
    from curate.review.inspect import RunOutput


class _PeerNamesCommand(click.Command):
    """A command (``curate dedup``, ``curate params``) that answers a flag of NeMo Curator or
    datatrove with curate's flags for it (:func:`curate.config.peer_answer`), where click offered
    the nearest spelling (``--num-perm`` for ``--num-buckets``); flags it lacks are named as
    ``curate dedup``'s."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        _one_path_each(ctx, args)
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as err:
            if (peer := peer_settings(err.option_name)) is None:
                raise
            ours = set(peer[2]) <= {param.name for param in self.params}
            answer = peer_answer(err.option_name, "flag", "curate" if ours else "curate dedup")
            raise click.NoSuchOption(
                err.option_name, f"No such option '{err.option_name}' ({answer}).", ctx=ctx
            ) from None


def _one_path_each(ctx: click.Context, args: list[str]) -> None:
    """Refuse a path right after ``--reference PATH``: click takes it as an INPUT, so
    ``--reference week1 week2`` deduplicated week2 as new data and wrote it again (exit 0, a
    trial that followed the README's own example)."""
    for i, arg in enumerate(args):
        given = 1 if arg.startswith("--reference=") else 2 if arg == "--reference" else 0
        after = args[i + given] if given and i + given < len(args) else None
        if after is not None and not after.startswith("-"):
            named = args[i + 1] if given == 2 else arg.split("=", 1)[1]
            raise click.UsageError(
                f"{after!r} follows --reference {named}: --reference names one path, so it would be read as INPUT. "
                f"Give INPUT before --reference, one --reference for each reference path (--reference {named} "
                f"--reference {after}), and a glob in quotes (the shell gives its matches as several paths)",
                ctx=ctx,
            )


class _Main(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # click's own answer is "Aborted!" and exit status 1
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(128 + signal.SIGINT) from None


@click.group(cls=_Main)
@click.version_option(package_name="curate")
def main():
    """curate: exact and fuzzy (MinHash + LSH) deduplication of text corpora on Dask."""


def console() -> None:
    """The ``curate`` command: :func:`main`, whose exit status a SIGTERM during the process's
    own clean-up keeps (it was 143 for a run whose outputs were complete, a trial's once, right
    after the summary was printed)."""
    tolerant_streams()
    try:
        main()
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        signal.signal(signal.SIGTERM, lambda signum, frame: _exit_now(status))
        raise


def tolerant_streams() -> None:
    """Standard output and error write a character their encoding lacks as an escape (``\\u2603``)
    instead of raising: under ``PYTHONIOENCODING=ascii`` a run whose outputs were all written
    exited 1 as its summary named an output folder ``asc ☃`` (rich, unlike click, does not
    replace such characters)."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):  # a TextIOWrapper; not a test's capture
            stream.reconfigure(errors="backslashreplace")


def _exit_now(status: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@main.command(cls=_PeerNamesCommand)
@click.argument("inputs", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder (created if needed).",
)
@click.option(
    "--reference",
    multiple=True,
    metavar="PATH",
    help="A corpus already deduplicated and published (files, folders, globs or URLs, as INPUT; repeatable): "
    "read first, its documents are kept as representatives, never removed and not written; INPUT's documents "
    "that duplicate one of them, or one another, are removed.",
)
@click.option(
    "--config",
    "config_file",
    metavar="FILE|NAME",
    help="YAML config file, or the name of a shipped one (`curate config list`); flags override it.",
)
@config_options(RunConfig)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a previous run's outputs in the output folder, its finished stages included.",
)
@click.option(
    "--resume", is_flag=True, help="Reuse the finished stages (OUT/_stages) of an interrupted, failed or changed run."
)
@click.option(
    "--keep-stages/--no-keep-stages",
    default=False,
    help=f"Keep OUT/_stages after a successful run, for a later --resume with other parameters; a failed or interrupted run always keeps it. {default_help('off')}",
)
@config_options(IOConfig, ("io",))
@config_options(FuzzyConfig, ("fuzzy",))
@config_options(ClusterConfig, ("cluster",))
@config_options(GPUConfig, ("cluster", "gpu"))
@click.option(
    "--progress/--no-progress",
    default=None,
    help=f"Draw a progress bar per stage. {default_help('on when stderr is a terminal')}",
)
@click.option("--report", "with_report", is_flag=True, help="Also write OUT/report.html (as curate report OUT does).")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Log the cluster (workers, dashboard), each stage's start and end with its size and its largest kinds of task by compute time, and the cluster's own warnings and errors, with tracebacks.",
)
def dedup(
    inputs, out_dir, reference, config_file, overwrite, resume, keep_stages, progress, with_report, verbose, **flags
):
    """Remove exact and near-duplicate documents from INPUT... into OUT.

    INPUT is any mix of files, folders (searched recursively; files of other names are skipped
    with a warning), globs and fsspec URLs (s3://...), all of one format and one file system:
    {formats}. The kept documents go to OUT/deduplicated/ (not with --identify-only), the
    removed ones with their representatives to OUT/removed.parquet (see the README's output
    layout).

    Ctrl-C stops the run and keeps its finished stages: the same command with --resume
    continues from them. Once the outputs are written, it leaves them (exit status 0).
    """
    _configure_logging(verbose)
    data = _validated(config_data, config_file, overrides(flags))
    # The inputs are checked with the io section alone: validating the fuzzy section chooses the
    # bands, which imports scipy (0.6 s), and a wrong path should cost no more than it must.
    io = _validated(IOConfig.model_validate, data.get("io") or {}, section="io")
    show_progress = sys.stderr.isatty() if progress is None else progress
    started = time.time()
    try:
        with _user_errors(verbose, out_dir, data.get("cluster") or {}), _sigterm_as_interrupt():
            # Cheapest first: the output folder, the inputs and their fields, then the whole config.
            every = [*reference, *inputs]  # as the run reads them
            check_output(out_dir, overwrite=overwrite, resume=resume, inputs=tuple(every))
            if reference:
                reference_files(list(reference), list(inputs))
            found = check_inputs(every, io, data.get("keep") or "first")
            for warning in found.warnings:
                click.echo(f"warning: {warning}", err=True)
            if (io.output_format or found.fmt) == "parquet":  # else each record is written as read
                for note in found.converted:
                    click.echo(f"warning: {note}", err=True)
            config = _validated(RunConfig.model_validate, data)
            asked = config.backend
            config = _resolved(config)
            _warn_if_gpu_settings_unused(config, asked)
            _warn_if_fuzzy_settings_unused(config, flags)
            if config.cluster.local_directory:  # else Dask's bare OSError as the cluster starts
                _spill_folder(config.cluster.local_directory)
            with hold_output(out_dir):
                check_output(out_dir, overwrite=overwrite, resume=resume, inputs=tuple(every), files=found.paths)
                summary = _run(
                    list(inputs),
                    out_dir,
                    config,
                    show_progress,
                    overwrite,
                    resume,
                    keep_stages,
                    verbose,
                    list(reference),
                )
    except KeyboardInterrupt as stop:
        summary = _finished_run(Path(out_dir), started, keep_stages)
        if summary is None:
            newline = "\n" if show_progress else ""  # after a progress bar's last line
            click.echo(newline + _interrupted(Path(out_dir), overwrite, _how(stop)), err=True)
            raise click.exceptions.Exit(_exit_status(stop)) from None
    reported = False
    try:
        with _sigterm_as_interrupt():  # else SIGTERM ended the report's writing with no word (exit 143)
            _after_run(summary, out_dir, with_report)
            reported = with_report
    except KeyboardInterrupt as stop:  # the outputs are complete (summary.json is written last)
        missing = with_report and not reported
        report = f"; `curate report {out_dir}` writes report.html" if missing else ""
        click.echo(f"\n{_how(stop)} after the run had finished: {out_dir} holds its outputs{report}", err=True)
        raise click.exceptions.Exit(_exit_status(stop) if missing else 0) from None


def _after_run(summary: dict, out_dir: str, with_report: bool) -> None:
    """The summary table, the warnings on its records, and with ``with_report`` report.html."""
    print_summary(summary, out_dir)
    _warn_about_records(summary["counts"], out_dir)
    if with_report:
        from curate.review.report import write_report

        try:
            click.echo(f"report: {write_report(out_dir)}")
        except OSError as err:  # the run's outputs are whole: say so, with the way to the report
            raise click.ClickException(
                f"{err}; the run's outputs are complete: `curate report {out_dir}` writes it"
            ) from None


dedup.help = dedup.help.replace("{formats}", FORMATS)


def _run(
    inputs: list[str],
    out_dir: str,
    config: RunConfig,
    show_progress: bool,
    overwrite: bool,
    resume: bool,
    keep_stages: bool,
    verbose: bool,
    reference: list[str],
) -> dict:
    """The run itself, once the checks passed: Dask is imported and the cluster started here."""
    from curate.backend import use_backend
    from curate.cluster import connect
    from curate.pipeline import dedup as run_dedup

    _quiet_dask(verbose)
    with use_backend(config.backend), connect(config.cluster, config.backend, quiet=not verbose):
        return run_dedup(
            inputs,
            out_dir,
            config,
            show_progress=show_progress,
            overwrite=overwrite,
            resume=resume,
            keep_stages=keep_stages,
            reference=reference,
        )


def _finished_run(out: Path, since: float, keep_stages: bool) -> dict | None:
    """The summary of the run this command finished, where its Ctrl-C came after the run wrote
    ``summary.json`` (its last output; an older one is a previous run's, which a run with
    --overwrite replaces at its end), else None. What the Ctrl-C cut short after it (removing
    ``_stages``, closing the cluster) does not undo the run: the stages go now."""
    try:
        if (out / "summary.json").stat().st_mtime < since:
            return None
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if not keep_stages:
        from curate.checkpoints import remove_stages

        remove_stages(out / STAGES)
    return summary


def _spill_folder(folder: str) -> None:
    """Create the workers' spill folder (Dask would), or raise naming ``--local-directory``."""
    check_folder(folder, "spill folder", "--local-directory")
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a folder no one may create in, e.g. under /proc
        raise ValueError(
            f"spill folder {folder}: cannot create it ({err.strerror}); choose another --local-directory"
        ) from None


def _resolved(config: RunConfig) -> RunConfig:
    """``config`` with its backend resolved ("auto" to what will run, so the summary names it),
    or ValueError saying what the GPU backend lacks and how to install it."""
    from curate.backend import resolve_backend

    cluster = config.cluster
    if config.backend != "cpu" and cluster.gpu.devices and not (cluster.scheduler_address or cluster.scheduler_file):
        # This process opens a CUDA context too (the graph's cudf metas), on its first visible
        # device: GPU 0 even when the run was given others. CUDA reads the variable once, at
        # its first call (the device check below), so it is set before.
        os.environ["CUDA_VISIBLE_DEVICES"] = cluster.gpu.devices
    return config.model_copy(update={"backend": resolve_backend(config.backend)})


@contextlib.contextmanager
def _user_errors(verbose: bool, out_dir: str, cluster: dict):
    """Errors a user can cause and fix (paths, fields, bad records, the output folder) as one
    ``Error: ...`` line, exit status 1; with ``verbose`` the traceback comes first. A full disk
    is said with the folders a run writes: ``out_dir`` and the spill folder of ``cluster`` (the
    config's section, as given); it, and storage that did not answer, exit with
    :class:`StoppedRun`'s status."""
    try:
        yield
    except (OSError, ValueError, OutputBusyError) as err:
        if verbose:
            click.echo(traceback.format_exc(), err=True, nl=False)
        message = str(err) or type(err).__name__  # rebuilt from a worker, some errors lose their words
        if isinstance(err, BadRecordError):  # read in parallel: unless it is the first part, which one stops varies
            earlier = (
                "" if err.first else "parts of the input are read in parallel, so an earlier record may be bad too; "
            )
            message += f"\n({earlier}--on-error skip lists every bad record in OUT/rejected/ and goes on)"
        stopped = False
        if isinstance(err, OSError):  # Arrow's and fsspec's name no folder
            stopped = bool(advice := _storage_advice(err, out_dir, cluster))
            message += advice
        if isinstance(err, ConnectionError):
            message += _unreachable_advice(out_dir)
            stopped = True
        raise (StoppedRun if stopped else click.ClickException)(message) from None
    except RuntimeError as err:  # (OutputBusyError is one, caught above) a P2P shuffle's "failed during barrier phase"
        from curate.cluster import ClusterError  # (imported by then: a RuntimeError comes from the run)

        if isinstance(err, ClusterError):  # workers died, no progress, ...: one line, as it always was
            raise StoppedRun(str(err)) from None
        cause = _storage_cause(err)
        if cause is None:
            raise
        if verbose:
            click.echo(traceback.format_exc(), err=True, nl=False)
        raise StoppedRun(f"{cause}{_storage_advice(cause, out_dir, cluster)}") from None
    except Exception as err:  # a remote storage client's own error, raised where curate does not name the URL
        if not storage_client_error(err):
            raise
        if verbose:
            click.echo(traceback.format_exc(), err=True, nl=False)
        # Not answering (botocore's EndpointConnectionError, a timeout) is the storage's; a refusal
        # (no credentials, access denied) is the settings'.
        unreachable = any(word in type(err).__name__ for word in ("Connection", "Timeout"))
        raise (StoppedRun if unreachable else click.ClickException)(
            f"{type(err).__name__}: {err}{_unreachable_advice(out_dir)}"
        ) from None


def _unreachable_advice(out_dir: str) -> str:
    """What to do when the inputs' remote storage did not answer, or refused the run's credentials."""
    stages = Path(out_dir) / STAGES
    kept = (
        f"; the stages that finished are kept in {stages}, and the same command with --resume goes on from them"
        if stages.is_dir()
        else ""
    )
    return (
        "\n(the storage of the inputs did not answer, or refused the credentials: check its endpoint "
        f"(AWS_ENDPOINT_URL for S3), the credentials and the network on this machine and every worker's{kept})"
    )


def _storage_advice(err: OSError, out_dir: str, cluster: dict) -> str:
    """What to do about a file the run could not write ("" for another OSError): where, and that
    --resume goes on from the finished stages."""
    kind = _storage_kind(err)
    if kind is None:
        return ""
    what = _STORAGE[kind].format(out=out_dir, spill=_spill_where(cluster))
    if kind == "full":
        what += _disk_sizes(out_dir, _spill_folder_of(cluster))
    return (
        f"\n({what}; the stages that finished are kept in {Path(out_dir) / STAGES}, and the same command with "
        "--resume, not --overwrite, goes on from them)"
    )


# Why a file could not be written, and what frees the run: a full disk or quota, the file size
# limit and a file system turned read-only stop a run alike (a trial's EFBIG and EROFS were a
# bare errno, or a P2P traceback with no Error line).
_STORAGE = {
    "full": "a disk is full: free space in {out} or in {spill}",
    "size": "a file passed the file size limit (ulimit -f) or the file system's largest, in {out} or in {spill}: lift it",
    "read-only": "a file system turned read-only: make {out} or {spill} writable again",
}


def _storage_kind(err: OSError) -> str | None:
    """:data:`_STORAGE`'s key for ``err``, or None (Arrow gives the errno only in its message)."""
    text = str(err).lower()
    if _disk_full(err):
        return "full"
    if err.errno == errno.EFBIG or "[errno 27]" in text:
        return "size"
    if err.errno == errno.EROFS or "[errno 30]" in text:
        return "read-only"
    return None


def _storage_cause(err: BaseException) -> OSError | None:
    """The OSError among ``err``'s causes that :data:`_STORAGE` names, or None. A P2P shuffle
    passes a worker's on only in words: ``Exception("OSError(27, 'File too large')")``."""
    seen = err.__cause__ or err.__context__
    while seen is not None:
        found = seen if isinstance(seen, OSError) else None
        if found is None and (words := re.search(r"OSError\((\d+), '([^']*)'\)", str(seen))):
            found = OSError(int(words[1]), words[2])
        if found is not None and _storage_kind(found) is not None:
            return found
        seen = seen.__cause__ or seen.__context__
    return None


def _spill_where(cluster: dict) -> str:
    """The spill folder a run's workers use, in words: ``--local-directory``, else Dask's default
    (its ``temporary-directory``, else TMPDIR's) on an embedded cluster."""
    if cluster.get("local_directory"):
        return f"the spill folder {cluster['local_directory']} (--local-directory)"
    if cluster.get("scheduler_address") or cluster.get("scheduler_file"):
        return "the workers' spill folders (dask worker --local-directory)"
    return f"the spill folder {_spill_folder_of(cluster)} (TMPDIR; --local-directory chooses another)"


def _spill_folder_of(cluster: dict) -> str | None:
    """The spill folder of an embedded cluster (see :func:`_spill_where`); None for a joined one."""
    if cluster.get("local_directory"):
        return cluster["local_directory"]
    if cluster.get("scheduler_address") or cluster.get("scheduler_file"):
        return None
    import dask.config

    return str(Path(dask.config.get("temporary-directory", None) or tempfile.gettempdir()) / "dask-scratch-space")


def _disk(folder: str | None) -> tuple[int, int, int] | None:
    """``(device, total bytes, free bytes)`` of the disk holding ``folder``, or None where it does
    not exist (here) or cannot be read."""
    try:
        usage = shutil.disk_usage(folder)
        return os.stat(folder).st_dev, usage.total, usage.free
    except (OSError, TypeError):
        return None


def _disk_sizes(out_dir: str, spill: str | None) -> str:
    """The sizes of the disks of ``out_dir`` and the ``spill`` folder, where they exist: which one
    filled was a guess between them (a trial's output folder on a tmpfs of 60 MB). Said as they are
    after the run, which has removed its unfinished files: the smaller disk is the likely one."""
    from dask.utils import format_bytes

    disks = {name: _disk(folder) for name, folder in ((out_dir, out_dir), ("the spill folder", spill))}
    held = {name: f"{format_bytes(d[1])} ({format_bytes(d[2])} free now)" for name, d in disks.items() if d}
    if len(held) == 2 and disks[out_dir][0] == disks["the spill folder"][0]:
        return f"; both are on one disk of {held[out_dir]}"
    return "".join(f"{', ' if k else '; '}{name} is on a disk of {size}" for k, (name, size) in enumerate(held.items()))


def _disk_full(err: OSError) -> bool:
    """Whether ``err`` says a disk or quota is full: Arrow gives the errno only in its message,
    and a P2P shuffle's spill says "add workers or disk" (its class, by name: no distributed import)."""
    return (
        err.errno in (errno.ENOSPC, errno.EDQUOT)
        or "[errno 28]" in str(err).lower()
        or type(err).__name__ == "P2POutOfDiskError"
    )


def _configure_logging(verbose: bool) -> None:
    """curate's own messages: warnings, or with ``verbose`` everything from INFO, timed and
    named. A warning reads ``warning: ...`` either way, as the command's own warnings do (it read
    "WARNING curate.pipeline: ...", and under -v had no mark at all)."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        _Labelled("%(asctime)s %(name)s: %(label)s%(message)s", "%H:%M:%S")
        if verbose
        else _Labelled("%(label)s%(message)s")
    )
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


class _Labelled(logging.Formatter):
    """A format whose ``%(label)s`` is ``"warning: "`` (the level, in lower case) from WARNING up, else empty."""

    def format(self, record: logging.LogRecord) -> str:
        record.label = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        return super().format(record)


def _quiet_dask(verbose: bool) -> None:
    """Dask's own logs in this process: its warnings with ``verbose``, else nothing (what matters
    reaches the client as an exception), nor asyncio's and tornado's notes on the client's tasks
    and callbacks cancelled when a run stops (distributed's ``sync`` cancel callback can fail
    when Ctrl-C lands before its future exists), nor Python warnings (libraries' deprecation notes; the workers' are ignored by
    :class:`curate.cluster.QuietWarnings`). Called once distributed is imported, which sets its
    own levels on import."""
    # distributed's config gives some loggers levels of their own (distributed.client: warning,
    # tornado.application: error): each is set, or its errors (a lost scheduler's, the cancel
    # callback's NameError at a SIGTERM) print tracebacks without -v.
    levels = {"distributed": logging.WARNING if verbose else logging.CRITICAL}
    if not verbose:
        levels |= {"asyncio": logging.CRITICAL, "tornado": logging.CRITICAL}
        warnings.simplefilter("ignore")
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    for name, each in list(logging.root.manager.loggerDict.items()):
        family = name.split(".")[0]
        if family in levels and isinstance(each, logging.Logger) and each.level != logging.NOTSET:
            each.setLevel(levels[family])


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where a Ctrl-C raises KeyboardInterrupt (see :func:`_sigterm_as_interrupt`)."""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """Stop on SIGTERM as on Ctrl-C meanwhile (main thread only): the same message, the finished
    stages kept, the embedded workers stopped, exit status 143 (128 + SIGTERM). SIGTERM is what
    ``kill``, ``timeout``, ``docker stop`` and SLURM at a job's time limit send; Python's default
    ended the process with no word of ``--resume``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        # One stop: later SIGTERMs are ignored while it unwinds. GNU timeout sends one to the
        # command and one to its process group; the second, raised inside the first's clean-up
        # (a lock's restore in threading.Condition.wait), ended runs with "release unlocked lock"
        # and exit status 1.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated

    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _how(stop: KeyboardInterrupt) -> str:
    return "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"


def _exit_status(stop: KeyboardInterrupt) -> int:
    return 128 + (signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT)


def _interrupted(out: Path, overwrite: bool, how: str = "interrupted") -> str:
    """The one line a Ctrl-C (or SIGTERM: ``how``) leaves: which stages finished (kept in
    OUT/_stages) and how to go on."""
    markers = sorted((out / "_stages").glob("*/_marker.json"), key=lambda m: m.stat().st_mtime)
    names = [m.parent.name for m in markers if "." not in m.parent.name]  # not read.tmp, nor a copy (exact.old)
    if not names:  # nothing to resume from (an unfinished stage is replaced by the next run)
        return f"{how}: no stage had finished; run the same command again to start over"
    if len(names) <= 6:
        done = f"finished stages {', '.join(names)} are kept in {out / '_stages'}"
    else:
        done = f"{len(names)} finished stages ({names[0]} ... {names[-1]}) are kept in {out / '_stages'}"
    instead = " instead of --overwrite" if overwrite else ""
    return f"{how}: {done}; run the same command with --resume{instead} to continue"


@main.group()
def config():
    """The shipped YAML configs (package data), for --config NAME or as a start for your own."""


@config.command("list")
def config_list():
    """Name and the first sentence of each shipped config's opening comment."""
    for name, path in shipped_configs().items():
        lines = path.read_text().splitlines()
        comment = " ".join(
            line.lstrip("# ").rstrip() for line in itertools.takewhile(lambda line: line.startswith("#"), lines)
        )
        click.echo(f"{name:<16} {comment.split('. ')[0].rstrip('.')}.")


@config.command("show")
@click.argument("name", default="default")
def config_show(name):
    """Print the shipped config NAME (default: default, every key with its default value)."""
    shipped = shipped_configs()
    if name not in shipped:
        raise click.BadParameter(f"no shipped config {name!r}; there are {', '.join(shipped)}", param_hint="NAME")
    click.echo(shipped[name].read_text(), nl=False)


@main.command()
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--groups", default=20, type=click.IntRange(min=0), help=f"Largest groups to show. {default_help(20)}")
@click.option(
    "--sample",
    default=20,
    type=click.IntRange(min=0),
    help=f"Removed documents to show, drawn at random, near and exact duplicates alike. {default_help(20)}",
)
@click.option("--seed", default=0, help=f"Seed of that draw. {default_help(0)}")
@click.option(
    "--force",
    is_flag=True,
    help="Replace report.html even when input files are missing or changed (their texts are then not shown).",
)
def report(out_dir, groups, sample, seed, force):
    """Write OUT_DIR/report.html: counts, stages, plots and removed documents beside their representatives.

    Texts are read from the run's input files (only those shown); a file moved or changed since
    the run is named in a warning and on the page instead.
    """
    from curate.review.inspect import RunOutput
    from curate.review.report import write_report

    try:
        run = RunOutput(out_dir)
        _warn_inputs(run)
        if run.input_problems and (run.out_dir / "report.html").exists() and not force:
            raise click.ClickException(
                f"{len(run.input_problems)} input file(s) cannot be read as the run read them, so "
                f"{run.out_dir / 'report.html'} is kept; pass --force to replace it with one without their texts"
            )
        click.echo(write_report(run, groups=groups, sample=sample, seed=seed))
    except (OSError, ValueError) as err:
        raise click.ClickException(str(err)) from None


def _warn_inputs(run: RunOutput) -> None:
    for path, why in run.input_problems.items():
        click.echo(f"warning: {path}: {why}; its texts are not shown", err=True)


# Removed documents `inspect --group/--id` shows unless --sample says: all of a group of paragraphs'
# boilerplate (3,210 in a user's trial) filled 25,858 lines.
GROUP_SHOWN = 10


@main.command()
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--group", help="Show what was removed in favour of this kept id (or from the group of that name).")
@click.option(
    "--id", "doc_id", help="Show this removed document beside its representative (or a representative's group)."
)
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    help=f"Show this many removed documents drawn at random, near and exact duplicates alike (with --group/--id: at most this many, the least similar first). {default_help(f'3; with --group/--id {GROUP_SHOWN}')}",
)
@click.option("--seed", default=0, help=f"Seed of the random draw. {default_help(0)}")
@click.option(
    "--width",
    type=click.IntRange(min=40),  # 0 or less printed nothing at all and exited 0
    help=f"Terminal width in columns, at least 40. {default_help('the terminal width')}",
)
def inspect(out_dir, group, doc_id, sample, seed, width):
    """Removed documents of the run in OUT_DIR beside their representatives, differing words marked."""
    from curate.review.inspect import KeptAlone, RunOutput
    from curate.review.terminal import print_pair

    if group is not None and doc_id is not None:
        raise click.UsageError("give --group or --id, not both")
    try:
        run = RunOutput(out_dir)
        if group is not None:
            pairs, total = run.group(group, GROUP_SHOWN if sample is None else sample)
        elif doc_id is not None:
            pairs, total = run.document(doc_id, GROUP_SHOWN if sample is None else sample)
        else:
            pairs = run.sample(3 if sample is None else sample, seed)
            total = len(pairs)
    except (FileNotFoundError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    except KeptAlone as kept:  # an answer, not an error
        click.echo(kept.args[0])
        return
    except KeyError as err:
        raise click.ClickException(err.args[0]) from None
    _warn_inputs(run)
    console = _reader_console(width)
    counts = run.summary["counts"]
    console.print(
        f"{out_dir}: {counts['input']['documents']:,} documents in, {counts['output']['removed']:,} removed, "
        f"{counts['output']['kept']:,} kept"
        + (f", {counts['output']['reference']:,} reference" if "reference" in counts["output"] else "")
        + f"; showing {len(pairs)}"
        + (f" of the {total:,}, the least similar" if total > len(pairs) else "")
        + (" (--sample N shows more)" if total > len(pairs) and sample is None else "")
    )
    for pair in pairs:
        print_pair(console, pair)
    if doc_id is not None and (rejected := run.rejected_as(doc_id)):  # a colliding record went unsaid
        places = first_few([f"{where} ({kind})" for where, kind in rejected], sep=", ")
        # Unwrapped and unmarked: a long path folded mid-word, and a file named "a[1].jsonl" is markup.
        line = f"records with this id were also rejected: {places} (listed in {run.out_dir / 'rejected'})"
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def _reader_console(width: int | None):
    """A rich console that stops printing once its reader is gone (``curate inspect | head``), as a
    success: rich exits 1, so a script's pipeline failed or not depending on the output's size."""
    from rich.console import Console

    class ReaderConsole(Console):
        def on_broken_pipe(self) -> None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is left to flush goes nowhere
            self.quiet = True

    return ReaderConsole(width=width)


class StoppedRun(click.ClickException):
    """A run stopped by its cluster or its storage, not by its input or settings: workers that
    died (out of memory) or were lost, no progress, a cluster that did not start, a full disk, a
    file size limit, a file system turned read-only, storage that did not answer. Exit status 75
    (``EX_TEMPFAIL`` of BSD's sysexits.h: try again later), so that a batch script tells it from
    a bad input (1) without reading the words, and runs the command again with ``--resume`` once
    the cause is mended; every failure was exit status 1 (an operator's trial)."""

    exit_code = 75


class ConfigError(click.ClickException):
    """A bad config value or file: one ``Error: ...`` line naming the key and its flag, exit status 2
    (click's usage errors also print the usage, which says nothing about the value)."""

    exit_code = 2


def _validated(build, *args, section: str = "", **kwargs):
    """``build(...)``, with a bad config (a validation error naming its fields, a config file that
    cannot be read) turned into a :class:`ConfigError`; ``section`` prefixes the fields' names."""
    try:
        return build(*args, **kwargs)
    except ValidationError as err:
        problems = "; ".join(_problem(e["loc"], e["msg"], section) for e in err.errors())
        raise ConfigError(f"invalid configuration: {problems}") from None
    except (OSError, ValueError) as err:  # the config file
        raise ConfigError(str(err)) from None


def _params() -> dict[str, click.Parameter]:
    """The running command's parameters by setting name."""
    return {param.name: param for param in click.get_current_context().command.params}


def _flag_of(key: str, value) -> str | None:
    """The running command's flag that gives setting ``key`` the value ``value``
    (``--disable-cudf-spill`` for False), or None where no flag sets it."""
    param = _params().get(key)
    if param is None:
        return None
    return (param.secondary_opts if value is False and param.secondary_opts else param.opts)[0]


def _flags() -> dict[str, str]:
    """The running command's long flags by setting name (``rows_per_band``: ``--rows-per-band``)."""
    return {name: param.opts[0] for name, param in _params().items() if param.opts[0].startswith("--")}


def _problem(loc: tuple, message: str, section: str) -> str:
    """``fuzzy.threshold: <what is wrong> (--threshold)``: the key as in the YAML file, and the
    flag of the running command that sets it, where there is one (in a rule that names several
    keys, the config file where that gave it and the flag did not)."""
    flags = _flags()
    flag = flags.get(loc[-1]) if loc else None
    if flag is None:  # a rule of a section: the flag of each key it names, once
        named = set()
        context = click.get_current_context()
        config = context.params.get("config_file")
        configured = _keys_in(config_data(config)) if config else set()  # read already: it loads

        def with_flag(match: re.Match) -> str:
            key = match[0]
            named_already = match.string.startswith(f" ({flags.get(key)})", match.end())  # by the rule itself
            if key not in flags or key in named or named_already:
                return key
            named.add(key)
            # `--config nemo-curator --num-perm 128` blamed the bands on flags not given (a user's trial)
            if key in configured and context.get_parameter_source(key) is not ParameterSource.COMMANDLINE:
                return f"{key} (from --config {config}; {flags[key]})"
            return f"{key} ({flags[key]})"

        # a key: a snake_case word, or any word a rule writes as ``key=value`` (keep='max:text')
        message = re.sub(r"\b[a-z]+(?:_[a-z]+)+\b|\b[a-z]+(?==)", with_flag, message)
    return field_problem(loc, message, section) + (f" ({flag})" if flag else "")


def _keys_in(data: dict) -> set[str]:
    """The keys of a config's sections and of the sections within them."""
    return set(data) | {key for value in data.values() if isinstance(value, dict) for key in _keys_in(value)}


def _bands_by_rows(ctx, param, values):
    """Parse ``BxR`` (e.g. ``20x13``) into ``(bands, rows)``."""
    pairs = []
    for value in values:
        b, _, r = value.lower().partition("x")
        if not (b.isdigit() and r.isdigit() and int(b) > 0 and int(r) > 0):
            raise click.BadParameter(f"{value!r} is not BANDSxROWS with positive integers (e.g. 20x13)")
        pairs.append((int(b), int(r)))
    return pairs


@main.command(cls=_PeerNamesCommand)
@click.option(
    "--threshold",
    # as dedup's: over 0, at most 1 (whose choice is one band of every value)
    type=click.FloatRange(0, 1, min_open=True),
    required=True,
    help="Jaccard similarity that makes two documents duplicates.",
)
@click.option("--num-perm", type=int, help=f"MinHash values the bands may use. {default_help(DEFAULT_NUM_PERM)}")
@click.option(
    "--fp-weight",
    type=float,
    help=f"Weight of the false-positive area. {default_help(field_default(FuzzyConfig, 'fp_weight'))}",
)
@click.option(
    "--fn-weight",
    type=float,
    help=f"Weight of the false-negative area. {default_help(field_default(FuzzyConfig, 'fn_weight'))}",
)
@click.option(
    "--compare",
    multiple=True,
    callback=_bands_by_rows,
    metavar="BxR",
    help="Also show this choice, e.g. 17x15 (repeatable).",
)
@click.option("--plot", type=click.Path(dir_okay=False), help="Write the S-curve to this PNG file.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of tables.")
def params(threshold, num_perm, fp_weight, fn_weight, compare, plot, as_json):
    """Bands x rows that minimise the weighted false-positive + false-negative area (as datasketch).

    These are the bands and rows `curate dedup` uses for the same --threshold, --num-perm,
    --fp-weight and --fn-weight when --num-bands and --rows-per-band are not given.
    """
    from curate.params import describe_bands, s_curve_plot

    given = {"threshold": threshold, "num_perm": num_perm, "fp_weight": fp_weight, "fn_weight": fn_weight}
    config = _validated(FuzzyConfig, **{k: v for k, v in given.items() if v is not None})
    request = {
        "threshold": threshold,
        "num_perm": num_perm or DEFAULT_NUM_PERM,
        "fp_weight": config.fp_weight,
        "fn_weight": config.fn_weight,
    }
    compare = list(dict.fromkeys(compare))  # a pair given twice was shown twice
    choices = [describe_bands(threshold, config.num_bands, config.rows_per_band)]
    choices += [describe_bands(threshold, b, r) for b, r in compare]
    if plot:
        try:
            s_curve_plot(plot, config.num_bands, config.rows_per_band, threshold, compare=compare)
        except (OSError, ValueError) as err:  # a missing folder; a name matplotlib has no format for
            why = err.strerror if isinstance(err, OSError) else err
            raise click.BadParameter(f"cannot write {plot}: {why}", param_hint="--plot") from None
    if as_json:
        click.echo(json.dumps({**request, **choices[0], "compare": choices[1:]}, indent=2))
    else:
        print_params(request, choices)


def print_params(request: dict, choices: list[dict]) -> None:
    """Each choice's figures, then its candidate probability at a range of similarities."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"threshold {request['threshold']}, num_perm {request['num_perm']}, "
        f"weights FP {request['fp_weight']} / FN {request['fn_weight']}"
    )
    figures = Table(title="bands and rows")
    figures.add_column("")
    for k in range(len(choices)):
        figures.add_column("chosen" if k == 0 else "compare", justify="right")
    rows = [
        ("bands x rows", lambda c: f"{c['num_bands']} x {c['rows_per_band']}"),
        # more than --num-perm holds: curate dedup refuses such bands (a user's trial read them as usable)
        (
            "num_perm used",
            lambda c: f"{c['num_perm_used']}" + (" (> num_perm)" if c["num_perm_used"] > request["num_perm"] else ""),
        ),
        (f"P(candidate) at {request['threshold']:g}", lambda c: f"{c['probability_at_threshold']:.4f}"),
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


def _warn_if_gpu_settings_unused(config: RunConfig, asked: str) -> None:
    """One line when a run on the CPU was given settings of the embedded GPU cluster, which it
    does not start (they were ignored without a word). A joined cluster refuses them already."""
    gpu = config.cluster.gpu
    changed = [key for key, value in gpu if value != GPUConfig.model_fields[key].default]
    if config.backend != "cpu" or not changed or config.cluster.scheduler_address or config.cluster.scheduler_file:
        return

    def named(key: str) -> str:
        flag = _flag_of(key, getattr(gpu, key))
        return f"cluster.gpu.{key}" if flag is None else f"cluster.gpu.{key} ({flag})"

    why = "--backend auto found no usable GPU" if asked == "auto" else "--backend cpu"
    verb = "configures" if len(changed) == 1 else "configure"
    names = ", ".join(map(named, changed))
    click.echo(f"warning: {names} {verb} the GPU cluster, which this run does not start ({why})", err=True)


def _warn_if_fuzzy_settings_unused(config: RunConfig, flags: dict) -> None:
    """One line when ``--mode exact`` was given fuzzy dedup's flags, or a config file's fuzzy
    settings, which it does not run (they were ignored without a word: one could believe near
    duplicates were looked for; ``--mode exact --config nemo-curator`` said nothing)."""
    if config.mode != "exact":
        return
    given = [name for name, value in flags.items() if value is not None and SECTIONS[name] == ("fuzzy",)]
    from_file = [f"fuzzy.{name}" for name in config.fuzzy.changed() if name not in given]
    if given or from_file:
        names = settings_named([_flag_of(name, flags[name]) for name in given], from_file, "the config's")
        mode = "--mode exact" if flags.get("mode") else "the config's mode exact"
        click.echo(f"warning: {names} fuzzy dedup, which {mode} does not run", err=True)


def _warn_about_records(counts: dict, out_dir: str) -> None:
    """One line when the inputs hold no record; one when ``--on-error skip`` could not read a
    file to its end, whose rest no count holds (the break is one rejected record), naming the
    files; one when it rejected a record for an id an earlier record has, with the first such; one
    when it rejected half the records or more, some for what they hold: more likely a wrong field
    or format than bad data (an --id-field that few records have rejected all but one), naming
    the files that hold most of them. The counts say how many records, ``OUT/rejected/`` which."""
    rejected, total = counts["output"].get("rejected", 0), counts["input"]["documents"]
    if not total:  # empty files (or blank lines only): an empty output, which looked like success
        click.echo("warning: the inputs hold no records; the output is empty", err=True)
    if not rejected:
        return
    import pandas as pd

    rows = pd.read_parquet(Path(out_dir) / "rejected", columns=["source", "line", "kind", "reason"])
    broken = rows[rows.kind.isin(["truncated", "corrupt"])]  # one per file
    if len(broken):
        files = f"{len(broken):,} input file{'s' if len(broken) > 1 else ''}"
        named = first_few([source for source, _ in _most_rejected(broken)], sep=", ")
        click.echo(
            f"warning: {files} could not be read to the end (truncated or corrupt: {named}): the records after "
            f"the damage are not read and in no count; each file's reason is in {out_dir}/rejected/",
            err=True,
        )
    repeated = rows[rows.kind == "duplicate-id"]
    if len(repeated):  # a valid document lost to another's id (sources that number their ids apart)
        first = repeated.iloc[0]
        click.echo(
            f"warning: {counted(len(repeated), 'record')} rejected for an id an earlier record has (e.g. "
            f"{first.source}:{first.line}: {first.reason}); ids must be unique across all inputs: sources that "
            "number their ids apart need runs of their own, or --id-field naming a field unique across them",
            err=True,
        )
    if rejected > len(broken) and 2 * rejected >= total:
        kinds = ", ".join(f"{kind} {n:,}" for kind, n in sorted(counts["rejected"].items(), key=lambda kv: -kv[1]))
        most = first_few([f"{source} {n:,}" for source, n in _most_rejected(rows)], sep=", ")
        click.echo(
            f"warning: {rejected:,} of {total:,} records were rejected ({kinds}; most in {most}); check "
            f"--text-field and --id-field, and each record's reason in {out_dir}/rejected/",
            err=True,
        )


def _most_rejected(rows) -> list[tuple[str, int]]:
    """``(source, records)`` of ``OUT/rejected/``'s ``rows``, most records first, then by name."""
    return sorted(rows.groupby("source").size().items(), key=lambda sn: (-sn[1], sn[0]))


def print_summary(summary: dict, out_dir: str) -> None:
    """One screen: documents in, removed per kind, kept, time and memory."""
    from rich.console import Console
    from rich.table import Table

    counts, seconds = summary["counts"], summary["seconds"]
    # The backend in the title: `--backend auto` chose it.
    table = Table(title=f"curate dedup -> {out_dir} (backend {summary['config']['backend']})", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right", max_width=60)  # a long list of stages reused wraps in its cell
    table.add_row("documents in", f"{counts['input']['documents']:,}")
    table.add_row("  empty", f"{counts['input']['empty']:,}")
    if "exact" in counts:
        table.add_row(
            "exact duplicates removed",
            f"{counts['exact']['removed']:,} ({counted(counts['exact']['groups'], 'group')})",
        )
    if "fuzzy" in counts:
        f, fuzzy = counts["fuzzy"], summary["config"]["fuzzy"]
        if "num_bands" in fuzzy:  # runs of a sweep told apart on screen (a user's trial)
            unit = "word" if fuzzy["ngram"] == "word" else "character"
            table.add_row(
                "fuzzy settings",
                f"Jaccard >= {fuzzy['threshold']:g}, {fuzzy['width']}-{unit} shingles, "
                f"{fuzzy['num_bands']} x {fuzzy['rows_per_band']} bands",
            )
            # Hash bits and seed where they are not the defaults: --config datatrove's 64 bits
            # and a run of seed 7 had the same rows as the defaults'.
            variant = [
                text.format(fuzzy[name])
                for name, text in (("hash_bits", "{}-bit"), ("seed", "seed {}"))
                if fuzzy.get(name, FuzzyConfig.model_fields[name].default) != FuzzyConfig.model_fields[name].default
            ]
            if variant:
                table.add_row("  MinHash", ", ".join(variant))
            # Runs that differ only in normalisation looked alike (--config datatrove's four flags).
            flags = " ".join(f"--{name.replace('_', '-')}" for name in NORMALISATION if fuzzy.get(name))
            if flags:
                table.add_row("  text normalised by", flags)
        members = f" + {f['member_pairs']:,} member pairs" if "member_pairs" in f else ""
        verified = f"{f['verified_edges']:,} edges" if fuzzy["verify"] else "not verified (--no-verify)"
        table.add_row("fuzzy candidates / verified", f"{f['candidate_edges']:,}{members} / {verified}")
        table.add_row("fuzzy duplicates removed", f"{f['removed']:,} ({counted(f['groups'], 'group')})")
    listed = " (not written: --identify-only)" if summary["output_format"] is None else ""
    table.add_row(f"documents kept{listed}", f"{counts['output']['kept']:,}")
    if "reference" in counts["output"]:
        table.add_row("reference documents (kept, not written)", f"{counts['output']['reference']:,}")
    if counts["output"].get("rejected"):
        table.add_row("records rejected (OUT/rejected/)", f"{counts['output']['rejected']:,}")
    if summary["reused_stages"]:
        table.add_row("stages reused", ", ".join(summary["reused_stages"]))
    for stage, secs in seconds.items():
        table.add_row(f"time {stage}", f"{secs:.1f} s")
    table.add_row("peak RSS (all processes)", f"{summary['peak_rss_bytes']['total'] / 1e9:.2f} GB")
    if summary.get("cache_input"):  # part of that peak: the documents the stages read, held for them
        table.add_row("  input kept in memory", "yes (--no-cache-input: read again)")
    if summary.get("peak_device_bytes"):
        device = summary["peak_device_bytes"]["workers"].values()
        table.add_row("peak device memory (RMM, per GPU)", " / ".join(f"{peak / 1e9:.2f} GB" for peak in device))
    if summary.get("workers_left"):
        table.add_row("workers lost or restarted", f"{len(summary['workers_left'])} (their tasks were run again)")
    if summary["spilled_bytes"]:
        table.add_row("spilled to disk", f"{summary['spilled_bytes'] / 1e9:.2f} GB")
    if summary.get("device_spilled_bytes"):
        table.add_row("spilled from GPUs to host (cuDF)", f"{summary['device_spilled_bytes'] / 1e9:.2f} GB")
    console = Console()
    if not console.is_terminal:  # a log or a pipe: one line a row, not rich's 80 columns there
        console.width = max(console.width, 160)
    console.print(table)
