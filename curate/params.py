"""Choosing LSH bands and rows for a Jaccard threshold: the S-curve and its error areas.

With ``b`` bands of ``r`` MinHash values each, two documents of Jaccard similarity ``s``
share at least one bucket (become a *candidate* pair) with probability
``1 - (1 - s**r)**b``, an S-shaped curve in ``s`` [1]_. Pairs below the threshold that
become candidates are false positives (verification removes them, at a cost); pairs above
it that do not are false negatives (missed duplicates, never recovered). The optimiser
picks the ``(b, r)`` with ``b * r <= num_perm`` that minimises the weighted sum of the
two areas, exactly as datasketch's ``MinHashLSH`` does [2]_.

References
----------
.. [1] J. Leskovec, A. Rajaraman, J. Ullman, "Mining of Massive Datasets", 3rd ed., ch. 3.4
   (the S-curve of banded MinHash).
.. [2] datasketch, ``datasketch/lsh.py``: ``_false_positive_probability``,
   ``_false_negative_probability``, ``_optimal_param``.
"""

from functools import lru_cache

import numpy as np

# Verification removes false positives (they cost time), a missed pair is lost: so misses
# weigh far more than datasketch's equal weights. Measured in docs/quality.md: 0.01 / 0.99
# (28 x 9 at 0.8) finds all but 0.2% of the true pairs on four corpora at every threshold
# from 0.5 to 0.9; 0.3 / 0.7 (NeMo Curator's 20 x 13 at 0.8) lost up to 40% at 0.5.
DEFAULT_FP_WEIGHT = 0.01
DEFAULT_FN_WEIGHT = 0.99


def candidate_probability(s, bands: int, rows: int):
    """Probability that two documents of Jaccard similarity ``s`` share an LSH bucket.

    Parameters
    ----------
    s : float or array of any shape, dtype float64
        Jaccard similarities in ``[0, 1]``.
    bands, rows : int
        ``b`` bands of ``r`` MinHash values each.

    Returns
    -------
    float or array of the shape of ``s``, dtype float64
        ``1 - (1 - s**r)**b``.
    """
    if not isinstance(s, float):  # plain floats stay plain: quad calls this ~10^5 times
        s = np.asarray(s, dtype=np.float64)
    return 1.0 - (1.0 - s**rows) ** bands


def false_positive_area(threshold: float, bands: int, rows: int) -> float:
    """Area under the S-curve below the threshold: ``integral_0^t P(s) ds``.

    Follows datasketch's ``_false_positive_probability`` (``scipy.integrate.quad``).

    Parameters
    ----------
    threshold : float
        Jaccard similarity ``t`` in ``[0, 1]``.
    bands, rows : int

    Returns
    -------
    float
        Between 0 and ``t``; the chance mass of pairs under the threshold becoming candidates
        if similarities were uniform on ``[0, 1]``.
    """
    from scipy.integrate import quad  # imported here: it takes 0.6 s, which `curate` spends only when bands are chosen

    area, _ = quad(candidate_probability, 0.0, threshold, args=(bands, rows))
    return area


def false_negative_area(threshold: float, bands: int, rows: int) -> float:
    """Area above the S-curve above the threshold: ``integral_t^1 (1 - P(s)) ds``.

    Follows datasketch's ``_false_negative_probability`` (``scipy.integrate.quad``).

    Parameters
    ----------
    threshold : float
        Jaccard similarity ``t`` in ``[0, 1]``.
    bands, rows : int

    Returns
    -------
    float
        Between 0 and ``1 - t``.
    """
    from scipy.integrate import quad

    area, _ = quad(lambda s: 1.0 - candidate_probability(s, bands, rows), threshold, 1.0)
    return area


@lru_cache(maxsize=256)  # configs are validated often; each search is ~3,000 integrals
def optimal_bands(
    threshold: float, num_perm: int, fp_weight: float = DEFAULT_FP_WEIGHT, fn_weight: float = DEFAULT_FN_WEIGHT
) -> tuple[int, int]:
    """Bands and rows that minimise the weighted false-positive + false-negative area.

    Searches every ``(b, r)`` with ``b * r <= num_perm``, ``b`` then ``r`` increasing, and
    keeps the first with the smallest ``fp_weight * FP + fn_weight * FN``: the same search,
    order and tie-breaking as datasketch's ``_optimal_param``, so both pick the same pair.

    Parameters
    ----------
    threshold : float
        Jaccard similarity, over 0 and at most 1 (at 1 no pair under it counts as missed, so the
        fewest candidates win: one band of every value, ``(1, num_perm)``).
    num_perm : int
        MinHash values available, at least 1. The choice may use fewer (``b * r``).
    fp_weight, fn_weight : float, default=0.01, 0.99
        Non-negative, not both zero; only their ratio matters. The defaults are
        :class:`curate.config.FuzzyConfig`'s (datasketch's are 0.5, 0.5).

    Returns
    -------
    (int, int)
        ``(bands, rows)``.

    Raises
    ------
    ValueError
        If an argument is out of range.

    Examples
    --------
    >>> optimal_bands(0.8, 260)
    (28, 9)
    >>> optimal_bands(0.8, 260, 0.5, 0.5)  # datasketch's weights
    (17, 15)
    >>> optimal_bands(1.0, 260)
    (1, 260)
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be over 0 and at most 1, got {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be at least 1, got {num_perm}")
    if fp_weight < 0 or fn_weight < 0 or fp_weight + fn_weight == 0:
        raise ValueError(
            f"fp_weight and fn_weight must be non-negative and not both zero, got {fp_weight} and {fn_weight}"
        )
    best, best_error = (0, 0), float("inf")
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            fp = false_positive_area(threshold, bands, rows)
            fn = false_negative_area(threshold, bands, rows)
            error = fp_weight * fp + fn_weight * fn
            if error < best_error:
                best, best_error = (bands, rows), error
    return best


def similarity_at(probability: float, bands: int, rows: int) -> float:
    """Jaccard similarity at which the candidate probability equals ``probability``.

    The exact inverse of :func:`candidate_probability`: ``(1 - (1 - p)**(1/b))**(1/r)``.

    Parameters
    ----------
    probability : float
        In ``[0, 1]``.
    bands, rows : int

    Returns
    -------
    float
        In ``[0, 1]``.
    """
    return (1.0 - (1.0 - probability) ** (1.0 / bands)) ** (1.0 / rows)


def approximate_threshold(bands: int, rows: int) -> float:
    """``(1/b)**(1/r)``, the usual approximation of where the S-curve rises steepest [1]_.

    The candidate probability there is ``1 - (1 - 1/b)**b`` (about 0.64 for ``b = 20``), not 0.5;
    see :func:`similarity_at` for the exact point of a given probability.
    """
    return (1.0 / bands) ** (1.0 / rows)


SIMILARITIES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)


def describe_bands(threshold: float, bands: int, rows: int) -> dict:
    """The figures ``curate params`` prints for one ``(bands, rows)`` choice.

    Returns
    -------
    dict
        ``num_bands``, ``rows_per_band``, ``num_perm_used`` (``b * r``, the signature values the
        bands read), ``false_positive_area``, ``false_negative_area``, ``similarity_at_half``
        (exact, :func:`similarity_at`), ``approximate_threshold`` (:func:`approximate_threshold`),
        ``probability_at_threshold`` (a pair at exactly the threshold becoming a candidate) and
        ``candidate_probability``: a list of ``{"similarity", "probability"}`` at
        :data:`SIMILARITIES`.
    """
    return {
        "num_bands": bands,
        "rows_per_band": rows,
        "num_perm_used": bands * rows,
        "false_positive_area": false_positive_area(threshold, bands, rows),
        "false_negative_area": false_negative_area(threshold, bands, rows),
        "similarity_at_half": similarity_at(0.5, bands, rows),
        "approximate_threshold": approximate_threshold(bands, rows),
        "probability_at_threshold": float(candidate_probability(threshold, bands, rows)),
        "candidate_probability": [
            {
                "similarity": s,
                "probability": float(candidate_probability(s, bands, rows)),
            }
            for s in SIMILARITIES
        ],
    }


def s_curve_plot(path, bands: int, rows: int, threshold: float, *, compare=()) -> None:
    """Write a PNG of :func:`s_curve_figure` to ``path`` (str or path-like)."""
    s_curve_figure(bands, rows, threshold, compare=compare).savefig(path, dpi=120)


def s_curve_figure(bands: int, rows: int, threshold: float, *, compare=()):
    """The S-curve with its false-positive and false-negative areas shaded.

    Parameters
    ----------
    bands, rows : int
        The choice to draw and shade.
    threshold : float
        Jaccard similarity, drawn as a vertical line.
    compare : sequence of (int, int), default=()
        Other ``(bands, rows)`` choices, drawn dashed for comparison.

    Returns
    -------
    matplotlib.figure.Figure
        6.4 x 4.2 inches, not attached to pyplot.
    """
    from matplotlib.figure import (
        Figure,
    )  # slow import, needed only here; Agg canvas, no pyplot state

    s = np.linspace(0.0, 1.0, 501)
    p = candidate_probability(s, bands, rows)
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    ax.plot(s, p, color="C0", label=f"{bands} × {rows} (num_perm used {bands * rows})")
    below, above = s <= threshold, s >= threshold
    fp = false_positive_area(threshold, bands, rows)
    fn = false_negative_area(threshold, bands, rows)
    ax.fill_between(
        s[below],
        0,
        p[below],
        color="C3",
        alpha=0.25,
        label=f"false-positive area {fp:.4f}",
    )
    ax.fill_between(
        s[above],
        p[above],
        1,
        color="C2",
        alpha=0.25,
        label=f"false-negative area {fn:.4f}",
    )
    for k, (b, r) in enumerate(compare):
        ax.plot(
            s,
            candidate_probability(s, b, r),
            "--",
            color=f"C{k + 4}",
            label=f"{b} × {r} (num_perm used {b * r})",
        )
    ax.axvline(threshold, color="black", linewidth=0.8, label=f"threshold {threshold}")
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1.01),
        xlabel="Jaccard similarity s",
        ylabel="P(candidate pair)",
    )
    ax.set_title(f"LSH S-curve: 1 - (1 - s^r)^b, threshold {threshold}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return fig
