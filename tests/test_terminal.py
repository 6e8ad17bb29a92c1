"""What a person sees on the terminal: Ctrl-C, a bad record, -v, and --help.

These run the real ``curate`` command in a new process (worker processes write to the
terminal too, which an in-process runner would not see).
"""

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from curate.cli import main
from curate.config import load_config
from curate.pipeline import dedup
from tests.conftest import FIXTURES, shared_corpus

CLUSTER = ["--n-workers", "2", "--threads-per-worker", "1", "--no-progress"]


# A terminal's foreground job starts with SIGINT at its default. A test run started in the
# background of a shell without job control (`pytest &` in a script) has SIGINT ignored, its
# children inherit that across exec, and Python then installs no KeyboardInterrupt handler:
# the command ran through the test's Ctrl-C. So the command is started through this, not
# through preexec_fn (unsafe in a process with threads, as the test's Dask client has).
AS_A_TERMINAL_STARTS_IT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def start(*args, **popen) -> subprocess.Popen:
    """``curate ARGS`` in its own session (process group), as a terminal runs a command."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "COLUMNS": "200"}
    command = [sys.executable, "-c", AS_A_TERMINAL_STARTS_IT, "-m", "curate", *map(str, args)]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
        **popen,
    )


def signal_state(pid: int) -> str:
    """The SigBlk, SigIgn and SigCgt lines of a process's /proc status, for a failure's message:
    whether the command blocked, ignored or caught SIGINT when the test sent it."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return " ".join(line.replace("\t", "") for line in lines if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


def group_members(pgid: int) -> list[str]:
    """Live (not zombie) processes in process group ``pgid``, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(stat.parent.name)
    return members


def outputs(out: Path) -> dict[str, bytes]:
    """Every output file's bytes, the summary by its counts (timings differ run to run)."""
    files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    files["summary.json"] = json.dumps(json.loads(files["summary.json"])["counts"]).encode()
    return files


def published(out: Path) -> list[str]:
    """The stages finished in ``out/_stages``: each has its marker, written in ``<stage>.tmp/``
    just before that folder is renamed (a Ctrl-C in between leaves it there, unfinished)."""
    return sorted(p.parent.name for p in (out / "_stages").glob("*/_marker.json") if p.parent.suffix != ".tmp")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc")
def test_ctrl_c_stops_quietly_and_resume_finishes_the_run(client, tmp_path):
    shard = shared_corpus("enron_spam") / "part-00000.jsonl.gz"
    lines = gzip.decompress(shard.read_bytes()).splitlines(keepends=True)[:1000]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "enron.jsonl").write_bytes(b"".join(lines))
    args = [tmp_path / "in", "--blocksize", "512KB", *CLUSTER]  # a few partitions
    out = tmp_path / "out"
    run = start("dedup", *args, "-o", out)
    while not published(out):  # a stage finished: the next is running
        assert run.poll() is None, run.stdout.read()
        time.sleep(0.02)
    state = signal_state(run.pid)
    os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    printed, _ = run.communicate(timeout=60)
    assert run.returncode == 130, f"{state}\n{printed}"
    lines = printed.splitlines()
    assert len(lines) <= 3 and re.fullmatch(
        r"interrupted: .* kept in .*_stages; run the same command with --resume to continue", lines[-1]
    ), printed
    for _ in range(100):  # the workers and the cluster went with it
        if not group_members(run.pid):
            break
        time.sleep(0.1)
    assert group_members(run.pid) == []
    finished = published(out)
    assert finished and not (out / "summary.json").exists()

    # the same run resumed, on the session's cluster (the stages do not depend on the cluster)
    resumed = start(
        "dedup", *args[:3], "-o", out, "--resume", "--scheduler-address", client.scheduler.address, "--no-progress"
    )
    assert resumed.wait(timeout=600) == 0, resumed.stdout.read()
    assert sorted(json.loads((out / "summary.json").read_text())["reused_stages"]) == finished
    assert not (out / "_stages").exists()  # the run succeeded
    # an uninterrupted run, on the session's cluster too
    dedup([str(tmp_path / "in")], str(tmp_path / "reference"), load_config(None, {"io": {"blocksize": "512KB"}}))
    assert outputs(out) == outputs(tmp_path / "reference")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc")
def test_ctrl_c_while_a_scheduler_is_awaited_stops_at_once(tmp_path):
    # The check of the address waited in an executor's thread, which Python joins at exit: a
    # Ctrl-C there took the rest of Dask's 30 s connect timeout. (192.0.2.0/24 is reserved for
    # documentation: nothing answers there, and the connection waits.)
    run = start("dedup", FIXTURES / "docs.jsonl", "-o", tmp_path / "out", "--scheduler-address", "tcp://192.0.2.2:8799")
    time.sleep(6)  # started, and waiting on the address
    if run.poll() is not None:
        pytest.skip(f"192.0.2.2 was refused at once here: {run.stdout.read()}")
    os.killpg(run.pid, signal.SIGINT)
    sent = time.monotonic()
    printed, _ = run.communicate(timeout=60)
    assert run.returncode == 130 and time.monotonic() - sent < 10, printed
    assert printed.splitlines()[-1] == "interrupted: no stage had finished; run the same command again to start over"


def test_bad_record_is_named_with_what_to_do_without_worker_logs(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"id": 1, "text": "hello"}\n{"id": 2, "text": "oops\n{"id": 3, "text": "x"}\n')
    run = start("dedup", "bad.jsonl", "-o", "out", *CLUSTER, cwd=tmp_path)
    printed, _ = run.communicate(timeout=300)
    assert run.returncode == 1
    assert printed.splitlines() == [
        "Error: bad.jsonl:2: invalid JSON: Unterminated string starting at column 19",
        "(--on-error skip lists every bad record in OUT/rejected/ and goes on)",
    ]


def test_verbose_logs_the_cluster_and_each_stage(tmp_path):
    run = start("dedup", FIXTURES / "docs.jsonl", "-o", tmp_path / "out", "-v", *CLUSTER)
    printed, _ = run.communicate(timeout=300)
    assert run.returncode == 0, printed
    lines = printed.splitlines()
    assert any(
        re.search(r"curate.cluster: started LocalCluster: 2 worker\(s\), 2 thread\(s\) in all, .*; dashboard off", line)
        for line in lines
    ), printed
    assert any(re.search(r"curate.checkpoints: stage read: started$", line) for line in lines), printed
    assert any(
        re.search(
            r"curate.checkpoints: stage read: finished in [0-9.]+ s \([0-9,]+ documents whose md5 another shares; "
            r"1 Parquet file, [0-9.]+ [kMG]?i?B\)$",
            line,
        )
        for line in lines
    ), printed
    assert any(re.search(r"curate.pipeline: wrote 7 kept documents to .*deduplicated", line) for line in lines), printed
    assert any(re.search(r"curate.cluster: closed LocalCluster", line) for line in lines), printed


def test_help_gives_every_flag_a_sentence_and_one_style_of_default():
    for command in (main.commands["dedup"], main.commands["params"], main.commands["report"], main.commands["inspect"]):
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help and len(param.help.split()) >= 3, (command.name, param.name)
                assert "default" not in re.sub(r"\[default: [^\]]+\]$", "", param.help).lower(), (
                    command.name,
                    param.name,
                    param.help,
                )
                assert not param.show_default, (command.name, param.name)  # click's own style differs
    text = " ".join(CliRunner().invoke(main, ["dedup", "--help"], terminal_width=200).output.split())  # as wrapped
    assert (
        "all of one format and one file system: JSONL (.jsonl, .json, .ndjson; also .gz or .zst) or Parquet (.parquet)"
        in text
    )
    assert "configs/" not in text and "curate config list" in text


def test_embedded_workers_keep_python_warnings_off_the_terminal(capfd):
    from curate.cluster import connect
    from curate.config import ClusterConfig

    def warn():
        import warnings

        warnings.warn(
            "curate-test-warning", FutureWarning, stacklevel=2
        )  # as pandas' deprecation notes in Dask's readers

    config = ClusterConfig(n_workers=1, threads_per_worker=1)
    for quiet in (True, False):
        with connect(config, quiet=quiet) as client:
            client.submit(warn, pure=False).result()
        assert ("curate-test-warning" in capfd.readouterr().err) is not quiet  # the worker's stderr is the terminal's
