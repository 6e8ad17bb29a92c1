import re
import struct
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError
from scipy.special import beta, betainc

import curate
from curate.config import FuzzyConfig, load_config
from curate.params import (
    SIMILARITIES,
    approximate_threshold,
    candidate_probability,
    describe_bands,
    false_negative_area,
    false_positive_area,
    optimal_bands,
    s_curve_plot,
    similarity_at,
)
from curate.pipeline import dedup
from tests.conftest import FIXTURES

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_candidate_probability_scalar_and_array():
    assert candidate_probability(0.8, 20, 13) == 1 - (1 - 0.8**13) ** 20
    assert candidate_probability(0.8, 20, 13) == pytest.approx(
        0.6772541928777576, rel=1e-14
    )  # exact rational arithmetic
    s = np.array([[0.0, 0.5], [0.9, 1.0]])
    p = candidate_probability(s, 2, 1)
    assert p.shape == (2, 2) and p.dtype == np.float64
    np.testing.assert_allclose(p, 2 * s - s**2, rtol=0, atol=1e-15)  # 1 - (1 - s)^2


@pytest.mark.parametrize("t", [0.1, 0.5, 0.8, 0.95])
def test_areas_match_closed_forms(t):
    # b = r = 1: P(s) = s
    assert false_positive_area(t, 1, 1) == pytest.approx(t**2 / 2, rel=1e-12)
    assert false_negative_area(t, 1, 1) == pytest.approx((1 - t) ** 2 / 2, rel=1e-12)
    # b = 1: P(s) = s^r
    assert false_positive_area(t, 1, 3) == pytest.approx(t**4 / 4, rel=1e-12)
    # any b, r: integral_0^t (1 - s^r)^b ds = B(1/r, b+1) I_{t^r}(1/r, b+1) / r  (u = s^r)
    for b, r in [(20, 13), (17, 15), (5, 2)]:
        full = beta(1 / r, b + 1) / r
        below = full * betainc(1 / r, b + 1, t**r)
        assert false_positive_area(t, b, r) == pytest.approx(t - below, rel=1e-8, abs=1e-14)
        assert false_negative_area(t, b, r) == pytest.approx(full - below, rel=1e-8, abs=1e-14)


def test_areas_of_the_default_choice():
    assert false_positive_area(0.8, 20, 13) == pytest.approx(0.04901949068693147, rel=1e-9)
    assert false_negative_area(0.8, 20, 13) == pytest.approx(0.010721336607959668, rel=1e-9)


# datasketch 1.x datasketch.lsh._optimal_param(threshold, num_perm, fp_weight, fn_weight),
# computed once (tests do not need datasketch) for weights (0.5, 0.5), (0.3, 0.7), (0.9, 0.1).
# Left out: num_perm 2 at threshold 0.5 (an exact three-way tie that quadrature rounding
# decides) and the one-sided weights (1, 0) and (0, 1), where every area near zero is
# quadrature noise; curate matches datasketch there too, but pinning noise is no test.
DATASKETCH = [
    (0.05, 1, [(1, 1), (1, 1), (1, 1)]),
    (0.05, 16, [(16, 1), (16, 1), (9, 1)]),
    (0.05, 128, [(32, 1), (47, 1), (64, 2)]),
    (0.05, 260, [(32, 1), (47, 1), (116, 2)]),
    (0.3, 16, [(8, 2), (6, 1), (5, 3)]),
    (0.3, 128, [(37, 3), (42, 3), (25, 5)]),
    (0.3, 260, [(65, 4), (59, 3), (52, 5)]),
    (0.5, 16, [(5, 3), (6, 2), (3, 5)]),
    (0.5, 128, [(25, 5), (25, 5), (16, 8)]),
    (0.5, 260, [(43, 6), (45, 5), (32, 8)]),
    (0.7, 2, [(1, 2), (1, 2), (1, 2)]),
    (0.7, 16, [(3, 5), (4, 4), (2, 8)]),
    (0.7, 128, [(14, 9), (16, 8), (9, 14)]),
    (0.7, 260, [(26, 10), (28, 9), (17, 15)]),
    (0.8, 16, [(2, 8), (3, 5), (1, 16)]),
    (0.8, 128, [(9, 13), (11, 11), (6, 21)]),
    (0.8, 260, [(17, 15), (20, 13), (11, 23)]),
    (0.9, 16, [(1, 15), (2, 8), (1, 16)]),
    (0.9, 128, [(5, 25), (6, 20), (3, 42)]),
    (0.9, 260, [(9, 28), (11, 23), (6, 43)]),
    (0.99, 16, [(1, 16), (1, 16), (1, 16)]),
    (0.99, 128, [(1, 128), (1, 108), (1, 128)]),
    (0.99, 260, [(2, 130), (2, 130), (1, 260)]),
]


@pytest.mark.parametrize(("threshold", "num_perm", "expected"), DATASKETCH)
def test_optimal_bands_matches_datasketch(threshold, num_perm, expected):
    weights = [(0.5, 0.5), (0.3, 0.7), (0.9, 0.1)]
    got = [optimal_bands(threshold, num_perm, fp, fn) for fp, fn in weights]
    assert got == expected
    assert all(b * r <= num_perm for b, r in got)


def test_optimal_bands_defaults_and_scale():
    assert optimal_bands(0.8, 260, 0.5, 0.5) == (17, 15)  # datasketch's equal weights
    assert optimal_bands(0.8, 260) == (28, 9)  # FuzzyConfig's weights are the defaults
    assert optimal_bands(0.8, 260, 3.0, 7.0) == (20, 13)  # only the ratio matters
    assert optimal_bands(0.5, 1) == (1, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0.0, 128), "threshold"),
        ((1.01, 128), "threshold"),
        ((-0.2, 128), "threshold"),
        ((0.8, 0), "num_perm"),
        ((0.8, 128, -0.1, 0.5), "non-negative"),
        ((0.8, 128, 0.0, 0.0), "not both zero"),
    ],
)
def test_optimal_bands_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        optimal_bands(*args)


def test_similarity_at_inverts_the_s_curve():
    for b, r in [(20, 13), (17, 15), (1, 1)]:
        for p in [0.01, 0.5, 0.99]:
            assert candidate_probability(similarity_at(p, b, r), b, r) == pytest.approx(p, rel=1e-12)
    assert similarity_at(0.5, 20, 13) == pytest.approx(0.7710798289, abs=1e-10)
    assert approximate_threshold(20, 13) == pytest.approx(0.7941833348, abs=1e-10)
    # at (1/b)^(1/r) the probability is 1 - (1 - 1/b)^b, not 0.5
    assert candidate_probability(approximate_threshold(20, 13), 20, 13) == pytest.approx(1 - 0.95**20, rel=1e-12)


def test_describe_bands():
    d = describe_bands(0.8, 20, 13)
    assert (d["num_bands"], d["rows_per_band"], d["num_perm_used"]) == (20, 13, 260)
    assert d["false_positive_area"] == false_positive_area(0.8, 20, 13)
    assert [p["similarity"] for p in d["candidate_probability"]] == list(SIMILARITIES)
    probabilities = [round(p["probability"], 4) for p in d["candidate_probability"]]
    assert probabilities == [
        0.0,
        0.0001,
        0.0024,
        0.0258,
        0.1769,
        0.3818,
        0.6773,
        0.924,
        0.9972,
        1.0,
        1.0,
    ]


def test_s_curve_plot_writes_a_png(tmp_path):
    path = tmp_path / "curve.png"
    s_curve_plot(path, 20, 13, 0.8, compare=[(17, 15)])
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == (768, 504)  # 6.4 x 4.2 inches at 120 dpi


# --- configuration: the one rule for bands and rows -------------------------------------


def test_default_config_is_28_by_9():
    # weights 0.01 / 0.99: the recall measured in docs/quality.md
    fuzzy = FuzzyConfig()
    # num_perm is what the choice may use (as help and the YAML say); the signature holds bands x rows
    assert (fuzzy.num_bands, fuzzy.rows_per_band, fuzzy.num_perm, fuzzy.num_hashes) == (28, 9, 260, 252)
    assert (fuzzy.fp_weight, fuzzy.fn_weight) == (0.01, 0.99)
    default_yaml = load_config(CONFIGS / "default.yaml").fuzzy
    assert default_yaml == fuzzy
    # stating the defaults changes nothing
    assert FuzzyConfig(threshold=0.8, num_perm=260, fp_weight=0.01, fn_weight=0.99) == fuzzy
    # the earlier weights give NeMo Curator's 20 x 13
    nemo = FuzzyConfig(fp_weight=0.3, fn_weight=0.7)
    assert (nemo.num_bands, nemo.rows_per_band, nemo.num_perm) == (20, 13, 260)


def test_config_chooses_bands_for_threshold_and_num_perm():
    seventy = FuzzyConfig(threshold=0.7)
    assert (seventy.num_bands, seventy.rows_per_band, seventy.num_perm, seventy.num_hashes) == (39, 6, 260, 234)
    small = FuzzyConfig(num_perm=128)
    assert (small.num_bands, small.rows_per_band, small.num_perm, small.num_hashes) == (18, 7, 128, 126)
    equal = FuzzyConfig(fp_weight=0.5, fn_weight=0.5)
    assert (equal.num_bands, equal.rows_per_band) == (17, 15)
    # a dumped config (as in summary.json) reloads to the same values
    assert FuzzyConfig.model_validate(seventy.model_dump()) == seventy


def test_width_left_out_is_24_characters_or_5_words():
    # --ngram word alone kept 24: "24-word shingles", where datatrove's, text-dedup's and
    # FineWeb's word n-grams are 5 (a changed word in every 24 left no shingle in common).
    assert (FuzzyConfig().width, FuzzyConfig(ngram="word").width) == (24, 5)
    assert FuzzyConfig(ngram="word", width=24).width == 24  # given: kept
    assert load_config("default", {"fuzzy": {"ngram": "word"}}).fuzzy.width == 5  # YAML's width: null
    assert load_config("nemo-curator", {"fuzzy": {"ngram": "word"}}).fuzzy.width == 24  # the file's width: 24
    # derived, so not given: a copy merged with another ngram derives it again (the API's config=)
    char = FuzzyConfig()
    assert "width" not in char.model_fields_set
    assert FuzzyConfig.model_validate({**char.model_dump(exclude_unset=True), "ngram": "word"}).width == 5
    assert FuzzyConfig.model_validate(FuzzyConfig(ngram="word").model_dump()) == FuzzyConfig(ngram="word")


def test_threshold_config_file_gets_the_optimisers_choice():
    fuzzy = load_config(CONFIGS / "threshold-0.7.yaml").fuzzy
    assert fuzzy.threshold == 0.7
    assert (fuzzy.num_bands, fuzzy.rows_per_band) == optimal_bands(0.7, 260, 0.01, 0.99) == (39, 6)


def test_given_bands_that_miss_most_pairs_at_the_threshold_are_warned_of(tmp_path, caplog):
    # nemo-curator's 20 x 13 with --threshold 0.7 made 18% of the pairs at 0.7 candidates, without a word.
    weak = load_config("nemo-curator", {"fuzzy": {"threshold": 0.7}}).fuzzy.weak_bands()
    assert weak == (
        "num_bands x rows_per_band = 20 x 13 make a pair at Jaccard 0.7 (the threshold) a candidate with "
        "probability 18%: most near duplicates at the threshold are missed; chosen for it they are 39 x 6 "
        "(`curate params --threshold 0.7`): give --num-bands 39 --rows-per-band 6 (where neither is set, as in a "
        "config file of your own without them, curate chooses them so)"
    )
    # ("or leave both out of the configuration" left a user of the shipped nemo-curator config
    # looking for a flag that unsets them.)
    # The choice named is the one `curate params` shows with the same settings, and leaving the
    # bands out makes (it was made for bands x rows when num_perm was not given, and named the
    # command without --num-perm).
    datatrove = load_config("datatrove", {"fuzzy": {"threshold": 0.6}}).fuzzy.weak_bands()  # num_perm: 112
    assert "chosen for it they are 28 x 4 (`curate params --threshold 0.6 --num-perm 112`)" in datatrove
    derived = FuzzyConfig(threshold=0.6, num_bands=5, rows_per_band=20).weak_bands()  # num_perm 100, derived
    assert "chosen for it they are 52 x 5 (`curate params --threshold 0.6`)" in derived
    assert (FuzzyConfig(threshold=0.6).num_bands, FuzzyConfig(threshold=0.6).rows_per_band) == (52, 5)
    given = FuzzyConfig(threshold=0.8, num_bands=5, rows_per_band=20, num_perm=100, fn_weight=0.9).weak_bands()
    assert "(`curate params --threshold 0.8 --num-perm 100 --fn-weight 0.9`)" in given
    assert "they are {} x {} ".format(*optimal_bands(0.8, 100, 0.01, 0.9)) in given
    assert round(candidate_probability(0.7, 20, 13), 4) == 0.1769  # 1 - (1 - 0.7**13)**20
    assert load_config("nemo-curator").fuzzy.weak_bands() is None  # 68% at its own 0.8
    assert FuzzyConfig(threshold=0.5).weak_bands() is None  # chosen for the threshold
    assert FuzzyConfig(threshold=1.0, num_bands=1, rows_per_band=1).weak_bands() is None
    with dask.config.set(scheduler="sync"):  # curate dedup's run
        for mode in ("both", "exact"):
            config = load_config("nemo-curator", {"fuzzy": {"threshold": 0.7}, "mode": mode})
            dedup([str(FIXTURES / "docs.jsonl")], str(tmp_path / mode), config)
    assert caplog.messages.count(weak) == 1  # exact dedup alone: no warning
    # The Python API names its keywords (it named the CLI's flags), and a small chance is not "0%".
    frame = dd.from_pandas(pd.DataFrame({"text": ["a b c", "d e f"]}), npartitions=1)
    keywords = weak.replace("--num-bands 39 --rows-per-band 6", "num_bands=39, rows_per_band=6")
    with pytest.warns(UserWarning, match=re.escape(keywords)):
        curate.deduplicate(frame, config=load_config("nemo-curator"), threshold=0.7)
    assert (
        "a candidate with probability under 1%:"
        in load_config("nemo-curator").fuzzy.model_copy(update={"threshold": 0.5}).weak_bands()
    )


def test_config_explicit_bands():
    fixed = FuzzyConfig(num_bands=9, rows_per_band=13, threshold=0.7)
    assert (fixed.num_bands, fixed.rows_per_band, fixed.num_perm) == (9, 13, 117)
    assert FuzzyConfig(num_bands=9, rows_per_band=13, num_perm=117).num_bands == 9
    # as in datasketch, the bands may use fewer values than num_perm, never more
    roomy = FuzzyConfig(num_bands=9, rows_per_band=13, num_perm=120)
    assert (roomy.num_perm, roomy.num_hashes) == (120, 117)
    assert FuzzyConfig.model_validate(roomy.model_dump()) == roomy
    with pytest.raises(
        ValidationError,
        match="num_bands x rows_per_band = 9 x 13 = 117 MinHash values, more than num_perm 100",
    ):
        FuzzyConfig(num_bands=9, rows_per_band=13, num_perm=100)
    with pytest.raises(ValidationError, match="give both num_bands and rows_per_band"):
        FuzzyConfig(rows_per_band=13)
    # 1.0 was refused unless bands were given (a user's trial): at 1 the fewest candidates win.
    assert (FuzzyConfig(threshold=1.0).num_bands, FuzzyConfig(threshold=1.0).rows_per_band) == (1, 260)
    assert (
        FuzzyConfig(threshold=1.0, num_perm=64).num_bands,
        FuzzyConfig(threshold=1.0, num_perm=64).rows_per_band,
    ) == (1, 64)
    for weights in ({"fp_weight": float("inf")}, {"fn_weight": float("inf")}):  # they chose 0 x 0 bands
        with pytest.raises(ValidationError, match="Input should be a finite number"):
            FuzzyConfig(**weights)
    assert FuzzyConfig(threshold=1.0, num_bands=1, rows_per_band=1).threshold == 1.0
    with pytest.raises(ValidationError, match="not both zero"):
        FuzzyConfig(fp_weight=0.0, fn_weight=0.0)
