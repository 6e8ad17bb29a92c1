import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import fsspec
import pandas as pd
import pytest
from click.testing import CliRunner
from fsspec.implementations.memory import MemoryFileSystem

from curate.checks import check_output
from curate.cli import _interrupted, main, print_summary
from curate.io.files import counted
from tests.conftest import FIXTURES


def test_cli_dedup_prints_summary_and_writes_outputs(tmp_path, joined):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "dedup",
            str(FIXTURES / "docs.jsonl"),
            "-o",
            str(out),
            *joined,
            "--output-format",
            "parquet",
            "--backend",
            "auto",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "documents kept" in result.output and "7" in result.output
    # `--backend auto` said what it chose only in summary.json (a new user's trial)
    assert "(backend cpu)" in " ".join(result.output.split())  # the title, wrapped with a long path
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["output"] == {"kept": 7, "removed": 5, "rejected": 0}
    assert summary["config"]["fuzzy"]["num_bands"] == 28 and summary["output_format"] == "parquet"
    # the finished stages go once the run succeeded (--keep-stages keeps them)
    assert sorted(p.name for p in out.iterdir()) == [
        "deduplicated",
        "duplicates.parquet",
        "removed.parquet",
        "summary.json",
    ]


def test_cli_reference_documents_are_kept_and_not_written(tmp_path, joined):
    # A corpus already published, given with --reference: its duplicates of one another stay
    # (a3, a4 of a1), the input's copies of it go (a12 of a1, a7 of a2), and only the input is
    # written. Given as inputs in front instead, a3 and a4 were removed (exit 0).
    lines = (FIXTURES / "docs.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "published.jsonl").write_text("".join(lines[:6]))
    (tmp_path / "new.jsonl").write_text("".join(lines[6:]))
    out = tmp_path / "out"
    args = ["dedup", str(tmp_path / "new.jsonl"), "--reference", str(tmp_path / "published.jsonl"), *joined]
    result = CliRunner().invoke(main, [*args, "-o", str(out), "--report"])
    assert result.exit_code == 0, result.output
    assert "reference documents (kept, not written)" in result.output
    page = (out / "report.html").read_text()
    shown = {key: int(value) for key, value in re.findall(r'data-count="(\w+)">(\d+)<', page)}
    assert (shown["documents_in"], shown["kept"], shown["reference"]) == (12, 3, 6)
    assert "50.0% of the input (the reference aside)" in page
    assert f"{tmp_path / 'published.jsonl'} (kept, not written)" in page  # the parameters: the reference apart
    assert "<th>kept (reference): a2</th>" in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["output"] == {"kept": 3, "removed": 3, "rejected": 0, "reference": 6}
    assert (summary["inputs"], summary["reference"]) == (
        [str(tmp_path / "new.jsonl")],
        [str(tmp_path / "published.jsonl")],
    )
    removed = pd.read_parquet(out / "removed.parquet")
    assert removed[["id", "representative"]].values.tolist() == [["a7", "a2"], ["a8", "a6"], ["a12", "a1"]]
    written = [json.loads(line)["id"] for line in (out / "deduplicated" / "part.00000.jsonl").read_text().splitlines()]
    assert written == ["a9", "a10", "a11"]
    # inspect counts the reference apart, and says an id found nowhere may be a reference document's
    shown = CliRunner().invoke(main, ["inspect", str(out), "--id", "a12"])
    said = " ".join(shown.output.split())  # wrapped at the terminal's width
    assert shown.exit_code == 0 and "12 documents in, 3 removed, 3 kept, 6 reference; showing 1" in said
    assert "kept (reference): a1" in said  # a1 is published: kept, and not in deduplicated/
    alone = CliRunner().invoke(main, ["inspect", str(out), "--id", "a5"])
    said = " ".join(alone.output.split())
    assert alone.exit_code == 1 and "or it is a reference document (--reference), in no duplicate group" in said
    # A path right after --reference's was read as INPUT: --reference a b deduplicated b as new data
    # and wrote it again (exit 0; a trial that followed the README's example).
    pub, new = str(tmp_path / "published.jsonl"), str(tmp_path / "new.jsonl")
    for given in (["--reference", pub, new], [f"--reference={pub}", new]):
        ambiguous = CliRunner().invoke(main, ["dedup", *given, "-o", str(tmp_path / "ambiguous")])
        assert ambiguous.exit_code == 2 and not (tmp_path / "ambiguous").exists()
        assert f"Error: {new!r} follows --reference {pub}: --reference names one path" in ambiguous.output
    # A missing reference was "input ... matches no JSONL or Parquet file"; a file reached both
    # ways through a link was read as the reference with a warning only.
    missing = CliRunner().invoke(main, ["dedup", new, "--reference", str(tmp_path / "none"), "-o", str(tmp_path / "m")])
    assert missing.exit_code == 1 and missing.output.startswith(f"Error: --reference: input {str(tmp_path / 'none')!r}")
    (tmp_path / "alias").symlink_to(tmp_path)
    linked = [str(tmp_path / "alias" / "published.jsonl"), "--reference", pub, "-o", str(tmp_path / "linked")]
    linked = CliRunner().invoke(main, ["dedup", new, *linked])
    assert linked.exit_code == 1 and "1 file named both as --reference and as input" in linked.output
    # A file named both ways is refused: which would it be?
    both = CliRunner().invoke(main, [*args, str(tmp_path / "published.jsonl"), "-o", str(tmp_path / "again")])
    assert both.exit_code == 1 and both.output == (
        f"Error: 1 file named both as --reference and as input: {tmp_path / 'published.jsonl'}; a reference "
        "document is kept and not written, an input's may be removed: name each file once\n"
    )


def test_cli_config_file_and_bad_values(tmp_path, joined):
    config = tmp_path / "c.yaml"
    config.write_text("mode: exact\nfuzzy:\n  threshold: 0.9\n")
    result = CliRunner().invoke(
        main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "o"), "--config", str(config), *joined]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["config"]["mode"] == "exact" and summary["config"]["fuzzy"]["threshold"] == 0.9
    fuzzy = summary["config"]["fuzzy"]  # bands and rows chosen for 0.9, as `curate params` shows
    assert (fuzzy["num_bands"], fuzzy["rows_per_band"], fuzzy["num_perm"]) == (17, 15, 260)
    assert summary["counts"]["output"]["removed"] == 3
    bad = CliRunner().invoke(
        main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "p"), "--threshold", "1.5"]
    )
    assert bad.exit_code == 2 and "threshold" in bad.output
    missing = CliRunner().invoke(main, ["dedup", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "q")])
    assert missing.exit_code == 1 and "matches no JSONL or Parquet file" in missing.output


def test_cli_dedup_band_flags_are_checked_before_running(tmp_path):
    docs = str(FIXTURES / "docs.jsonl")
    mismatch = CliRunner().invoke(
        main,
        ["dedup", docs, "-o", str(tmp_path / "a"), "--num-bands", "20", "--rows-per-band", "13", "--num-perm", "128"],
    )
    assert mismatch.exit_code == 2, mismatch.output
    assert (
        "fuzzy: num_bands (--num-bands) x rows_per_band (--rows-per-band) = 20 x 13 = 260 MinHash values, "
        "more than num_perm (--num-perm) 128" in mismatch.output
    )
    half = CliRunner().invoke(main, ["dedup", docs, "-o", str(tmp_path / "b"), "--num-bands", "20"])
    assert half.exit_code == 2
    assert "fuzzy: give both num_bands (--num-bands) and rows_per_band (--rows-per-band), or" in half.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_urls_the_run_cannot_use_are_one_line(tmp_path, monkeypatch):
    # -o s3://b/out wrote the local folder s3:/b/out and exited 0; an input of a protocol whose
    # package (gcsfs) is missing printed fsspec's 50-line traceback.
    monkeypatch.chdir(tmp_path)
    remote = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", "s3://bucket/out"])
    assert remote.exit_code == 1 and list(tmp_path.iterdir()) == []
    assert remote.output == (
        "Error: output s3://bucket/out is a URL: the output must be a local (or mounted) folder; copy it from there\n"
    )
    # A URL after a local path was looked for on the local disk ("matches no JSONL or Parquet file").
    mixed = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "memory://bucket/x.jsonl", "-o", "out"])
    assert mixed.exit_code == 1 and mixed.output == (
        "Error: the inputs lie on 2 file systems (local, memory): give one run the inputs of one, "
        "local files or URLs of one protocol\n"
    )
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed")
    missing = CliRunner().invoke(main, ["dedup", "gcs://bucket/crawl/*.jsonl", "-o", "out"])
    assert missing.exit_code == 1 and missing.output.startswith("Error: input 'gcs://bucket/crawl/*.jsonl': ")
    assert "gcsfs" in missing.output and len(missing.output.splitlines()) == 1, missing.output


class EndpointConnectionError(Exception):
    """botocore's error for an endpoint that does not answer (no OSError), as a stand-in."""


EndpointConnectionError.__module__ = "botocore.exceptions"


class Unreachable(MemoryFileSystem):
    """A remote file system whose storage does not answer (a wrong AWS_ENDPOINT_URL), or
    refuses its credentials (s3fs's PermissionError, which names no object)."""

    protocol = "unreachable"
    refused = False

    @classmethod
    def _strip_protocol(cls, path):
        return path.removeprefix("unreachable://").rstrip("/")

    def exists(self, path, **kwargs):  # as s3fs's: only a missing object is False
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        return True

    def info(self, path, **kwargs):
        if self.refused:
            raise PermissionError("Access Denied")
        raise EndpointConnectionError('Could not connect to the endpoint URL: "http://127.0.0.1:5999/corpus"')


def test_remote_storage_errors_are_one_line_naming_the_input(tmp_path, monkeypatch):
    # A wrong endpoint or no credentials printed botocore's 156-line traceback; s3fs's
    # "Access Denied" named no bucket or object (a trial against a local S3).
    fsspec.register_implementation("unreachable", Unreachable, clobber=True)
    url = "unreachable://corpus/gz/part-00000.jsonl"
    result = CliRunner().invoke(main, ["dedup", url, "-o", str(tmp_path / "out")])
    assert result.exit_code == 75 and result.output == (  # did not answer: the storage's, as a full disk
        f"Error: {url}: EndpointConnectionError: Could not connect to the endpoint URL: "
        '"http://127.0.0.1:5999/corpus"\n(the storage of the inputs did not answer, or refused the credentials: '
        "check its endpoint (AWS_ENDPOINT_URL for S3), the credentials and the network on this machine and "
        "every worker's)\n"
    )
    monkeypatch.setattr(Unreachable, "refused", True)
    result = CliRunner().invoke(main, ["dedup", url, "-o", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output == f"Error: {url}: Access Denied\n"
    # Raised where no URL is at hand (a worker's read): one line, and --resume once stages finished.
    (tmp_path / "out" / "_stages").mkdir(parents=True)

    def unreachable(*args, **kwargs):
        raise EndpointConnectionError('Could not connect to the endpoint URL: "http://127.0.0.1:5999/corpus/x"')

    monkeypatch.setattr("curate.cli._run", unreachable)
    result = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "out"), "--resume"])
    assert result.exit_code == 75 and result.output.startswith("Error: EndpointConnectionError: Could not connect")
    assert result.output.endswith(
        f"the stages that finished are kept in {tmp_path / 'out' / '_stages'}, and the same command with --resume "
        "goes on from them)\n"
    )


def test_cli_params_table():
    result = CliRunner().invoke(main, ["params", "--threshold", "0.8"])
    assert result.exit_code == 0, result.output
    # A user's trial: off the grid of similarities (0.82) no row gave P at the threshold itself; a
    # pair compared twice showed twice; more values than --num-perm holds looked usable.
    compared = CliRunner().invoke(main, ["params", "--threshold", "0.82", "--compare", "30x9", "--compare", "30x9"])
    lines = compared.output.splitlines()
    assert any("P(candidate) at 0.82" in line and "0.9786" in line and "0.9959" in line for line in lines)
    assert any("num_perm used" in line and "270 (> num_perm)" in line for line in lines)
    assert sum("30 x 9" in line for line in lines) == 2  # its column in each table, once
    assert "threshold 0.8, num_perm 260, weights FP 0.01 / FN 0.99" in result.output
    lines = result.output.splitlines()
    for name, value in [("bands x rows", "28 x 9"), ("num_perm used", "252"), ("false-positive area", "0.1478"),
                        ("false-negative area", "0.0003"), ("similarity at P = 0.5", "0.662"), ("(1/b)^(1/r)", "0.691"),
                        ("0.30", "5.5e-04"), ("0.80", "0.9823"), ("0.90", "1.0000")]:  # fmt: skip
        assert any(name in line and value in line for line in lines), (name, result.output)


def test_cli_params_json_compare_and_plot(tmp_path):
    plot = tmp_path / "s.png"
    args = [
        "params",
        "--threshold",
        "0.7",
        "--num-perm",
        "128",
        "--fp-weight",
        "0.5",
        "--fn-weight",
        "0.5",
        "--compare",
        "20x6",
        "--json",
        "--plot",
        str(plot),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {k: data[k] for k in ("threshold", "num_perm", "fp_weight", "fn_weight", "num_bands", "rows_per_band", "num_perm_used")} == {
        "threshold": 0.7, "num_perm": 128, "fp_weight": 0.5, "fn_weight": 0.5, "num_bands": 14, "rows_per_band": 9, "num_perm_used": 126
    }  # fmt: skip
    assert data["false_positive_area"] == pytest.approx(0.0346379298, abs=1e-10)  # closed form (test_params)
    assert data["candidate_probability"][4] == {
        "similarity": 0.7,
        "probability": pytest.approx(1 - (1 - 0.7**9) ** 14, rel=1e-15),
    }
    assert [(c["num_bands"], c["rows_per_band"], c["num_perm_used"]) for c in data["compare"]] == [(20, 6, 120)]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # A plot into a folder that does not exist was a 41-line traceback.
    result = CliRunner().invoke(main, ["params", "--threshold", "0.7", "--plot", str(tmp_path / "no" / "s.png")])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == (
        f"Error: Invalid value for --plot: cannot write {tmp_path / 'no' / 's.png'}: No such file or directory"
    ), result.output
    result = CliRunner().invoke(main, ["params", "--threshold", "0.7", "--plot", str(tmp_path / "s.txt")])
    assert (
        result.exit_code == 2 and "cannot write" in result.output and "Format 'txt' is not supported" in result.output
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # It told the user to "give num_bands and rows_per_band", which params has no flags for;
        # then refused 1.0, which dedup takes (a user's trial): at 1, one band of every value.
        (["--threshold", "1.01"], "Invalid value for '--threshold': 1.01 is not in the range 0<x<=1."),
        (["--threshold", "0"], "Invalid value for '--threshold': 0.0 is not in the range 0<x<=1."),
        (["--threshold", "0.8", "--num-perm", "0"], "num_perm: Input should be greater than or equal to 1"),
        (["--threshold", "0.8", "--fp-weight", "0", "--fn-weight", "0"], "not both zero"),
        # ZeroDivisionError in params; dedup chose 0 x 0 bands and removed no near duplicate
        (["--threshold", "0.8", "--fn-weight", "inf"], "fn_weight: Input should be a finite number (--fn-weight)"),
        (["--threshold", "nan"], "threshold: Input should be a finite number (--threshold)"),
        (["--threshold", "0.8", "--compare", "20y13"], "'20y13' is not BANDSxROWS"),
        ([], "Missing option '--threshold'"),
    ],
)
def test_cli_params_bad_arguments(args, message):
    result = CliRunner().invoke(main, ["params", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_setting_in_the_wrong_place_or_misspelt_says_where_it_goes(tmp_path):
    # It was "Extra inputs are not permitted" alone: a top-level threshold, fuzzy.treshold.
    (tmp_path / "bad.yaml").write_text("threshold: 0.7\nfuzzy:\n  treshold: 0.8\n  n_workers: 2\n")
    docs = str(FIXTURES / "docs.jsonl")
    result = CliRunner().invoke(
        main, ["dedup", docs, "-o", str(tmp_path / "o"), "--config", str(tmp_path / "bad.yaml")]
    )
    assert result.exit_code != 0
    for problem in ("fuzzy.treshold: not a setting; did you mean threshold?",
                    "fuzzy.n_workers: not a setting; it belongs under cluster: (--n-workers)",
                    "threshold: not a setting; it belongs under fuzzy: (--threshold)"):  # fmt: skip
        assert problem in result.output


def test_the_names_of_nemo_curator_and_datatrove_are_answered_with_curates(tmp_path):
    # --char-ngrams (NeMo Curator's shingle width) got "Did you mean --ngram?", the word/char
    # choice; char_ngrams in a config file "did you mean ngram?".
    # A tool's name mapped alone left its other settings behind: datatrove's n_grams as word
    # 5-grams without its normalisation and 64-bit hashes removed 91 of 20 Newsgroups' posts, not
    # 109; each answer names the shipped config that holds them all. use_64_bit_hash: false was
    # answered "--hash-bits 64".
    docs, out = str(FIXTURES / "docs.jsonl"), str(tmp_path / "o")
    nemo = "; all of NeMo Curator's MinHash settings: curate dedup --config nemo-curator)"
    for flag, message in [
        ("--char-ngrams", f"No such option '--char-ngrams' (char_ngrams in NeMo Curator is --width in curate{nemo}."),
        ("--num-buckets", "(num_buckets in NeMo Curator and datatrove is --num-bands in curate)"),
        ("--minhashes-per-band", f"(minhashes_per_band in NeMo Curator is --rows-per-band in curate{nemo}"),
        (
            "--n-grams",  # words, not characters
            "(n_grams in datatrove is --width with --ngram word in curate; "
            "all of datatrove's MinHash settings: curate dedup --config datatrove)",
        ),
        (
            "--use-64-bit-hash",
            f"(use_64_bit_hash in NeMo Curator is --hash-bits 64 in curate (--hash-bits 32 for false, the default){nemo}",
        ),
    ]:
        result = CliRunner().invoke(main, ["dedup", docs, "-o", out, flag, "24"])
        assert result.exit_code == 2 and message in result.output, result.output
    # params answers too (it said "Did you mean '--num-perm'?" for --num-buckets), naming dedup's
    # flags where it lacks them; inspect keeps click's message: its --width is the terminal's.
    result = CliRunner().invoke(main, ["params", "--jaccard-threshold", "0.8"])
    assert f"(jaccard_threshold in NeMo Curator is --threshold in curate{nemo}" in result.output, result.output
    result = CliRunner().invoke(main, ["params", "--threshold", "0.8", "--num-buckets", "20"])
    assert "(num_buckets in NeMo Curator and datatrove is --num-bands in curate dedup)" in result.output
    result = CliRunner().invoke(main, ["inspect", str(tmp_path), "--char-ngrams", "5"])
    assert "No such option '--char-ngrams'." in result.output and "NeMo" not in result.output, result.output
    (tmp_path / "c.yaml").write_text("fuzzy:\n  char_ngrams: 24\nn_grams: 5\n")
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--config", str(tmp_path / "c.yaml")])
    assert "fuzzy.char_ngrams: not a setting; char_ngrams in NeMo Curator is fuzzy.width in curate" in result.output
    assert (
        "n_grams: not a setting; n_grams in datatrove is fuzzy.width with fuzzy.ngram: word in curate; all of "
        "datatrove's MinHash settings: the shipped config datatrove (curate config show datatrove)" in result.output
    )


def test_a_rule_of_a_section_names_the_flags_of_its_keys(tmp_path):
    # "give both" named neither key nor flag (also test_cli_dedup_band_flags_are_checked_before_running).
    docs, out = str(FIXTURES / "docs.jsonl"), str(tmp_path / "o")
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--rows-per-band", "13"])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == (
        "Error: invalid configuration: fuzzy: give both num_bands (--num-bands) and rows_per_band "
        "(--rows-per-band), or neither to have them chosen for the threshold"
    ), result.output
    # A config's bands were blamed on flags not given (a user's trial); a key it leaves out is not its.
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--config", "nemo-curator", "--num-perm", "128"])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == (
        "Error: invalid configuration: fuzzy: num_bands (from --config nemo-curator; --num-bands) x rows_per_band "
        "(from --config nemo-curator; --rows-per-band) = 20 x 13 = 260 MinHash values, more than num_perm "
        "(--num-perm) 128; raise num_perm or leave it out"
    ), result.output
    (tmp_path / "rows.yaml").write_text("fuzzy:\n  rows_per_band: 13\n")
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--config", str(tmp_path / "rows.yaml")])
    assert result.output.splitlines()[-1] == (
        f"Error: invalid configuration: fuzzy: give both num_bands (--num-bands) and rows_per_band (from --config "
        f"{tmp_path / 'rows.yaml'}; --rows-per-band), or neither to have them chosen for the threshold"
    ), result.output
    # A flag written as a YAML key was "not a setting" with no hint; `id_field: null` was refused.
    (tmp_path / "c.yaml").write_text('io:\n  id_field: null\ncluster:\n  gpu:\n    cuda_visible_devices: "0"\n')
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--config", str(tmp_path / "c.yaml")])
    assert result.output.splitlines()[-1] == (
        "Error: invalid configuration: cluster.gpu.cuda_visible_devices: not a setting; "
        "the flag --cuda-visible-devices is cluster.gpu.devices in a config file"
    ), result.output
    # A GPU setting one level up, or spelt with hyphens, had no hint.
    (tmp_path / "c.yaml").write_text("cluster:\n  rmm_pool_size: 1GB\n  gpu:\n    rmm-pool-size: 1GB\n")
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--config", str(tmp_path / "c.yaml")])
    assert "cluster.gpu.rmm-pool-size: not a setting; did you mean rmm_pool_size?" in result.output
    assert "cluster.rmm_pool_size: not a setting; it belongs under cluster.gpu: (--rmm-pool-size)" in result.output
    from curate.config import load_config

    (tmp_path / "c.yaml").write_text("io:\n  id_field: null\n")
    assert not load_config(tmp_path / "c.yaml").io.id_field_given


def test_fuzzy_settings_with_mode_exact_are_named_not_ignored(tmp_path, monkeypatch):
    # --mode exact --threshold 0.5 ran without a word: one could believe near duplicates were
    # looked for. The Python API's keywords likewise.
    import warnings

    import dask.dataframe as dd
    import pandas as pd

    import curate
    import curate.cli
    from curate.config import load_config

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(curate.cli, "_run", interrupted)
    docs, out = str(FIXTURES / "docs.jsonl"), str(tmp_path / "o")
    result = CliRunner().invoke(
        main, ["dedup", docs, "-o", out, "--mode", "exact", "--threshold", "0.5", "--no-verify"]
    )
    assert result.output.splitlines()[0] == (
        "warning: --threshold, --no-verify configure fuzzy dedup, which --mode exact does not run"
    ), result.output
    # A config file's fuzzy settings too (--mode exact --config nemo-curator said nothing); those
    # at their defaults (a `curate config show` copy) configure nothing.
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--mode", "exact", "--config", "nemo-curator"])
    assert result.output.splitlines()[0] == (
        "warning: the config's fuzzy.num_bands, fuzzy.rows_per_band configure fuzzy dedup, which --mode exact does not run"
    ), result.output
    result = CliRunner().invoke(main, ["config", "show"])
    (tmp_path / "all.yaml").write_text(result.output.replace("mode: both", "mode: exact", 1))
    assert "mode: exact" in (tmp_path / "all.yaml").read_text()
    (tmp_path / "mine.yaml").write_text("mode: exact\nfuzzy:\n  width: 10\n")
    result = CliRunner().invoke(
        main, ["dedup", docs, "-o", out, "--config", str(tmp_path / "mine.yaml"), "--threshold", "0.5"]
    )
    assert result.output.splitlines()[0] == (
        "warning: --threshold and the config's fuzzy.width configure fuzzy dedup, which the config's mode exact "
        "does not run"
    ), result.output
    for args in (["--mode", "exact"], ["--threshold", "0.5"], ["--config", str(tmp_path / "all.yaml")]):
        assert "warning" not in CliRunner().invoke(main, ["dedup", docs, "-o", out, *args]).output  # none unused
    frame = dd.from_pandas(pd.DataFrame({"text": ["a b c", "d e f"]}), npartitions=1)
    with pytest.warns(
        UserWarning, match=r"^threshold=, ngram= configure fuzzy dedup, which mode='exact' does not run$"
    ):
        curate.deduplicate(frame, mode="exact", threshold=0.5, ngram="word")
    with pytest.warns(
        UserWarning,
        match=r"^threshold= and config's fuzzy.num_bands, fuzzy.rows_per_band configure fuzzy dedup, which mode='exact'",
    ):
        curate.deduplicate(frame, mode="exact", threshold=0.5, config=load_config("nemo-curator"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        curate.deduplicate(frame, mode="exact", keep="longest")


def test_gpu_settings_on_the_cpu_are_named_not_ignored(tmp_path, monkeypatch):
    # --rmm-pool-size and the other GPU cluster settings were ignored without a word on the CPU.
    import curate.cli

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(curate.cli, "_run", interrupted)
    docs, out = str(FIXTURES / "docs.jsonl"), str(tmp_path / "o")
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out, "--rmm-pool-size", "1GB", "--protocol", "ucx"])
    assert result.output.splitlines()[0] == (
        "warning: cluster.gpu.rmm_pool_size (--rmm-pool-size), cluster.gpu.protocol (--protocol) configure "
        "the GPU cluster, which this run does not start (--backend cpu)"
    ), result.output
    result = CliRunner().invoke(
        main, ["dedup", docs, "-o", out, "--disable-cudf-spill"]
    )  # the flag given, not its pair
    assert result.output.startswith("warning: cluster.gpu.enable_cudf_spill (--disable-cudf-spill) configures"), (
        result.output
    )
    result = CliRunner().invoke(main, ["dedup", docs, "-o", out])
    assert "warning" not in result.output, result.output


def test_an_input_file_changed_during_the_run_is_named(tmp_path, monkeypatch):
    # A file truncated while the run read it stopped it with "document numbers must be in
    # [0, 6254)", or an AccountingError traceback, naming no file.
    import contextlib

    import curate.cluster
    import curate.pipeline

    path = tmp_path / "in.jsonl"
    path.write_bytes((FIXTURES / "docs.jsonl").read_bytes())

    def rewritten_meanwhile(*args, **kwargs):  # the read pass, as the file is cut short
        path.write_bytes(path.read_bytes()[:100])
        raise ValueError("document numbers must be in [0, 6254)")

    monkeypatch.setattr(curate.pipeline, "_read", rewritten_meanwhile)
    monkeypatch.setattr(curate.cluster, "connect", lambda *args, **kwargs: contextlib.nullcontext())
    result = CliRunner().invoke(main, ["dedup", str(path), "-o", str(tmp_path / "out"), "--no-progress"])
    assert result.exit_code == 1
    assert f"input file {path} changed during the run" in result.output
    assert "(ValueError: document numbers must be in [0, 6254))" in result.output


def test_ctrl_c_before_any_stage_finished_says_how_to_start_over(tmp_path):
    # It said "run the same command with --resume to continue" where nothing could be resumed,
    # and a stage under way (OUT/_stages/read.tmp) made the same command refuse OUT.
    out = tmp_path / "out"
    start_over = "interrupted: no stage had finished; run the same command again to start over"
    assert _interrupted(out, False) == start_over
    (out / "_stages" / "read.tmp").mkdir(parents=True)  # a stage was under way: OUT holds _stages
    (out / "_stages" / "read.tmp" / "part.0.parquet").write_bytes(b"")
    assert _interrupted(out, False) == _interrupted(out, True) == start_over
    check_output(out)  # the same command takes OUT again
    (out / "_stages" / "read").mkdir()
    (out / "_stages" / "read" / "_marker.json").write_text("{}")
    (out / "_stages" / "read.tmp" / "_marker.json").write_text("{}")  # killed while publishing: not a stage
    assert _interrupted(out, False) == (
        f"interrupted: finished stages read are kept in {out / '_stages'}; run the same command with --resume to continue"
    )
    with pytest.raises(FileExistsError, match="already holds _stages; pass --resume"):
        check_output(out)


def _dedup_running(run_body: str, out: Path):
    """``curate dedup`` in a fresh process, its run replaced by ``run_body`` (the body of
    ``run(inputs, out, *args)``, indented by four spaces): the finished process."""
    script = (
        "import os, signal, time, sys\n"
        "import curate.cli\n"
        "def run(inputs, out, *args):\n" + run_body + "curate.cli._run = run\n"
        "curate.cli.main(sys.argv[1:])\n"
    )
    args = ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(out), "--no-progress"]
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path):
    # SIGTERM (kill, timeout, SLURM's time limit) ended the process at once: exit 143 with no
    # word of --resume, only multiprocessing's "leaked semaphore" warnings.
    out = tmp_path / "out"
    done = _dedup_running(
        "    os.makedirs(f'{out}/_stages/read', exist_ok=True)\n"
        "    open(f'{out}/_stages/read/_marker.json', 'w').write('{}')\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n",
        out,
    )
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"terminated (SIGTERM): finished stages read are kept in {out / '_stages'}; "
        "run the same command with --resume to continue"
    )


@pytest.mark.parametrize("fails", [False, True])
def test_a_sigterm_in_the_process_clean_up_keeps_the_runs_exit_status(tmp_path, fails):
    # A SIGTERM right after the summary was printed (outputs complete) gave 143 (a trial's, once).
    out = tmp_path / "out"
    script = (
        "import atexit, os, signal, sys, time\n"
        "import curate.cli\n"
        "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(30)))\n"
        "sys.argv = ['curate', *sys.argv[1:]]\n"
        "curate.cli.console()\n"
    )
    docs = str(tmp_path / "none.jsonl") if fails else str(FIXTURES / "docs.jsonl")
    args = ["dedup", docs, "-o", str(out), "--no-progress"]
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == (1 if fails else 0), done.stderr
    assert (out / "summary.json").exists() != fails


def test_sigterm_while_the_report_is_written_says_the_outputs_are_complete(tmp_path):
    # The run's SIGTERM handler was gone once its outputs were written: a SIGTERM while the report
    # was written ended the process with no word (a trial's 4 of 4), report.html missing.
    out = tmp_path / "out"
    script = (
        "import os, signal, sys, time\n"
        "import curate.cli, curate.review.report\n"
        "def write_report(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
        "curate.review.report.write_report = write_report\n"
        "curate.cli.main(sys.argv[1:])\n"
    )
    args = ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(out), "--no-progress", "--report"]
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 143, done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"terminated (SIGTERM) after the run had finished: {out} holds its outputs; "
        f"`curate report {out}` writes report.html"
    )
    assert (out / "summary.json").exists() and not (out / "report.html").exists()


def test_a_second_sigterm_does_not_interrupt_the_first_ones_clean_up(tmp_path):
    # GNU timeout sends SIGTERM to the command and to its process group: the second, raised inside
    # the first's unwinding (threading.Condition.wait restoring its lock), ended a run with
    # "RuntimeError: release unlocked lock" and exit status 1 (2 of 17 trial runs).
    done = _dedup_running(
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(30)\n"
        "    finally:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(0.5)\n"
        "        open(f'{out}.cleaned', 'w').close()\n",
        tmp_path / "out",
    )
    assert done.returncode == 143, done.stderr
    assert (tmp_path / "out.cleaned").exists()  # the clean-up ran to its end
    assert done.stderr.splitlines()[-1].startswith("terminated (SIGTERM)") and "Traceback" not in done.stderr


def test_dask_loggers_with_levels_of_their_own_are_quieted_too():
    # distributed's config sets tornado.application to ERROR, below its parent's CRITICAL: a
    # SIGTERM landing before distributed's sync() had its future printed "error: Exception in
    # callback ... NameError: cannot access free variable 'future'" above the one line (3 of 17).
    import subprocess
    import sys

    script = (
        "import logging, sys\n"
        "import distributed\n"
        "from curate.cli import _quiet_dask\n"
        "logging.basicConfig(stream=sys.stderr, level=logging.WARNING)\n"
        "_quiet_dask(sys.argv[1] == 'verbose')\n"
        "for name in ('tornado.application', 'tornado', 'asyncio', 'distributed.client', 'distributed'):\n"
        "    logging.getLogger(name).error('from %s', name)\n"
    )
    quiet, verbose = (
        subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=60).stderr
        for mode in ("quiet", "verbose")
    )
    assert quiet == ""
    assert "from tornado.application" in verbose and "from distributed.client" in verbose


def test_logged_warnings_read_as_the_commands_own(tmp_path):
    # "WARNING curate.pipeline: num_bands x rows_per_band ..." beside "warning: --threshold
    # configures fuzzy dedup ...": two styles, one with a module name a user has no use for.
    import subprocess
    import sys

    script = (
        "import logging, sys\n"
        "import curate.cli\n"
        "def run(*args):\n"
        "    logging.getLogger('curate.pipeline').warning('the bands are weak')\n"
        "    sys.exit(3)\n"
        "curate.cli._run = run\n"
        "curate.cli.main(sys.argv[1:])\n"
    )
    args = ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "out"), "--no-progress"]
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (3, "warning: the bands are weak\n")
    # ... and under -v, among the timed info lines, it had no mark at all
    done = subprocess.run([sys.executable, "-c", script, *args, "-v"], capture_output=True, text=True, timeout=120)
    assert re.fullmatch(r"\d\d:\d\d:\d\d curate.pipeline: warning: the bands are weak\n", done.stderr), done.stderr


@pytest.mark.parametrize("when", ["cluster closing", "table", "report"])
def test_ctrl_c_after_the_outputs_are_written_leaves_the_run_finished(tmp_path, joined, monkeypatch, when):
    # A Ctrl-C as the cluster closed said "no stage had finished; run the same command again to
    # start over" (which then refused OUT: it held a finished run), exit 130; during --report it
    # was click's "Aborted!", exit 1, with no word of how to write the report.
    import contextlib

    import curate.cli
    import curate.cluster
    import curate.review.report

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if when == "cluster closing":
        connect = curate.cluster.connect

        @contextlib.contextmanager
        def closing_interrupted(*args, **kwargs):
            with connect(*args, **kwargs) as client:
                yield client
            raise KeyboardInterrupt

        monkeypatch.setattr(curate.cluster, "connect", closing_interrupted)
    else:
        target = (curate.cli, "print_summary") if when == "table" else (curate.review.report, "write_report")
        monkeypatch.setattr(*target, interrupt)
    out = tmp_path / "out"
    report = [] if when == "table" else ["--report"]
    result = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(out), *joined, *report])
    assert json.loads((out / "summary.json").read_text())["counts"]["output"]["kept"] == 7
    assert "no stage had finished" not in result.output and "Aborted" not in result.output
    if when == "cluster closing":  # the table and the report as after any run
        assert result.exit_code == 0 and "documents kept" in result.output and (out / "report.html").exists()
        return
    finished = f"interrupted after the run had finished: {out} holds its outputs"
    assert result.output.splitlines()[-1] == (
        finished if when == "table" else f"{finished}; `curate report {out}` writes report.html"
    )
    assert result.exit_code == (0 if when == "table" else 130)


def test_a_ctrl_c_counts_a_run_finished_only_by_its_own_summary(tmp_path):
    # With --overwrite, a previous run's summary.json stays until the new run ends: a Ctrl-C
    # before that is an interrupted run; after this run wrote its own, the run is finished and
    # the stages it had yet to remove go.
    from curate.cli import _finished_run

    out = tmp_path / "out"
    (out / "_stages" / "read").mkdir(parents=True)
    (out / "_stages" / "read" / "_marker.json").write_text("{}")
    (out / "summary.json").write_text('{"counts": {}}')
    written = (out / "summary.json").stat().st_mtime
    assert _finished_run(out, written + 1, keep_stages=False) is None and (out / "_stages").exists()
    assert _finished_run(out, written, keep_stages=True) == {"counts": {}} and (out / "_stages").exists()
    assert _finished_run(out, written, keep_stages=False) == {"counts": {}} and not (out / "_stages").exists()
    assert _finished_run(tmp_path / "none", 0, keep_stages=False) is None


def test_the_summary_counts_groups_in_english():
    # It printed "1 (1 groups)".
    assert [counted(n, "group") for n in (0, 1, 2, 1234)] == ["0 groups", "1 group", "2 groups", "1,234 groups"]


def test_an_empty_field_name_is_refused(tmp_path):
    # --id-field '' took the input's "" key as ids while the kept lines got assigned ids: the
    # representatives named in removed.parquet were no kept line's.
    docs, out = str(FIXTURES / "docs.jsonl"), str(tmp_path / "o")
    for flag in ("--id-field", "--text-field"):
        result = CliRunner().invoke(main, ["dedup", docs, "-o", out, flag, ""])
        name = flag[2:].replace("-", "_")
        assert result.exit_code == 2 and result.output.splitlines()[-1] == (
            f"Error: invalid configuration: io.{name}: String should have at least 1 character ({flag})"
        )


def test_cli_identify_only_then_report(tmp_path, joined):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(out), *joined, "--identify-only"]
    )
    assert result.exit_code == 0, result.output
    assert "documents kept (not written: --identify-only)" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["duplicates.parquet", "removed.parquet", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["output"] == {"kept": 7, "removed": 5, "rejected": 0}
    assert summary["config"]["io"]["identify_only"] is True and summary["output_format"] is None
    result = CliRunner().invoke(main, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert "<td>io.identify_only</td><td>True</td>" in (out / "report.html").read_text()
    assert "io.output_format" not in (out / "report.html").read_text()


def test_a_run_stopped_by_its_cluster_or_storage_exits_75_not_1(tmp_path, monkeypatch):
    # Every failure exited 1: a batch script told a full disk or workers dead out of memory
    # (mend, run again with --resume) from a bad record only by the words of the Error line.
    from curate.cluster import ClusterError
    from curate.io.records import BadRecordError

    errors = {
        ClusterError("workers died 5 times (...)"): 75,
        ClusterError("no progress for 300 s: ..."): 75,
        OSError(28, "No space left on device"): 75,
        OSError(27, "File too large"): 75,
        ConnectionResetError(104, "Connection reset by peer"): 75,
        BadRecordError("in.jsonl:2: invalid JSON"): 1,
        FileNotFoundError(2, "No such file or directory", "in.jsonl"): 1,
        ValueError("keep policy max:year names column 'year', not in the input"): 1,
    }
    for err, status in errors.items():

        def failing(*args, err=err):
            raise err

        monkeypatch.setattr("curate.cli._run", failing)
        result = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "out")])
        assert (result.exit_code, result.output.startswith("Error: ")) == (status, True), (err, result.output)


def test_a_character_the_output_cannot_encode_is_written_escaped(monkeypatch):
    # Under PYTHONIOENCODING=ascii a run whose outputs were all written exited 1
    # (UnicodeEncodeError from rich) as its summary named the output folder "asc ☃".
    import io

    from curate.cli import tolerant_streams

    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", ascii_out)
    tolerant_streams()
    summary = {
        "counts": {"input": {"documents": 2, "empty": 0}, "output": {"kept": 2}},
        "config": {"backend": "cpu"},
        **{"output_format": "jsonl", "reused_stages": [], "seconds": {"total": 1.0}},
        **{"peak_rss_bytes": {"total": 1e9}, "spilled_bytes": 0},
    }
    print_summary(summary, "loc/asc ☃")
    ascii_out.flush()
    assert "curate dedup -> loc/asc \\u2603 (backend" in ascii_out.buffer.getvalue().decode("ascii")


def test_the_summary_keeps_a_row_to_a_line_in_a_log(capsys, monkeypatch):
    # Redirected to a file, rich assumed 80 columns: rows wrapped ("... / 3,642" then "edges"),
    # and a script reading the log found half a row.
    monkeypatch.delenv("COLUMNS", raising=False)
    summary = {
        "counts": {
            "input": {"documents": 33715, "empty": 0},
            "exact": {"removed": 3222, "groups": 3031},
            "fuzzy": {
                "candidate_edges": 10890,
                "member_pairs": 7354,
                "verified_edges": 3642,
                "removed": 1886,
                "groups": 1106,
            },
            "output": {"kept": 28607},
        },
        "config": {"fuzzy": {"verify": True}, "backend": "cpu"},
        "output_format": None,
        "reused_stages": [],
        "seconds": {"total": 13.1},
        "peak_rss_bytes": {"total": 1.26e9},
        "spilled_bytes": 0,
    }
    print_summary(summary, "/a/long/path/to/the/output/folder/of/an/enron_spam/run")
    lines = capsys.readouterr().out.splitlines()
    assert any(
        "fuzzy candidates / verified" in line and "10,890 + 7,354 member pairs / 3,642 edges" in line for line in lines
    )
    assert any("documents kept (not written: --identify-only)" in line and "28,607" in line for line in lines)
    assert not any("input kept in memory" in line for line in lines)  # summaries before it, and runs without it
    assert not any("fuzzy settings" in line for line in lines)  # summaries before it
    settings = {"threshold": 0.7, "ngram": "word", "width": 5, "num_bands": 39, "rows_per_band": 6, "verify": True}
    print_summary(summary | {"config": {"fuzzy": settings, "backend": "cpu"}}, "out")
    assert any(
        "fuzzy settings" in line and "Jaccard >= 0.7, 5-word shingles, 39 x 6 bands" in line
        for line in capsys.readouterr().out.splitlines()
    )
    # Hash bits and seed where not the defaults: --config datatrove's 64 bits, a run of seed 7.
    print_summary(summary | {"config": {"fuzzy": settings | {"hash_bits": 64, "seed": 7}, "backend": "cpu"}}, "out")
    assert any("MinHash" in line and "64-bit, seed 7" in line for line in capsys.readouterr().out.splitlines())
    print_summary(summary | {"config": {"fuzzy": settings | {"hash_bits": 32, "seed": 42}, "backend": "cpu"}}, "out")
    assert not any("MinHash" in line for line in capsys.readouterr().out.splitlines())
    # Normalisation named by its flags: runs that differed only there looked alike.
    datatrove = settings | {"lowercase": True, "strip_punctuation": True, "collapse_whitespace": True}
    print_summary(summary | {"config": {"fuzzy": datatrove, "backend": "cpu"}}, "out")
    rows = [line.split("│")[1:3] for line in capsys.readouterr().out.splitlines() if "normalised" in line]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["text normalised by", "--lowercase --collapse-whitespace --strip-punctuation"]
    ]
    print_summary(summary | {"workers_left": ["tcp://a:1", "tcp://b:2"]}, "out")
    assert any(
        "workers lost or restarted" in line and "2 (their tasks were run again)" in line
        for line in capsys.readouterr().out.splitlines()
    )
    print_summary(summary | {"cache_input": True}, "out")
    assert any(
        "input kept in memory" in line and "yes (--no-cache-input: read again)" in line
        for line in capsys.readouterr().out.splitlines()
    )
    # ... and a run resumed late in its stages named them all on one line: 150 columns.
    stages = ["read", "exact", "minhash+lsh", "select", "verify", "member_pairs", "verify_members", "components"]
    print_summary(summary | {"reused_stages": stages + ["groups", "removed", "duplicates"]}, "out")
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 112 and all(any(stage in line for line in lines) for stage in stages), lines
    assert any("10,890 + 7,354 member pairs / 3,642 edges" in line for line in lines)
