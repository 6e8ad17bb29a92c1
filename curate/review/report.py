"""``curate report``: one self-contained HTML page about a finished run.

The page holds the run's parameters and versions, what went in and what came out, time and
peak memory per stage, plots (inline SVG, drawn with matplotlib: sizes of the duplicate
groups, Jaccard similarity of each removed document with its representative, the LSH S-curve
of the bands and rows used), and removed documents beside their representatives with the
differing words marked: the largest groups, then a random sample. No script, font or image is
fetched from anywhere, so it opens offline. What it reads is described in :mod:`curate.review.inspect`.
"""

import datetime
import html
import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from curate.io.files import counted
from curate.params import s_curve_figure
from curate.review.inspect import Pair, RunOutput, diff_blocks, trailing_space, visible


def write_report(out_dir, *, groups: int = 20, sample: int = 20, seed: int = 0) -> Path:
    """Write ``out_dir/report.html`` for the run in ``out_dir``.

    Parameters
    ----------
    out_dir : str, path-like or RunOutput
        A folder written by ``curate dedup``, or that folder already read.
    groups : int, default=20
        Largest groups to show (each by its least similar removed member).
    sample : int, default=20
        Removed documents to show, drawn at random.
    seed : int, default=0
        Seed of that draw (numpy ``default_rng``), so a report can be made again identically.

    Returns
    -------
    pathlib.Path
        The report (written under a temporary name, then renamed).

    Raises
    ------
    FileNotFoundError, ValueError
        As :class:`curate.review.inspect.RunOutput`.
    OSError
        If the page cannot be written (a full disk), naming it; nothing is left of it.
    """
    run = out_dir if isinstance(out_dir, RunOutput) else RunOutput(out_dir)
    page = _page(run, run.largest_groups(groups), run.sample(sample, seed), groups, sample, seed)
    path = run.out_dir / "report.html"
    tmp = path.with_name("report.html.tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
    except OSError as err:  # a full disk: no half page is left, and the path is named
        tmp.unlink(missing_ok=True)
        raise OSError(err.errno, f"cannot write {tmp}: {err.strerror}") from None
    except BaseException:  # a Ctrl-C meanwhile: no half page either
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def _page(run: RunOutput, largest: list[Pair], sampled: list[Pair], groups: int, sample: int, seed: int) -> str:
    s = run.summary
    fuzzy = s["config"]["fuzzy"]
    written = datetime.datetime.fromtimestamp((run.out_dir / "summary.json").stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    near = s["config"]["mode"] != "exact"
    plots = [_figure(_group_size_plot(run)), _figure(_jaccard_plot(run.removed, fuzzy["threshold"] if near else None))]
    if near:
        plots.append(_figure(s_curve_figure(fuzzy["num_bands"], fuzzy["rows_per_band"], fuzzy["threshold"])))
    body = f"""
<header>
  <h1>curate report</h1>
  <p><code>{_e(run.out_dir.resolve())}</code> · run finished {written} · backend <b>{_e(s["config"]["backend"])}</b> ·
  {s["seconds"]["total"]:,.1f} s · curate {_e(s["versions"]["curate"])}</p>
</header>
{_warning(run)}<section class="cards">{_counts(s)}</section>
<section><h2>Plots</h2><div class="plots">{"".join(plots)}</div></section>
<section class="two">
  <div><h2>Stages</h2>{_stages(s)}</div>
  <div><h2>Parameters</h2>{_parameters(s)}</div>
</section>
{_largest(largest, groups)}{_sampled(run, sampled, sample, seed)}
<footer>versions: {_e(", ".join(f"{k} {v}" for k, v in s["versions"].items()))}</footer>"""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>curate report: {_e(run.out_dir.name)}</title><style>{_CSS}</style></head>
<body>{body}</body></html>
"""


def _largest(largest: list[Pair], groups: int) -> str:
    if not groups:  # --groups 0: none asked for (it said "No duplicate groups")
        return ""
    if len(largest) == 1:
        heading = "The largest group"
    else:  # none found: not "The 0 largest groups"
        heading = f"The {len(largest)} largest groups" if largest else "The largest groups"
    return f"""<section><h2>{heading}</h2>
  <p class="note">Each group's representative (kept) beside the member least similar to it (removed). Among groups of equal
  size, exact and near-duplicate groups take turns, least similar first.</p>
  {_pairs(largest) or "<p>No duplicate groups.</p>"}
</section>
"""


def _sampled(run: RunOutput, sampled: list[Pair], sample: int, seed: int) -> str:
    if not sample:
        return ""
    return f"""<section><h2>{counted(len(sampled), "removed document")} at random</h2>
  <p class="note">Drawn with seed {seed} from the {_kinds(run.removed.kind)} removed documents: half of
  them near duplicates and half exact copies, or more of one kind where the other has fewer, and one per
  representative before any representative's second; shown in input order.</p>
  {_pairs(sampled) or "<p>Nothing was removed.</p>"}
</section>
"""


def _kinds(kinds) -> str:  # a pandas Series of "fuzzy" and "exact"
    counts = kinds.value_counts()
    return " and ".join(f"{counts.get(kind, 0):,} {kind}" for kind in ("fuzzy", "exact"))


def _warning(run: RunOutput) -> str:
    if not run.input_problems:
        return ""
    listed = "".join(
        f"<li><code>{_e(path)}</code>: {_e(why)}</li>" for path, why in list(run.input_problems.items())[:5]
    )
    more = f"<li>and {len(run.input_problems) - 5:,} more</li>" if len(run.input_problems) > 5 else ""
    return (
        f'<section class="warning"><b>{len(run.input_problems):,} input file(s) cannot be read as the run read them</b>, so the '
        f"texts in them are not shown:<ul>{listed}{more}</ul></section>"
    )


def _counts(s: dict) -> str:
    counts = s["counts"]
    exact, fuzzy, output = counts.get("exact", {}), counts.get("fuzzy", {}), counts["output"]
    # A card for each dedup that ran (as the command line's summary): no "0 removed" for one that did not.
    cards = [("documents in", "documents_in", counts["input"]["documents"], f"{counts['input']['empty']:,} empty")]
    if "exact" in counts:
        cards.append(("exact duplicates removed", "exact_removed", exact["removed"], counted(exact["groups"], "group")))
    if "fuzzy" in counts:
        verified = (
            f"{fuzzy['verified_edges']:,} verified edges"
            if s["config"]["fuzzy"]["verify"]
            else "no verified edges (--no-verify)"
        )
        cards.append(
            (
                "fuzzy duplicates removed",
                "fuzzy_removed",
                fuzzy["removed"],
                f"{counted(fuzzy['groups'], 'group')} · {fuzzy['candidate_edges']:,} candidate / {verified}",
            )
        )
    cards += [
        (
            "rejected",
            "rejected",
            output["rejected"],
            ", ".join(f"{n:,} {k}" for k, n in counts.get("rejected", {}).items()) or "unreadable records",
        ),
        (
            "documents kept",
            "kept",
            output["kept"],
            f"{output['kept'] / max(counts['input']['documents'] - output.get('reference', 0), 1):.1%} of the input"
            + (" (the reference aside)" if "reference" in output else "")
            + (", not written (--identify-only)" if s["output_format"] is None else ""),
        ),
    ]
    if "reference" in output:  # curate dedup --reference: in documents in, neither kept nor removed
        cards.append(("reference documents", "reference", output["reference"], "kept, not written (--reference)"))
    return "".join(
        f'<div class="card"><div class="label">{label}</div><div class="value" data-count="{key}">{value:,}</div>'
        f'<div class="detail">{_e(detail)}</div></div>'
        for label, key, value, detail in cards
    )


def _stages(s: dict) -> str:
    seconds = {k: v for k, v in s["seconds"].items() if k != "total"}
    peaks = s.get("stage_peak_rss_bytes", {})
    longest = max(seconds.values(), default=1) or 1
    rows = []
    for stage, t in seconds.items():
        peak = peaks.get(stage, {})
        largest = max(peak.get("workers", {}).values(), default=0)
        rows.append(
            f'<tr><td>{_e(stage)}</td><td class="num">{t:,.1f}</td><td><div class="bar" style="width:{100 * t / longest:.0f}%"></div></td>'
            f'<td class="num">{_gb(peak.get("total"))}</td><td class="num">{_gb(peak.get("client"))}</td><td class="num">{_gb(largest)}</td></tr>'
        )
    rows += [
        f'<tr class="reused"><td>{_e(stage)}</td><td colspan="5">reused from a previous run (--resume)</td></tr>'
        for stage in s["reused_stages"]
    ]
    peak = s["peak_rss_bytes"]
    rows.append(
        f'<tr class="total"><td>total</td><td class="num">{s["seconds"]["total"]:,.1f}</td><td></td>'
        f'<td class="num">{_gb(peak["total"])}</td><td class="num">{_gb(peak["client"])}</td>'
        f'<td class="num">{_gb(max(peak["workers"].values(), default=0))}</td></tr>'
    )
    spilled = (
        f'<p class="note">Workers spilled {_gb(s["spilled_bytes"])} to disk.</p>' if s.get("spilled_bytes") else ""
    )
    return (
        '<table class="stages"><thead><tr><th>stage</th><th>seconds</th><th>share of time</th><th>peak RSS, all</th><th>client</th>'
        f"<th>largest worker</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f'<p class="note">Wall time; peak resident memory of the processes while the stage ran.</p>{spilled}'
    )


def _parameters(s: dict) -> str:
    files = s["input_files"]
    also = ", the reference's included" if s.get("reference") else ""
    rows = [
        (
            "inputs",
            f"{', '.join(s['inputs'])} ({counted(len(files), 'file')}, {sum(f['size'] for f in files) / 1e6:,.1f} MB{also})",
        ),
        *([("reference", f"{', '.join(s['reference'])} (kept, not written)")] if s.get("reference") else []),
        ("mode", s["config"]["mode"]),
        ("keep", s["config"]["keep"]),
    ]
    sections = ("io",) if s["config"]["mode"] == "exact" else ("fuzzy", "io")  # exact mode uses no fuzzy setting
    rows += [
        (f"{section}.{key}", value)
        for section in sections
        for key, value in s["config"][section].items()
        if key not in ("output_format", "output_compression", "cache_input")
    ]
    io = s["config"]["io"]  # as written: None where the input's format or compression was taken
    if "cache_input" in s:  # as decided where unset (summaries before it say only the setting)
        rows.append(("io.cache_input", str(s["cache_input"]) + ("" if io["cache_input"] is not None else " (auto)")))
    else:
        rows.append(("io.cache_input", io["cache_input"]))
    if s["output_format"] is not None:  # None: identify_only, no deduplicated copy
        rows.append(("io.output_format", s["output_format"] + ("" if io["output_format"] else " (the input's)")))
        rows.append(
            ("io.output_compression", s["output_compression"] + ("" if io["output_compression"] else " (default)"))
        )
    return (
        '<table class="params">' + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>"
    )


def _pairs(pairs: list[Pair]) -> str:
    """The pairs, the first of each kind open."""
    first = {pair.kind: pair for pair in reversed(pairs)}
    return "".join(_pair(pair, pair is first[pair.kind]) for pair in pairs)


def _pair(pair: Pair, open_: bool) -> str:
    head = f'<span class="kind {pair.kind}">{pair.kind}</span> ' + pair.headline(lambda doc: f"<b>{_e(doc)}</b>")
    if pair.diff is None:
        return f'<details class="pair"{" open" if open_ else ""}><summary>{head}</summary><p class="note">Text unavailable: {_e(pair.unavailable)}</p></details>'
    rows = []
    for block in diff_blocks(pair.diff):
        if isinstance(block, str):
            rows.append(f'<tr class="gap"><td colspan="2">⋯ {block} ⋯</td></tr>')
            continue
        left = "".join(_e(seg.a) if seg.kind == "same" else _marked("del", seg.a) for seg in block if seg.a)
        right = "".join(_e(seg.b) if seg.kind == "same" else _marked("ins", seg.b) for seg in block if seg.b)
        rows.append(f"<tr><td>{left}</td><td>{right}</td></tr>")
    return (
        f'<details class="pair"{" open" if open_ else ""}><summary>{head}</summary><table class="diff"><thead><tr>'
        f"<th>removed: {_e(pair.removed)}</th><th>{pair.kept_label}: {_e(pair.representative)}</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></details>"
    )


def _marked(tag: str, text: str) -> str:
    words, space = trailing_space(text)
    return f"<{tag}>{_e(words)}</{tag}>{_e(space)}"


def _group_size_plot(run: RunOutput):
    # matplotlib is a slow import, needed only here (Figure: no pyplot state)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator, NullFormatter

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    sizes = run.group_sizes
    kinds = [k for k in ("exact", "fuzzy") if (sizes.kind == k).any()]
    if kinds:
        largest = int(sizes["size"].max())
        # One bar per size while there are few; beyond, log-spaced bins on a log axis.
        edges = (
            np.arange(2, largest + 2) - 0.5 if largest <= 30 else np.unique(np.geomspace(2, largest + 1, 30).round())
        )
        ax.hist(
            [sizes["size"][sizes.kind == k] for k in kinds],
            bins=edges,
            label=[f"{k} ({counted(int((sizes.kind == k).sum()), 'group')})" for k in kinds],
            color=[_COLOURS[k] for k in kinds],
        )
        if largest > 30:
            ax.set_xscale("log")
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        counts = sizes.groupby(["kind", "size"]).size()
        if counts.max() > 50 * counts.min():  # a few large groups next to many pairs
            ax.set_yscale("log")
            ax.set_ylim(bottom=0.7)  # so that a bar of one group shows
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.legend()
    ax.set(xlabel="documents in the group (representative included)", ylabel="groups", title="Duplicate groups by size")
    ax.grid(alpha=0.3)
    return fig


def _jaccard_plot(removed: pd.DataFrame, threshold: float | None):
    """Histogram of the removed documents' similarity with their representatives (``removed``:
    removed.parquet's ``kind`` and ``jaccard``); ``threshold`` None for a run without fuzzy dedup.
    Exact copies count at 1.0 unless their group went as a near duplicate: they then carry that
    document's similarity, and are drawn with the near duplicates."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    ax = fig.subplots()
    exact = removed.kind == "exact"
    near = removed.jaccard[~exact].dropna()
    copies = removed.jaccard[exact & (removed.jaccard != 1.0)].dropna()  # copies of near duplicates
    at_one = int((exact & (removed.jaccard == 1.0)).sum())
    unverified = threshold is not None and (~exact).any() and not len(near)
    if threshold is not None and not unverified:
        low = min([threshold, *(values.min() for values in (near, copies) if len(values))])
        ax.hist(
            [near, copies],
            bins=np.linspace(np.floor(low * 20) / 20, 1, 41),
            stacked=True,
            color=[_COLOURS["fuzzy"], _COLOURS["exact"]],
            label=[f"near duplicates ({len(near):,})", f"their exact copies ({len(copies):,})"],
        )
        ax.axvline(threshold, color="black", linewidth=0.8, label=f"threshold {threshold}")
        ax.legend(loc="upper right")
    ax.set(
        xlabel="Jaccard similarity with the representative",
        ylabel="removed documents",
        title=f"Removed documents by similarity (+ {counted(at_one, 'exact copy', 'exact copies')} at 1.0)",
    )
    if threshold is None:
        ax.text(
            0.5, 0.5, "no near duplicates looked for: the run used --mode exact", transform=ax.transAxes, ha="center"
        )
    elif unverified:  # no bars: a legend of "near duplicates (0)" belied the removed ones
        ax.text(0.5, 0.5, "not computed: the run used --no-verify", transform=ax.transAxes, ha="center")
    elif not len(removed):
        ax.text(0.5, 0.5, "no document was removed", transform=ax.transAxes, ha="center")
    ax.set_ylim(bottom=0)  # an empty plot's axis ran from -0.05
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    return fig


def _figure(fig) -> str:
    """Inline SVG of a matplotlib figure (text kept as text, so it stays small and selectable)."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    # A fixed salt and no date: the same run gives the same page.
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "curate"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    svg = buffer.getvalue()
    return f"<figure>{svg[svg.index('<svg') :]}</figure>"


def _gb(n) -> str:
    return "" if n is None else f"{n / 1e9:,.2f} GB"


def _e(value) -> str:
    return html.escape(visible(str(value)))


_COLOURS = {"exact": "#4c72b0", "fuzzy": "#dd8452"}
_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1280px; padding: 0 24px 48px; color: #1d2330; }
header { border-bottom: 1px solid #dde1e8; margin-bottom: 16px; } h1 { margin: 20px 0 4px; } h2 { font-size: 19px; margin: 28px 0 8px; }
code { font-size: 13px; } .note { color: #5a6272; font-size: 13px; margin: 4px 0 10px; }
.cards { display: grid; grid-template-columns: repeat(5, 1fr); gap: 12px; }
.card { border: 1px solid #dde1e8; border-radius: 8px; padding: 12px 14px; background: #f8f9fb; }
.card .label { color: #5a6272; font-size: 13px; } .card .value { font-size: 26px; font-weight: 600; } .card .detail { color: #5a6272; font-size: 12px; }
.plots { display: grid; grid-template-columns: repeat(3, 1fr); gap: 8px; } figure { margin: 0; } figure svg { width: 100%; height: auto; }
.two { display: grid; grid-template-columns: 1.2fr 1fr; gap: 28px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; } td, th { padding: 3px 8px; border-bottom: 1px solid #eceef2; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } tr.total td { font-weight: 600; } tr.reused td { color: #5a6272; }
.bar { height: 10px; background: #4c72b0; border-radius: 2px; min-width: 1px; margin-top: 4px; } .stages td:nth-child(3) { width: 30%; }
.params td:first-child { color: #5a6272; white-space: nowrap; } .params td { word-break: break-all; }
details.pair { border: 1px solid #dde1e8; border-radius: 8px; margin: 8px 0; } details.pair > summary { overflow-wrap: anywhere; padding: 8px 12px; cursor: pointer; background: #f8f9fb; border-radius: 8px; }
.kind { display: inline-block; padding: 0 8px; border-radius: 10px; color: white; font-size: 12px; } .kind.exact { background: #4c72b0; } .kind.fuzzy { background: #dd8452; }
table.diff { table-layout: fixed; } table.diff td { white-space: pre-wrap; overflow-wrap: anywhere; font: 13px/1.5 ui-monospace, "DejaVu Sans Mono", monospace; width: 50%; }
table.diff th { background: #f1f3f6; overflow-wrap: anywhere; } tr.gap td { text-align: center; color: #5a6272; background: #f8f9fb; font-style: italic; }
del { background: #ffd7d5; text-decoration: line-through; text-decoration-color: #c0392b80; } ins { background: #c9f2d0; text-decoration: none; }
.warning { border: 1px solid #e0b252; background: #fff6e0; border-radius: 8px; padding: 8px 14px; margin-bottom: 14px; } .warning ul { margin: 4px 0; }
footer { margin-top: 32px; color: #5a6272; font-size: 12px; }
@media (max-width: 900px) { .cards, .plots, .two { grid-template-columns: 1fr; } }
"""

__all__ = ["write_report"]
