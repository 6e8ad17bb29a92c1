"""`curate dedup`'s options are the config's keys (curate.cli_options.config_options): one place to add a key."""

from curate.cli import dedup
from curate.cli_options import SECTIONS, overrides
from curate.config import RunConfig, config_data


def _leaves(data: dict, path: tuple[str, ...] = ()):
    for key, value in data.items():
        yield from _leaves(value, (*path, key)) if isinstance(value, dict) else [(key, path)]


def test_every_config_key_is_an_option_of_its_section():
    keys = dict(_leaves(RunConfig().model_dump()))
    params = {p.name for p in dedup.params}
    assert set(keys) <= params, set(keys) - params
    assert {name: SECTIONS[name] for name in keys} == keys


def test_options_reach_their_config_keys():
    args = ["in.jsonl", "-o", "out", "--max-member-pairs", "5", "--hash-bits", "64", "--cuda-visible-devices", "0,1",
            "--no-verify", "--protocol", "ucxx", "--on-error", "skip", "--keep", "longest"]  # fmt: skip
    params = dedup.make_context("dedup", args).params
    config = RunConfig.model_validate(config_data(None, overrides({k: v for k, v in params.items() if k in SECTIONS})))
    assert (config.fuzzy.max_member_pairs, config.fuzzy.hash_bits, config.fuzzy.verify) == (5, 64, False)
    assert (config.cluster.gpu.devices, config.cluster.gpu.protocol, config.io.on_error, config.keep) == (
        "0,1",
        "ucx",
        "skip",
        "longest",
    )
    assert config.fuzzy.threshold == RunConfig().fuzzy.threshold  # not given: the default
