import json

from click.testing import CliRunner

from curate.cli import main
from tests.conftest import FIXTURES


def test_cli_dedup_prints_summary_and_writes_outputs(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(out), "--n-workers", "1", "--threads-per-worker", "2", "--output-format", "parquet"]
    )
    assert result.exit_code == 0, result.output
    assert "documents kept" in result.output and "7" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["output"] == {"kept": 7, "removed": 5, "rejected": 0}
    assert summary["config"]["fuzzy"]["num_bands"] == 20 and summary["output_format"] == "parquet"
    assert sorted(p.name for p in out.iterdir()) == ["_stages", "deduplicated", "duplicates.parquet", "removed.parquet", "summary.json"]


def test_cli_config_file_and_bad_values(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("mode: exact\nfuzzy:\n  threshold: 0.9\n")
    result = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "o"), "--config", str(config), "--n-workers", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["config"]["mode"] == "exact" and summary["config"]["fuzzy"]["threshold"] == 0.9
    assert summary["counts"]["output"]["removed"] == 3
    bad = CliRunner().invoke(main, ["dedup", str(FIXTURES / "docs.jsonl"), "-o", str(tmp_path / "p"), "--threshold", "1.5"])
    assert bad.exit_code == 2 and "threshold" in bad.output
    missing = CliRunner().invoke(main, ["dedup", str(tmp_path / "none.jsonl"), "-o", str(tmp_path / "q")])
    assert missing.exit_code == 1 and "matches no JSONL or Parquet file" in missing.output
