"""Mistakes a user can make, found before any cluster starts (curate.checks and the command line).

Each error names what to change (the flag or argument); the command line prints it in at most
two lines without importing Dask. How long that takes is measured in docs/benchmarks.md.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from curate.checks import STAGES, OutputBusyError, check_inputs, check_output, hold_output
from curate.cli import main
from curate.config import IOConfig
from tests.conftest import FIXTURES, write_jsonl

DOCS = FIXTURES / "docs.jsonl"


def records(n, **fields):
    return [{"id": i, "text": f"document {i}", **fields} for i in range(n)]


# -- inputs and their fields -----------------------------------------------------------------------


def test_inputs_found_with_their_fields(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", records(2, score=1))
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": 9, "text": "x", "lang": "en"}])
    found = check_inputs([str(tmp_path / "in")], IOConfig(), "max:score")
    assert found.paths == (str(tmp_path / "in" / "a.jsonl"), str(tmp_path / "in" / "b.jsonl"))
    assert (found.fmt, found.fields) == ("jsonl", ("id", "text", "score", "lang"))


def test_missing_paths_and_formats(tmp_path):
    with pytest.raises(
        FileNotFoundError, match="input '.*nowhere' matches no JSONL or Parquet file: no such file or folder"
    ):
        check_inputs([str(tmp_path / "nowhere")], IOConfig())
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not an input")
    with pytest.raises(
        FileNotFoundError, match=r"the folder holds no JSONL \(.jsonl, .json, .ndjson; also .gz or .zst\) or Parquet"
    ):
        check_inputs([str(tmp_path / "empty")], IOConfig())
    write_jsonl(tmp_path / "a.jsonl", records(1))
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"inputs mix formats \(jsonl .*/a\.jsonl, parquet .*/b\.parquet\); give one"):
        check_inputs([str(tmp_path)], IOConfig())  # a folder: which files are which was not said


def test_fields_every_run_needs_name_the_flag(tmp_path):
    data = write_jsonl(tmp_path / "a.jsonl", records(3))
    with pytest.raises(
        ValueError, match=r"no text field 'body' in any input file \(fields: \['id', 'text'\]\); --text-field names"
    ):
        check_inputs([str(data)], IOConfig(text_field="body"))
    # Left out, the records' field "id" is used: "ids are assigned" was said of them too.
    with pytest.raises(
        ValueError,
        match=r"no id field 'key' in any input file .*; --id-field names .* \(left out, the field 'id' is used\)$",
    ):
        check_inputs([str(data)], IOConfig(id_field="key"))
    no_ids = write_jsonl(tmp_path / "b.jsonl", [{"text": "x"}])
    with pytest.raises(ValueError, match=r"no id field 'key' .*\(left out, ids are assigned\)$"):
        check_inputs([str(no_ids)], IOConfig(id_field="key"))
    with pytest.raises(ValueError, match=r"--keep max:score: no field 'score' in any input file"):
        check_inputs([str(data)], IOConfig(), "max:score")
    pq.write_table(pa.table({"key": [1], "body": ["x"]}), tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="no text field 'text' .*'key', 'body'.*--text-field"):
        check_inputs([str(tmp_path / "a.parquet")], IOConfig())
    assert check_inputs([str(tmp_path / "a.parquet")], IOConfig(text_field="body", id_field="key")).fields == (
        "key",
        "body",
    )


def test_a_file_without_a_needed_field_fails_only_where_the_run_would(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", records(2))
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"id": 5, "body": "elsewhere"}])
    # (it said "--text-field names another field", which then failed every other file)
    with pytest.raises(
        ValueError,
        match=r"b.jsonl: no field 'text' in its first records \(fields: \['id', 'body'\]\); other input files have "
        r"it \(a.jsonl\) and --text-field names one field for every file: give this file a run of its own, or read "
        r"each source with curate.read_documents and concatenate them .*, or --on-error skip",
    ):
        check_inputs([str(tmp_path / "in")], IOConfig())
    # Skipping, each such file is named before the run: its records are all rejected, and a whole
    # source rejected, short of half the records, went without a word.
    skipping = check_inputs([str(tmp_path / "in")], IOConfig(on_error="skip"))
    assert skipping.fields == ("id", "text", "body") and len(skipping.warnings) == 1
    assert skipping.warnings[0].startswith("b.jsonl: no field 'text' in its first records (fields: ['id', 'body'])")
    assert skipping.warnings[0].endswith("; --on-error skip rejects its records")
    assert check_inputs([str(tmp_path / "in" / "b.jsonl")], IOConfig(text_field="body", on_error="skip")).warnings == ()
    # ids are required once some file has them, unless they are assigned (no file has them)
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"text": "no id"}])
    # (it said "--id-field names another field (other files have this one)": no way out there)
    with pytest.raises(
        ValueError,
        match=r"b.jsonl: no field 'id' in its first records \(fields: \['text'\]\); other input files have it "
        r"\(a.jsonl\), so every record needs one \(ids are assigned only where no file has the field\): give this "
        r"file's records ids, --id-field names a field they all have, or --on-error skip",
    ):
        check_inputs([str(tmp_path / "in")], IOConfig())
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "no id either"}])
    assert check_inputs([str(tmp_path / "in")], IOConfig()).fields == ("text",)
    # empty files and Parquet files without rows need nothing
    (tmp_path / "in" / "c.jsonl").write_bytes(b"")
    assert check_inputs([str(tmp_path / "in")], IOConfig()).fields == ("text",)
    pq.write_table(pa.table({"id": [1], "text": ["x"]}), tmp_path / "p1.parquet")
    pq.write_table(pa.table({"other": pa.array([], pa.string())}), tmp_path / "p2.parquet")
    assert check_inputs([str(tmp_path / "p1.parquet"), str(tmp_path / "p2.parquet")], IOConfig()).fields == (
        "id",
        "text",
        "other",
    )


# -- the output folder -----------------------------------------------------------------------------


def test_a_text_field_of_another_type_stops_before_the_cluster(tmp_path):
    # --text-field meta (objects) stopped at the first record, after the cluster had started (19 s).
    write_jsonl(tmp_path / "a.jsonl", [{"text": "a", "meta": {"x": 1}, "n": 5, "mixed": [1, "a"], "none": None}])
    pq.write_table(pa.table({"text": ["a"], "n": [5]}), tmp_path / "p.parquet")
    for field, kind in [("meta", "objects"), ("n", "numbers"), ("mixed", "numbers or mixed arrays")]:
        with pytest.raises(
            ValueError, match=rf"^a\.jsonl: field '{field}' holds {kind} in its first records, not strings"
        ):
            check_inputs([str(tmp_path / "a.jsonl")], IOConfig(text_field=field))
        skipping = check_inputs([str(tmp_path / "a.jsonl")], IOConfig(text_field=field, on_error="skip"))
        assert skipping.warnings == (
            f"a.jsonl: field '{field}' holds {kind} in its first records, not strings; --text-field names the field "
            "that holds the text; --on-error skip rejects its records",
        )
    check_inputs([str(tmp_path / "a.jsonl")], IOConfig(text_field="none"))  # null texts read as empty
    # One record among strings is a bad record, named with its line when the run reads it.
    write_jsonl(tmp_path / "b.jsonl", [{"text": "a"}, {"text": 5}, {"text": None}])
    check_inputs([str(tmp_path / "b.jsonl")], IOConfig())
    with pytest.raises(ValueError, match=r"^p\.parquet: field 'n' holds numbers in its first records"):
        check_inputs([str(tmp_path / "p.parquet")], IOConfig(text_field="n"))
    result = CliRunner().invoke(
        main, ["dedup", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), "--text-field", "meta"]
    )
    assert result.exit_code == 1 and "field 'meta' holds objects" in result.output and not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_a_binary_text_column_is_text(tmp_path, kind):
    # Hive and older Spark write strings as Parquet binary, which the reader takes as UTF-8; the
    # check before the run stopped it ("holds binary ..., not strings"), and with --on-error skip
    # warned that every record would be rejected, then rejected none.
    pq.write_table(pa.table({"id": [1, 2], "text": pa.array([b"a b", b"c d"], kind)}), tmp_path / "a.parquet")
    for on_error in ("fail", "skip"):
        assert check_inputs([str(tmp_path / "a.parquet")], IOConfig(on_error=on_error)).warnings == ()


def test_fields_and_ids_read_as_strings_are_named_before_the_run(tmp_path):
    # A timestamp with a time zone in one file and none in another came out of Parquet to Parquet
    # as JSON text ('"2020-01-01T00:00:00+00:00"'), one file's integer ids and another's strings
    # as strings ('7'), without a word.
    (tmp_path / "in").mkdir()
    when = {"UTC": pa.timestamp("us", tz="UTC"), "naive": pa.timestamp("us")}
    pq.write_table(
        pa.table({"id": [7, 8], "text": ["a", "b"], "ts": pa.array([0, 1], when["UTC"])}), tmp_path / "in" / "a.parquet"
    )
    pq.write_table(
        pa.table({"id": ["x"], "text": ["c"], "ts": pa.array([0], when["naive"])}), tmp_path / "in" / "b.parquet"
    )
    found = check_inputs([str(tmp_path / "in")], IOConfig())
    field = (
        "field 'ts' is read as each value's JSON text, a string, as no one type holds its values "
        "(a.parquet: timestamp[us, tz=UTC]; b.parquet: timestamp[us])"
    )
    ids = (
        "ids are read as strings, as not every file's ids are integers (a.parquet: int64; b.parquet: string): "
        'removed.parquet, duplicates.parquet and Parquet output hold the integer 7 as "7"; JSONL output keeps '
        "each record's own, a mix that pyarrow.json and datasets refuse"
    )
    assert found.converted == (field,) and found.warnings == (ids,)
    only_a = check_inputs([str(tmp_path / "in" / "a.parquet")], IOConfig())
    assert only_a.converted == () and only_a.warnings == ()
    # Of many files, the first of each type is named: the one of integers was among "3 more files".
    for name in "bcdef":
        write_jsonl(tmp_path / "many" / f"{name}.jsonl", [{"id": f"s-{name}", "text": name}])
    write_jsonl(tmp_path / "many" / "g.jsonl", [{"id": 7, "text": "g"}])
    assert check_inputs([str(tmp_path / "many")], IOConfig()).warnings == (
        ids.replace(
            "a.parquet: int64; b.parquet: string", "b.jsonl: string; g.jsonl: int64; c.jsonl: string; 3 more files"
        ),
    )
    # Integer ids beyond 2**53 (Snowflake's, hashes), which the sample marks, beside strings: no
    # word was said, as their kind was not named as an integer type.
    for n, beyond in ((2**60, "integers beyond 2**53"), (2**64, "integers beyond int64")):
        write_jsonl(tmp_path / "wide" / "a.jsonl", [{"id": n + 1, "text": "a"}])
        write_jsonl(tmp_path / "wide" / "b.jsonl", [{"id": "s1", "text": "b"}])
        assert check_inputs([str(tmp_path / "wide")], IOConfig()).warnings == (
            ids.replace("a.parquet: int64; b.parquet", f"a.jsonl: {beyond}; b.jsonl"),
        )
    for output, said in (("parquet", [ids, field]), ("jsonl", [ids])):  # JSONL output: each row as read
        args = ["dedup", str(tmp_path / "in"), "-o", str(tmp_path / output), "--output-format", output]
        result = CliRunner().invoke(main, [*args, "--threshold", "1.5"])  # stopped after the checks
        assert result.exit_code != 0 and [
            line for line in result.output.splitlines() if line.startswith("warning")
        ] == [f"warning: {s}" for s in said]


def test_a_spill_folder_that_cannot_be_one_stops_before_the_cluster(tmp_path):
    # It was Dask's bare "[Errno 20] Not a directory: '<dir>/dask-scratch-space'" as workers started.
    (tmp_path / "file").write_text("x")
    args = ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "out"), "--local-directory"]
    result = CliRunner().invoke(main, [*args, str(tmp_path / "file" / "spill")])
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    expected = (
        f"spill folder {tmp_path}/file/spill: {tmp_path}/file is a file, not a folder; --local-directory names a folder"
    )
    assert result.output == f"Error: {expected}\n"
    # One that cannot be created (as root, where os.access allows anything; else a folder not writable):
    # the flag is named too.
    result = CliRunner().invoke(main, [*args, "/proc/curate-test/spill"])
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    why = r"(cannot create it \(.+\)|cannot write in /proc)"
    assert re.fullmatch(
        rf"Error: spill folder /proc/curate-test/spill: {why}; choose another --local-directory\n", result.output
    )


def test_output_folder_problems_name_the_fix(tmp_path):
    check_output(tmp_path / "new" / "out")  # to be created: fine
    assert not (tmp_path / "new").exists()  # a check creates nothing
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file, not a folder; -o names a folder"):
        check_output(tmp_path / "file" / "out")
    with pytest.raises(ValueError, match="give --overwrite or --resume, not both"):
        check_output(tmp_path / "out", overwrite=True, resume=True)
    (tmp_path / "run" / "_stages" / "read.tmp").mkdir(parents=True)
    check_output(tmp_path / "run")  # no stage finished: nothing to reuse, and a run replaces it
    (tmp_path / "run" / "_stages" / "read").mkdir()
    (tmp_path / "run" / "_stages" / "read" / "_marker.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"already holds _stages; pass --resume .* or --overwrite"):
        check_output(tmp_path / "run")
    check_output(tmp_path / "run", resume=True)
    check_output(tmp_path / "run", overwrite=True)
    (tmp_path / "run" / "summary.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"already holds summary.json, _stages;"):
        check_output(tmp_path / "run")
    shutil.rmtree(tmp_path / "run" / "_stages")  # a finished run: no stages to resume from
    with pytest.raises(FileExistsError, match=r"already holds summary.json: a finished run; pass --overwrite") as held:
        check_output(tmp_path / "run")
    assert "--resume" not in str(held.value)
    # --resume has nothing to reuse there: it would recompute the run and replace its outputs.
    # A run stopped (SIGKILL) while removing its stages is finished: its report is what may be missing.
    with pytest.raises(FileExistsError) as held:
        check_output(tmp_path / "run", resume=True)
    assert str(held.value) == (
        f"{tmp_path / 'run'} already holds summary.json: a finished run and no finished stages to reuse (a run that "
        "succeeds removes them; --keep-stages keeps them); its outputs are complete, and "
        f"`curate report {tmp_path / 'run'}` writes report.html; pass --overwrite to replace it"
    )
    (tmp_path / "run" / "report.html").write_text("")
    with pytest.raises(FileExistsError, match=r"keeps them\); pass --overwrite to replace it$"):
        check_output(tmp_path / "run", resume=True)
    check_output(tmp_path / "run", overwrite=True)
    check_output(tmp_path / "empty", resume=True)  # nothing there yet: a job script may always pass --resume


def test_a_folder_of_outputs_with_files_no_run_writes(tmp_path):
    # --overwrite deleted a user's file kept in OUT/deduplicated/, and the refusal before it
    # called outputs without summary.json "a finished run".
    (tmp_path / "out" / "deduplicated").mkdir(parents=True)
    (tmp_path / "out" / "deduplicated" / "part.00000.jsonl.gz").write_text("")
    with pytest.raises(
        FileExistsError,
        match=r"holds deduplicated: outputs of a run that did not finish \(no summary.json\); pass --overwrite",
    ):
        check_output(tmp_path / "out")
    check_output(tmp_path / "out", overwrite=True)
    (tmp_path / "out" / "deduplicated" / "mine.txt").write_text("keep")
    for flags in ({}, {"overwrite": True}, {"resume": True}):
        with pytest.raises(FileExistsError, match=r"deduplicated holds 1 file\(s\) no run writes, e.g. 'mine.txt'"):
            check_output(tmp_path / "out", **flags)
    assert (tmp_path / "out" / "deduplicated" / "mine.txt").read_text() == "keep"


def test_stages_folder_with_files_no_run_writes(tmp_path):
    # --overwrite (and a successful --resume) deleted OUT/_stages whole, a user's files in it too.
    stage = tmp_path / "out" / STAGES / "minhash+lsh"
    (stage / "edges").mkdir(parents=True)
    for name in ("_marker.json", "part.0.parquet", "edges/part.3.parquet"):
        (stage / name).write_text("")
    (tmp_path / "out" / STAGES / "read.tmp").mkdir()  # a killed run's stage
    check_output(tmp_path / "out", overwrite=True)
    for mine in ("notes.txt", "minhash+lsh/edges/mine/part.0.parquet", "read.tmp/mine.csv"):
        (tmp_path / "out" / STAGES / mine).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "out" / STAGES / mine).write_text("keep")
        for flags in ({}, {"overwrite": True}, {"resume": True}):
            with pytest.raises(
                FileExistsError, match=rf"_stages holds 1 file\(s\) no run writes, e.g. '{re.escape(mine)}'"
            ):
                check_output(tmp_path / "out", **flags)
        (tmp_path / "out" / STAGES / mine).unlink()


def test_output_and_inputs_kept_apart(tmp_path):
    data = write_jsonl(tmp_path / "in" / "a.jsonl", records(1))
    with pytest.raises(ValueError, match="output folder .*/in/out is inside the input folder .*; choose another -o"):
        check_output(tmp_path / "in" / "out", inputs=(str(tmp_path / "in"),), files=(str(data),))
    with pytest.raises(ValueError, match="input file .*a.jsonl is inside the output folder .*; choose another -o"):
        check_output(tmp_path, inputs=(str(data),), files=(str(data),))
    check_output(tmp_path / "out", inputs=(str(tmp_path / "in"),), files=(str(data),))
    # A glob that would list the run's outputs is refused as its folder is (a second run read the
    # first's deduplicated/ as input); names starting with _ or . are never listed, so such an OUT
    # inside the inputs is fine.
    for pattern in ("**/*.jsonl", "*/*/*.jsonl", "**/*.parquet", "**", "*/*.json"):  # *.json: summary.json
        with pytest.raises(ValueError, match=rf"inside the input pattern .*/in/{re.escape(pattern)}, so a later run"):
            check_output(tmp_path / "in" / "out", inputs=(str(tmp_path / "in" / pattern),), files=(str(data),))
    for local in (f"file://{tmp_path}/in", f"local://{tmp_path}/in/**/*.jsonl"):  # local folders too
        with pytest.raises(ValueError, match=rf"inside the input (folder|pattern) {re.escape(local)}, so a later run"):
            check_output(tmp_path / "in" / "out", inputs=(local,), files=(str(data),))
    (tmp_path / "t[1]").mkdir()  # the real folder's [ is no pattern
    (tmp_path / "link").symlink_to(tmp_path / "t[1]")
    with pytest.raises(ValueError, match=r"inside the input pattern .*/link/\*\*/\*\.jsonl, so a later run"):
        check_output(tmp_path / "link" / "out", inputs=(str(tmp_path / "link" / "**" / "*.jsonl"),), files=(str(data),))
    for pattern in ("*.jsonl", "*/*.jsonl", "out/*.jsonl"):  # none lists deduplicated/part.00000.jsonl
        check_output(tmp_path / "in" / "out", inputs=(str(tmp_path / "in" / pattern),), files=(str(data),))
    for inputs in ((str(tmp_path / "in"),), (str(tmp_path / "in" / "**"),)):
        check_output(tmp_path / "in" / "_out", inputs=inputs, files=(str(data),))


BUSY = """
import sys, time
from curate.checks import hold_output
with hold_output(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def held_elsewhere(tmp_path):
    """An output folder held by another process for the length of the test."""
    out = tmp_path / "busy"
    holder = subprocess.Popen([sys.executable, "-c", BUSY, str(out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    yield out
    holder.kill()
    holder.wait()


def test_one_run_per_output_folder(held_elsewhere, tmp_path):
    with pytest.raises(
        OutputBusyError,
        match="output folder .*busy is in use by another curate run; wait for it to end or choose another -o",
    ):
        with hold_output(held_elsewhere):
            pass
    with hold_output(tmp_path / "mine"), hold_output(tmp_path / "mine"):  # re-entrant in one process
        assert (tmp_path / "mine").is_dir()
    with hold_output(tmp_path / "mine"):  # and let go after
        pass


# -- the command line: < 2 s, <= 2 lines, nothing of Dask ------------------------------------------


def curate(*args, cwd=None) -> tuple[int, list[str], set[str]]:
    """Run ``curate ARGS`` in a new interpreter: exit status, stderr lines, and the modules it imported."""
    command = [sys.executable, "-X", "importtime", "-m", "curate", *map(str, args)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    lines = done.stderr.splitlines()
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:") and "|" in line}
    return done.returncode, [line for line in lines if not line.startswith("import time:")], imported


@pytest.mark.parametrize(
    "case, fix",
    [("no such input", "no such file or folder"), ("empty folder", "the folder holds no JSONL"),
     ("busy output", "choose another -o"), ("missing text field", "--text-field names the field that holds the text"),
     ("previous run", "a finished run; pass --overwrite to replace it"), ("bad value", "fuzzy.threshold"),
     ("config file", "see `curate config list`"), ("keep the text", "keep (--keep)='max:text' ranks documents by their text field"),
     ("keep a list", "field 'tags', which --keep orders, holds list<item: string>"),
     ("memory limit", "'0.5' is not a size: give bytes (e.g. 4GB), auto, or 0 for no limit (--memory-limit)"),
     ("empty memory limit", "'' is not a size: give bytes (e.g. 4GB), auto, or 0 for no limit (--memory-limit)"),
     ("small memory limit", "'300MB' is too small for a worker: one holds about 300 MB before any data"),
     ("dashboard address", "':abc' is not an address: give [HOST]:PORT, e.g. :8787 (--dashboard-address)"),
     ("latin-1 config", "latin1.yaml:2: not UTF-8 text (invalid continuation byte); save the file as UTF-8"),
     ("scheduler address", "'foo' is not an address: give [PROTOCOL://]HOST:PORT (PROTOCOL one of tcp, tls, ucx, ws, wss; an IPv6 HOST in brackets), the `Scheduler at:` line of its log (--scheduler-address)"),
     ("scheduler port", "'tcp://127.0.0.1:99999' is not an address: give [PROTOCOL://]HOST:PORT"),
     ("yaml error", 'bad.yaml: not valid YAML (while parsing a flow sequence in "'),
     ("many hashes", "fuzzy.num_perm: Input should be less than or equal to 10000 (--num-perm)"),
     ("many bands", "500 x 30 = 15000 MinHash values, more than 10,000; give fewer bands or rows"),
     ("wide shingles", "fuzzy.width: Input should be less than or equal to 2147483647 (--width)"),
     ("tiny blocksize", "64 bytes is too small a partition: give 4KB or more, with a unit (e.g. 64MB) (--blocksize)")],
)  # fmt: skip
def test_user_errors_stop_before_dask(case, fix, tmp_path, held_elsewhere):
    (tmp_path / "empty").mkdir()
    (tmp_path / "done" / "deduplicated").mkdir(parents=True)
    (tmp_path / "done" / "summary.json").write_text("{}")
    (tmp_path / "tagged.jsonl").write_text('{"id": 1, "text": "a", "tags": ["x"]}\n')
    (tmp_path / "bad.yaml").write_text("fuzzy:\n  threshold: [0.7\n")
    (tmp_path / "latin1.yaml").write_text("fuzzy:\n  threshold: 0.7 # café\n", encoding="latin-1")
    args = {
        "no such input": [tmp_path / "does" / "not" / "exist", "-o", tmp_path / "x"],
        "empty folder": [tmp_path / "empty", "-o", tmp_path / "x"],
        "busy output": [DOCS, "-o", held_elsewhere],
        "missing text field": [DOCS, "-o", tmp_path / "x", "--text-field", "body"],
        "previous run": [DOCS, "-o", tmp_path / "done"],
        "bad value": [DOCS, "-o", tmp_path / "x", "--threshold", "1.5"],
        "config file": [DOCS, "-o", tmp_path / "x", "--config", "no-such-config"],
        "keep the text": [DOCS, "-o", tmp_path / "x", "--keep", "max:text"],  # was a KeyError on the workers
        "keep a list": [tmp_path / "tagged.jsonl", "-o", tmp_path / "x", "--keep", "max:tags"],  # after Dask's import
        "memory limit": [DOCS, "-o", tmp_path / "x", "--memory-limit", "0.5"],  # 0 bytes: a stall after 300 s
        "empty memory limit": [DOCS, "-o", tmp_path / "x", "--memory-limit", ""],  # 1 byte: workers restarted for ever
        "small memory limit": [DOCS, "-o", tmp_path / "x", "--memory-limit", "300MB"],  # a stall after 300 s
        "dashboard address": [
            DOCS,
            "-o",
            tmp_path / "x",
            "--dashboard-address",
            ":abc",
        ],  # a traceback at cluster start
        "latin-1 config": [DOCS, "-o", tmp_path / "x", "--config", tmp_path / "latin1.yaml"],  # named no file
        "scheduler address": [DOCS, "-o", tmp_path / "x", "--scheduler-address", "foo"],  # distributed's words
        "scheduler port": [DOCS, "-o", tmp_path / "x", "--scheduler-address", "tcp://127.0.0.1:99999"],  # 30 s
        "yaml error": [DOCS, "-o", tmp_path / "x", "--config", tmp_path / "bad.yaml"],  # "<unicode string>", 5 lines
        "many hashes": [DOCS, "-o", tmp_path / "x", "--num-perm", "100000"],  # 95 s choosing bands, without a word
        "many bands": [DOCS, "-o", tmp_path / "x", "--num-bands", "500", "--rows-per-band", "30"],
        "wide shingles": [DOCS, "-o", tmp_path / "x", "--width", str(2**64)],  # numba's error, naming no flag
        "tiny blocksize": [DOCS, "-o", tmp_path / "x", "--blocksize", "64"],  # a partition per line: minutes
    }[case]
    status, stderr, imported = curate("dedup", *args)
    assert status != 0 and len(stderr) <= 2 and fix in " ".join(stderr), stderr
    assert not imported & {"distributed", "dask.dataframe", "pandas"}
    assert not (tmp_path / "x").exists()  # nothing created


def test_command_module_imports_nothing_heavy():
    status, stderr, imported = curate("--help")
    assert status == 0 and stderr == []
    # (dask itself comes with the config's byte sizes, dask.utils.parse_bytes: 0.15 s)
    assert not imported & {"distributed", "dask.dataframe", "pandas", "numba", "scipy", "matplotlib", "rich"}


# -- shipped configs -------------------------------------------------------------------------------


def test_shipped_configs_can_be_listed_shown_and_named(tmp_path):
    from click.testing import CliRunner

    from curate.cli import main
    from curate.config import RunConfig, load_config, shipped_configs

    assert list(shipped_configs()) == ["datatrove", "default", "nemo-curator", "threshold-0.7"]
    listed = CliRunner().invoke(main, ["config", "list"])
    assert listed.exit_code == 0 and listed.output.splitlines()[1].startswith("default ")
    # Each config's first sentence, whole, though its comment wraps over lines.
    assert listed.output.splitlines()[3] == "threshold-0.7    Near duplicates at Jaccard similarity 0.7 and above."
    shown = CliRunner().invoke(main, ["config", "show"])
    assert shown.exit_code == 0 and shown.output == shipped_configs()["default"].read_text()
    (tmp_path / "mine.yaml").write_text(shown.output)
    assert load_config(tmp_path / "mine.yaml") == load_config("default") == RunConfig()  # every key at its default
    assert load_config("threshold-0.7").fuzzy.threshold == 0.7
    # The peers' settings, for a migration (docs/quality.md's parameter sets).
    nemo, datatrove = load_config("nemo-curator").fuzzy, load_config("datatrove").fuzzy
    assert (nemo.ngram, nemo.width, nemo.num_perm, nemo.num_bands, nemo.rows_per_band) == ("char", 24, 260, 20, 13)
    assert (datatrove.ngram, datatrove.width, datatrove.num_bands, datatrove.rows_per_band) == ("word", 5, 14, 8)
    assert datatrove.hash_bits == 64 and datatrove.lowercase and datatrove.strip_punctuation and datatrove.strip_accents
    missing = CliRunner().invoke(main, ["config", "show", "nope"])
    assert (
        missing.exit_code == 2
        and "no shipped config 'nope'; there are datatrove, default, nemo-curator, threshold-0.7" in missing.output
    )
    (tmp_path / "list.yaml").write_text("- 1\n")
    bad = CliRunner().invoke(
        main, ["dedup", str(DOCS), "-o", str(tmp_path / "o"), "--config", str(tmp_path / "list.yaml")]
    )
    assert bad.exit_code == 2 and "a config file holds a mapping of keys" in bad.output
