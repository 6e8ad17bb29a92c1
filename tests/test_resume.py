"""Crashes and restarts: killed runs resume to identical outputs; changes recompute what they touch."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster

from curate.checkpoints import _changes
from curate.checks import check_output
from curate.config import load_config
from curate.pipeline import StagesOutOfDateError, dedup
from curate.runner import Runner
from tests.conftest import FIXTURES, shared_corpus

STAGES = [
    "read",
    "exact",
    "minhash+lsh",
    "select",
    "verify",
    "member_pairs",
    "verify_members",
    "components",
    "groups",
    "removed",
    "duplicates",
]

# Runs dedups in fresh processes under Dask's synchronous scheduler and SIGKILLs such a process
# as stage KILL_AT finishes writing, before it is published; KILL_AT "write" kills it after the
# output files are written, before they are renamed into place. What is published and resumed
# does not depend on the scheduler (the cluster's own faults: test_killed_worker_mid_stage_...,
# and tests/test_terminal.py's Ctrl-C), and a run without a cluster's start and round trips
# costs less than half as much. Each run is a fork of one server process that imported curate, Dask
# and pandas once (3 s a process); the server starts no thread, so the fork is the fresh process
# a run would be.
SERVER = """
import json, os, signal, sys, traceback
import dask
from curate import checkpoints as stages, pipeline, runner
from curate.config import load_config

def run(inputs, out, kill_at, resume, overrides, keep_stages):
    publish, call = stages.StageStore.publish, runner.Runner.__call__

    def publish_or_die(self, name, *args):
        if name == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        publish(self, name, *args)

    def call_or_die(self, stage, **collections):
        done = call(self, stage, **collections)
        if stage == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return done

    stages.StageStore.publish, runner.Runner.__call__ = publish_or_die, call_or_die
    with dask.config.set(scheduler="sync"):
        pipeline.dedup([inputs], out, load_config(None, overrides), resume=resume, keep_stages=keep_stages)

replies = os.fdopen(os.dup(1), "w")
for request in sys.stdin:
    *args, log = json.loads(request)
    pid = os.fork()
    if pid == 0:
        with open(log, "w") as f:  # the run's prints and errors, never into the replies
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
        try:
            run(*args)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    status = os.waitpid(pid, 0)[1]
    print(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status), file=replies, flush=True)
"""


KILLED_RUNS = {"fuzzy": {"threshold": 0.7}}  # the configuration of the killed runs


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # The runs end in SIGKILL or os._exit, before the cleanup at exit of Dask's disk shuffles:
    # their empty folders go to a folder of the test's, not /tmp (some 400 a test run).
    env = {**os.environ, "PYTHONPATH": str(Path.cwd()), "TMPDIR": str(tmp_path_factory.mktemp("runs-tmp"))}
    with subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    ) as process:
        yield process
        process.stdin.close()


def drive(
    server,
    out: Path,
    kill_at: str = "",
    resume: bool = False,
    overrides: dict = KILLED_RUNS,
    keep_stages: bool = False,
    inputs: Path = FIXTURES / "docs.jsonl",
) -> tuple[int, str]:
    """Exit status of one run in a fresh process (a fork of ``server``), -9 when it was killed, and what it printed."""
    log = out.parent / f"{out.name}-{kill_at or ('resume' if resume else 'fresh')}.log"
    request = [str(inputs), str(out), kill_at, resume, overrides, keep_stages, str(log)]
    server.stdin.write(json.dumps(request) + "\n")
    server.stdin.flush()
    return int(server.stdout.readline()), log.read_text()


def outputs(out: Path) -> dict[str, bytes]:
    """Every output file's bytes, and the summary's counts (its timings differ run to run)."""
    files = {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and "_stages" not in p.parts
    }
    files["summary.json"] = json.dumps(json.loads(files["summary.json"])["counts"]).encode()
    return files


@pytest.fixture(scope="module")
def uninterrupted(server, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out"
    status, printed = drive(server, out)
    assert status == 0, printed
    return outputs(out)


@pytest.mark.parametrize("stage", [*STAGES, "write"])
def test_killed_run_resumes_to_identical_output(server, tmp_path, uninterrupted, stage):
    out = tmp_path / "out"
    status, printed = drive(server, out, kill_at=stage)
    assert status == -signal.SIGKILL, printed
    assert not (out / "summary.json").exists()  # a killed run never looks finished
    finished = [name for name in STAGES if (out / "_stages" / name / "_marker.json").exists()]
    assert finished == (STAGES[: STAGES.index(stage)] if stage in STAGES else STAGES)
    status, printed = drive(server, out, resume=True)
    assert status == 0, printed
    assert outputs(out) == uninterrupted
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reused_stages"] == finished and not list((out / "_stages").glob("*.tmp"))


def run(server, out: Path, resume: bool = False, inputs: Path = FIXTURES / "docs.jsonl", **overrides) -> dict:
    """The summary of a run with its stages kept, in a fork of ``server``."""
    status, printed = drive(server, out, resume=resume, overrides=overrides, keep_stages=True, inputs=inputs)
    assert status == 0, printed
    return json.loads((out / "summary.json").read_text())


def test_changed_parameter_recomputes_exactly_the_stages_after_it(server, tmp_path):
    out = tmp_path / "out"
    bands = {"num_bands": 20, "rows_per_band": 13}  # given: else a new threshold may choose new bands
    run(server, out, fuzzy={"threshold": 0.9, **bands})
    assert run(server, out, resume=True, fuzzy={"threshold": 0.9, **bands})["reused_stages"] == STAGES
    status, printed = drive(
        server, out, resume=True, overrides={"fuzzy": {"threshold": 0.7, **bands}}, keep_stages=True
    )
    assert status == 0, printed
    changed = json.loads((out / "summary.json").read_text())
    assert changed["reused_stages"] == STAGES[:4]  # up to candidate selection
    assert (
        "stage verify in " in printed
        and "options (threshold: 0.9 -> 0.7); it is computed again, as is each stage after it" in printed
    ), printed
    capped = run(server, out, resume=True, fuzzy={"threshold": 0.7, "max_member_pairs": 1, **bands})
    assert capped["reused_stages"] == STAGES[:5]  # the second verification round onwards
    fresh = run(server, tmp_path / "fresh", fuzzy={"threshold": 0.7, **bands})
    assert changed["counts"] == fresh["counts"]
    assert (out / "removed.parquet").read_bytes() == (tmp_path / "fresh" / "removed.parquet").read_bytes()
    # exact groups change; the read and its digests do not depend on the keep policy
    longest = run(server, out, resume=True, keep="longest", fuzzy={"threshold": 0.7, **bands})
    assert longest["reused_stages"] == STAGES[:1]
    # A keep column is read with the documents: the read's candidates lacked it (KeyError: 'source').
    by_source = run(server, out, resume=True, keep="max:source", fuzzy={"threshold": 0.7, **bands})
    assert by_source["reused_stages"] == []
    fresh = run(server, tmp_path / "fresh-source", keep="max:source", fuzzy={"threshold": 0.7, **bands})
    assert (out / "removed.parquet").read_bytes() == (tmp_path / "fresh-source" / "removed.parquet").read_bytes()
    assert (
        run(server, out, resume=True, keep="min:source", fuzzy={"threshold": 0.7, **bands})["reused_stages"]
        == STAGES[:1]
    )
    run(server, out, resume=True, keep="longest", fuzzy={"threshold": 0.7, **bands})
    unverified = run(server, out, resume=True, keep="longest", fuzzy={"threshold": 0.7, "verify": False, **bands})
    assert unverified["reused_stages"] == STAGES[:4]
    changed = run(
        server, out, resume=True, keep="longest", fuzzy={"threshold": 0.7, "num_bands": 10, "rows_per_band": 13}
    )
    assert changed["reused_stages"] == STAGES[:2]
    chosen = run(server, out, resume=True, keep="longest", fuzzy={"threshold": 0.8})
    assert chosen["reused_stages"] == STAGES[:2]  # bands chosen: 0.8 -> new bands
    # Modes exact and both read alike (the read keyed the mode: every stage was computed again).
    exact_only = run(server, out, resume=True, mode="exact", keep="longest", fuzzy={"threshold": 0.8})
    assert exact_only["reused_stages"] == STAGES[:2]
    both = run(server, out, resume=True, keep="longest", fuzzy={"threshold": 0.8})
    # the exact run replaced the tables made from the groups: those two are made again
    assert both["reused_stages"] == STAGES[:-2] and both["counts"] == chosen["counts"]


def test_changed_input_recomputes_everything(server, tmp_path):
    data = tmp_path / "docs.jsonl"
    data.write_bytes((FIXTURES / "docs.jsonl").read_bytes())
    out = tmp_path / "out"
    first = run(server, out, inputs=data)
    data.write_bytes(data.read_bytes().replace(b"a12", b"b12"))  # same size: the modification time tells
    os.utime(data, ns=(time.time_ns(), time.time_ns() + 10**9))
    status, printed = drive(server, out, resume=True, overrides={}, keep_stages=True, inputs=data)
    assert status == 0, printed
    # The stages were recomputed without a word, as if --resume had found nothing.
    assert printed.count("--resume: stage read in ") == 1 and printed.count("--resume:") == 1, printed
    assert (
        f"was finished with other inputs or options (input file {data} changed (size or modification time));" in printed
    )
    second = json.loads((out / "summary.json").read_text())
    assert second["reused_stages"] == [] and second["counts"] == first["counts"]
    assert "b12" in (out / "removed.parquet").read_bytes().decode("latin-1")


def test_a_skipping_run_with_a_repeated_id_resumes_or_is_replaced(server, tmp_path):
    # Its _stages/repeated_ids-KEY.parquet was taken for a file no run writes, so --resume and
    # --overwrite were both refused ("holds 1 file(s) no run writes").
    lines = (FIXTURES / "docs.jsonl").read_text().splitlines()
    data = tmp_path / "docs.jsonl"
    data.write_text("\n".join([*lines, lines[0]]) + "\n")  # the first record again: its id repeated
    out, skip = tmp_path / "out", {"io": {"on_error": "skip"}}
    first = run(server, out, inputs=data, **skip)
    assert first["counts"]["rejected"] == {"duplicate-id": 1} and len(list((out / "_stages").glob("repeated_ids-*")))
    resumed = run(server, out, resume=True, inputs=data, **skip)
    assert resumed["reused_stages"] == STAGES and resumed["counts"] == first["counts"]
    # The file of repeated ids lies beside the read stage: gone, the read was reused without it
    # and the repeated id was kept twice, rejecting nothing (exit 0).
    repeated = next((out / "_stages").glob("repeated_ids-*.parquet"))
    repeated.unlink()
    status, printed = drive(server, out, resume=True, overrides=skip, keep_stages=True, inputs=data)
    assert (
        status == 0
        and f"stage read in {out / '_stages'} is not as it was written (../{repeated.name} is gone)" in printed
    )
    again = json.loads((out / "summary.json").read_text())
    assert again["counts"] == first["counts"] and again["reused_stages"] == STAGES[1:] and repeated.exists()
    check_output(out, overwrite=True)
    (out / "_stages" / "repeated_ids-notes.parquet").write_bytes(b"")  # not a run's: still refused
    with pytest.raises(FileExistsError, match="holds 1 file\\(s\\) no run writes, e.g. 'repeated_ids-notes.parquet'"):
        check_output(out, overwrite=True)


def test_resume_names_what_changed_files_first():
    before = {"files": [["a", 1, "t"], ["b", 2, "t"]], "io": {"blocksize": 64, "id_field": "id"}, "mode": "both"}
    now = {"files": [["a", 1, "u"], ["c", 3, "t"]], "io": {"blocksize": 64, "id_field": "key"}, "mode": "both"}
    assert _changes(before, now, shown=4) == [
        "input file a changed (size or modification time)",
        "input file c is new",
        "input file b is no longer an input",  # "is gone" of a file that was there, no longer given
        "io.id_field: id -> key",
    ]
    assert _changes(before, now)[2:] == ["input file b is no longer an input", "1 more"]
    # --reference: the files it names, not a key bound ("reference: 5497558138880 -> 4398046511104")
    assert _changes({**before, "reference_files": 2}, {**before, "reference_files": 1}) == ["reference_files: 2 -> 1"]
    assert _changes(now, now) == []
    # Partitions that changed alone came from the threads, and the phrase says so; beside an
    # option that changed them (--blocksize), no.
    cut, whole = {"partitions": "2 partitions, cut at file 2"}, {"partitions": "1 partition"}
    assert _changes(whole, cut) == [
        "partitions: 1 partition -> 2 partitions, cut at file 2 (the worker threads changed: an input under "
        "--blocksize a thread is cut into a partition for each; resume on as many threads, or give "
        "--files-per-partition to fix the partitions)"
    ]
    assert _changes({**whole, "io": {"blocksize": 64}}, {**cut, "io": {"blocksize": 32}}) == [
        "io.blocksize: 64 -> 32",
        "partitions: 1 partition -> 2 partitions, cut at file 2",
    ]
    # The same files listed in another order were "the worker threads changed" (their partitions'
    # keys differ), or, whole files a partition, "an input file's size or modification time, or an option".
    swapped = {"files": before["files"][::-1]}
    order = "the input files are listed in another order (a document's key holds its file's place)"
    assert _changes({**before, **whole}, {**before, **swapped, **cut}) == [
        order,
        "partitions: 1 partition -> 2 partitions, cut at file 2",
    ]
    assert _changes(before, {**before, **swapped}) == [order]


def test_previous_run_needs_resume_or_overwrite(server, tmp_path):
    out = tmp_path / "out"
    run(server, out)
    with pytest.raises(FileExistsError, match="--resume .* or --overwrite"):
        dedup([str(FIXTURES / "docs.jsonl")], str(out), load_config())
    with pytest.raises(ValueError, match="not both"):
        dedup([str(FIXTURES / "docs.jsonl")], str(out), load_config(), overwrite=True, resume=True)


def test_killed_worker_mid_stage_gives_identical_output(tmp_path, monkeypatch):
    """A worker process SIGKILLed while the LSH stage runs: Dask reschedules its tasks."""
    shard = shared_corpus("20news") / "part-00000.jsonl.gz"
    data = tmp_path / "news.jsonl"
    data.write_bytes(b"".join(gzip.decompress(shard.read_bytes()).splitlines(keepends=True)[:400]))  # 0.9 MB
    call, killed = Runner.__call__, []

    def kill_a_busy_worker(self, stage, **collections):
        if stage != "minhash+lsh":
            return call(self, stage, **collections)
        client = Client.current()
        futures = client.compute(list(collections.values()))
        while not (busy := [w for w, tasks in client.processing().items() if tasks]):
            time.sleep(0.01)
        killed.append(client.run(os.getpid, workers=busy[:1])[busy[0]])
        os.kill(killed[0], signal.SIGKILL)
        return dict(zip(collections, client.gather(futures)))

    def news(out):
        return dedup([str(data)], str(out), load_config(None, {"io": {"blocksize": "128KB"}}))

    # The reference on the synchronous scheduler, which writes the cluster's bytes (test_pipeline).
    with dask.config.set(scheduler="sync"):
        reference = news(tmp_path / "reference")
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster):
        monkeypatch.setattr(Runner, "__call__", kill_a_busy_worker)
        survived = news(tmp_path / "killed")
    assert len(killed) == 1 and reference["counts"]["input"]["partitions"] > 4
    assert survived["counts"] == reference["counts"]
    assert outputs(tmp_path / "killed") == outputs(tmp_path / "reference")


@pytest.mark.parametrize(
    "damage",
    [
        "removed/part.0.parquet gone",  # the removed rows of a partition: they were kept, exit 0
        "read/part.0.parquet empty",  # "Parquet file size is 0 bytes" at every --resume
        "exact/part.0.parquet cut",  # "Parquet magic bytes not found in footer"
        "verify/_marker.json empty",  # "Expecting value: line 1 column 1 (char 0)"
        "components/part.0.parquet gone",  # IndexError in read_stage_frame
        "groups/part.9.parquet added",  # read as a partition of its own
        "removed/part.0.parquet other",  # another file of its size (another run's): exit 0, its rows
        "removed/part.0.parquet linked",  # the stage a link to a copy lacking it: "[Errno 20] Not a directory"
    ],
)
def test_a_damaged_stage_is_computed_again(server, tmp_path, uninterrupted, damage):
    # A finished stage that lost or cut short a file (by hand, a full disk, a crash) was reused
    # as it was: rows went missing with exit 0, or every later --resume stopped on its files.
    out = tmp_path / "out"
    status, printed = drive(server, out, keep_stages=True)
    assert status == 0, printed
    rel, how = damage.split(" ")
    path = out / "_stages" / rel
    if how == "gone":
        path.unlink()
    elif how == "linked":  # the stage folder moved elsewhere and linked back, then a part lost there
        elsewhere = tmp_path / "elsewhere"
        path.parent.rename(elsewhere)
        path.parent.symlink_to(elsewhere)
        (elsewhere / path.name).unlink()
    elif how == "added":
        path.write_bytes((path.parent / "part.0.parquet").read_bytes())
    elif how == "other":  # a byte of its footer's statistics changed, as another file's would be
        data = bytearray(path.read_bytes())
        data[-40] ^= 0xFF
        path.write_bytes(bytes(data))
    else:
        path.write_bytes(path.read_bytes()[: 100 if how == "cut" else 0])
    status, printed = drive(server, out, resume=True, keep_stages=True)
    assert status == 0, printed
    assert outputs(out) == uninterrupted
    stage = rel.split("/")[0]
    said = {
        "gone": f"{rel.split('/')[1]} is gone",
        "linked": f"{rel.split('/')[1]} is gone",
        "added": "part.9.parquet was added",
        "cut": "holds 100 bytes",
        "other": "part.0.parquet is not the file written (another of its size)",
    }
    expected = (
        f"marker {path} cannot be read" if how == "empty" and stage == "verify" else said.get(how, "holds 0 bytes")
    )
    assert f"stage {stage}" in printed and expected in printed, printed
    reused = json.loads((out / "summary.json").read_text())["reused_stages"]
    assert reused == [name for name in STAGES if name != stage]  # the stages after it were made of intact files


def test_resume_after_another_mode_names_it(server, tmp_path):
    out = tmp_path / "out"
    run(server, out)
    status, printed = drive(server, out, resume=True, overrides={"mode": "exact"}, keep_stages=True)
    assert status == 0, printed
    assert "(previous stage: groups -> exact)" in printed, printed


def test_a_stages_log_line_says_what_its_rows_are(tmp_path):
    # -v said "stage read: finished (0 rows in 1 Parquet file(s), ...)" of a run that had read
    # 1,810 documents: its table holds exact dedup's candidates, which were none.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curate.checkpoints import _size

    (tmp_path / "read").mkdir()
    pq.write_table(pa.table({"_doc": [1, 2, 3]}), tmp_path / "read" / "part.0.parquet")
    assert _size(tmp_path / "read").startswith("3 documents whose md5 another shares; 1 Parquet file, ")
    for table, rows in [("edges", 2), ("stars", 1), ("stars", 0)]:
        (tmp_path / "minhash+lsh" / table).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"u": list(range(rows))}), tmp_path / "minhash+lsh" / table / f"part.{rows}.parquet")
    assert _size(tmp_path / "minhash+lsh").startswith(
        "2 candidate pairs; 1 row of buckets of 3 or more; 3 Parquet files, "
    )
    (tmp_path / "other" / "t").mkdir(parents=True)
    pq.write_table(pa.table({"u": [1]}), tmp_path / "other" / "t" / "part.0.parquet")
    assert _size(tmp_path / "other").startswith("t: 1 row; 1 Parquet file, ")


def test_a_stages_files_typed_differently_read_back_in_one_type_per_column(tmp_path):
    # Each partition of a stage is written on its own, so its files may type a column
    # differently (Arrow's null type where a partition had no value, string or large_string,
    # narrower integers). pandas concatenates such partitions, cudf's concat refuses them ("All
    # columns must be the same type"), so each file is read in the types that hold all of them.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curate.checkpoints import read_stage_frame

    columns = [
        {"_doc": pa.array([], pa.int32()), "_id": pa.array([], pa.null())},
        {"_doc": pa.array([3], pa.int64()), "_id": pa.array(["a"], pa.large_string())},
        {"_doc": pa.array([5], pa.int64()), "_id": pa.array(["b"], pa.string())},
    ]
    for i, table in enumerate(columns):
        pq.write_table(pa.table(table), tmp_path / f"part.{i}.parquet")
    with dask.config.set(scheduler="sync"):
        frame = read_stage_frame(tmp_path)
        parts = [frame.get_partition(i).compute() for i in range(frame.npartitions)]
    assert [p.dtypes.astype(str).to_dict() for p in parts] == [frame._meta.dtypes.astype(str).to_dict()] * 3
    assert frame._meta.dtypes["_doc"] == "int64"
    assert [p.to_dict("list") for p in parts] == [
        {"_doc": [], "_id": []},
        {"_doc": [3], "_id": ["a"]},
        {"_doc": [5], "_id": ["b"]},
    ]


def test_a_stage_read_back_on_a_device_backend_has_a_range_index(tmp_path, monkeypatch):
    # cudf's from_arrow gave each partition read back an integer Index (the H200, RAPIDS 26.10),
    # where pandas gives a RangeIndex; cudf's concat takes such an index as a column unless
    # every piece has a RangeIndex. Here from_arrow gives such an Index, as it did there.
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curate import checkpoints

    def from_arrow(table, frame_backend):
        frame = table.to_pandas()
        frame.index = pd.Index(np.arange(10, 10 + len(frame)))
        return frame

    monkeypatch.setattr(checkpoints, "from_arrow", from_arrow)
    for i, rows in enumerate([[1, 2], [3]]):
        pq.write_table(pa.table({"_doc": rows}), tmp_path / f"part.{i}.parquet")
    with dask.config.set({"dataframe.backend": "cudf", "scheduler": "sync"}):
        frame = checkpoints.read_stage_frame(tmp_path)
        parts = [frame.get_partition(i).compute() for i in range(frame.npartitions)]
    assert [type(p.index).__name__ for p in [frame._meta, *parts]] == ["RangeIndex"] * 3
    assert [p["_doc"].tolist() for p in parts] == [[1, 2], [3]]


def test_an_input_rewritten_at_its_size_and_time_is_not_resumed_into_wrong_outputs(sync, tmp_path):
    # --resume compares a file's size and modification time. A file whose lines were moved kept
    # both: the removed copy was written and the document now at its place was in no output,
    # exit 0 with every count right (a user's trial).
    text = "a document long enough to hold a few shingles of its own, "
    lines = [json.dumps({"id": name, "text": text + body}) for name, body in (("a", "x"), ("a-copy", "x"), ("b", "y"))]
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(lines) + "\n")
    out, config = tmp_path / "out", load_config(None, {"mode": "exact"})
    dedup([str(data)], str(out), config, keep_stages=True)
    before = {name: (out / name).read_bytes() for name in ("removed.parquet", "deduplicated/part.00000.jsonl")}
    assert b"a-copy" in before["removed.parquet"]
    stat = data.stat()
    data.write_text("\n".join([lines[0], lines[2], lines[1]]) + "\n")  # b where a-copy was
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert data.stat().st_size == stat.st_size
    with pytest.raises(StagesOutOfDateError) as raised:
        dedup([str(data)], str(out), config, resume=True, keep_stages=True)
    assert str(raised.value) == (
        "the finished stages do not fit the input: in.jsonl:2: the document there is not the one they found there "
        "(its id differs); an input file changed since they were computed, though its size and modification time "
        "are the same: run the command again with --overwrite"
    )
    assert {name: (out / name).read_bytes() for name in before} == before  # the previous run's outputs stay
    # The copy moved before its original: no removed document's place holds a document, and the
    # counts did not add up: an AccountingError's traceback, deduplicated.tmp/ left behind.
    data.write_text("\n".join([lines[1], lines[0], lines[2]]) + "\n")
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(StagesOutOfDateError, match=r"^the finished stages do not fit the input: 3 input records != "):
        dedup([str(data)], str(out), config, resume=True, keep_stages=True)
    names = ["_stages", "deduplicated", "duplicates.parquet", "removed.parquet", "summary.json"]
    assert sorted(path.name for path in out.iterdir()) == names
    assert {name: (out / name).read_bytes() for name in before} == before
    dedup([str(data)], str(out), config, overwrite=True)
    assert [
        json.loads(line)["id"] for line in (out / "deduplicated" / "part.00000.jsonl").read_text().splitlines()
    ] == ["a-copy", "b"]
