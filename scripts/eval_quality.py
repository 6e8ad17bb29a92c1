"""Dedup quality against the exact ground truth: curate and its peers, same data and parameters.

Usage (peers in their own environment, see ``scripts/quality_peers.py``):

    python scripts/eval_quality.py [--corpora 20news,enron_spam,reuters,bible/verses]
        [--configs char24,word5,char24-params] [--thresholds 0.5,0.7,0.8,0.9]
        [--tools curate,curate-unverified,datasketch,text-dedup,datatrove] [--peer-thresholds 0.5,0.8]
        [--repeats 1] [--rerun TOOL,...] [--data ../shared/data] [--cache out/quality]
        [--peers-python /tmp/peers/bin/python] [--report docs/quality.md]
        [--plot docs/img/quality_recall_precision.png]

For each corpus (its non-empty documents, ``id`` and ``text``, copied to two JSONL files) and
each shingle definition, the ground truth is every pair at Jaccard >= the smallest threshold
(:func:`curate.eval.quality.similar_pairs`, exact), cached under ``--cache``. Each tool then runs
on the copy and :func:`curate.eval.quality.dedup_quality` scores its removals. Runs are cached too
(``--cache``/runs): delete a run's folder, or pass ``--rerun TOOL``, to run it again. The
tables are written between the ``<!-- tables -->`` markers of ``--report``.

Configs (see :class:`Config`; every tool gets the same hashes and bands x rows):

- ``char24``: character 24-grams, 260 hashes as 20 bands x 13 rows (NeMo Curator's);
- ``word5``: word 5-grams, 112 hashes as 14 x 8 (FineWeb's datatrove setting);
- ``char24-params``: character 24-grams, bands x rows chosen for each threshold by curate
  (``FuzzyConfig`` without bands, i.e. ``curate params``, over 260 hashes);
- ``char24-32x8``, ``char24-params-fn0.9``: explicit banding, or curate's choice with other weights.

curate runs ``mode both`` (exact, then fuzzy on what exact kept: what a user runs), in this
process with one cluster of 2 single-threaded worker processes; its seconds are the
pipeline's own total (``summary.json``), the median of ``--repeats`` runs. A peer's seconds
are the wall time of its own work (reading included, interpreter start excluded except for
text-dedup, which runs as a command).
"""

import argparse
import json
import logging
import math
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from curate.cluster import connect
from curate.config import ClusterConfig, FuzzyConfig, RunConfig
from curate.eval.quality import dedup_quality, final_representatives, similar_pairs
from curate.pipeline import dedup

DEFAULT_BANDING = {"char": (20, 13), "word": (14, 8)}  # NeMo Curator's and FineWeb's settings
PEERS = {"datasketch": {"char", "word"}, "text-dedup": {"word"}, "datatrove": {"word"}}  # shingles each can take
TOOLS = ["curate", "curate-unverified", *PEERS]


@dataclass(frozen=True)
class Config:
    """Shingles and banding, named ``char24``, ``word5-14x8``, ``char24-params`` or ``char24-params-fn0.9``.

    ``params``: bands x rows chosen for each threshold by curate (``FuzzyConfig`` without
    bands) over 260 hashes (112 for words), with curate's default weights or with
    false-negative weight ``fn`` and false-positive weight ``1 - fn``.
    """

    name: str
    ngram: str
    width: int
    bands: int | None  # None: chosen for the threshold
    rows: int | None
    num_perm: int
    fn_weight: float | None = None

    @classmethod
    def parse(cls, name: str) -> "Config":
        match = re.fullmatch(r"(char|word)(\d+)(?:-(\d+)x(\d+)|-(params)(?:-fn([\d.]+))?)?", name)
        if not match:
            raise ValueError(f"config {name!r} is not like char24, word5-14x8, char24-params or char24-params-fn0.9")
        ngram, width, bands, rows, params, fn_weight = match.groups()
        bands, rows = (None, None) if params else (int(bands), int(rows)) if bands else DEFAULT_BANDING[ngram]
        num_perm = bands * rows if bands else math.prod(DEFAULT_BANDING[ngram])
        return cls(name, ngram, int(width), bands, rows, num_perm, float(fn_weight) if fn_weight else None)

    def fuzzy(self, threshold: float, verify: bool = True) -> FuzzyConfig:
        """curate's fuzzy config for this config at ``threshold``."""
        weights = {} if self.fn_weight is None else {"fn_weight": self.fn_weight, "fp_weight": 1 - self.fn_weight}
        return FuzzyConfig(
            ngram=self.ngram,
            width=self.width,
            num_perm=self.num_perm,
            num_bands=self.bands,
            rows_per_band=self.rows,
            threshold=threshold,
            verify=verify,
            **weights,
        )

    def banding(self, threshold: float) -> tuple[int, int]:
        fuzzy = self.fuzzy(threshold)
        return fuzzy.num_bands, fuzzy.rows_per_band

    def label(self, threshold: float) -> str:
        bands, rows = self.banding(threshold)
        chosen = (
            "" if self.bands else " (params)" if self.fn_weight is None else f" (params, FN weight {self.fn_weight})"
        )
        return f"{self.ngram} {self.width} / {bands}×{rows}{chosen}"


def prepare_corpus(name: str, data: Path, cache: Path) -> tuple[Path, pd.DataFrame]:
    """The corpus's non-empty documents (id, text) as two JSONL files under the cache, and as a frame."""
    folder = cache / "corpora" / name.replace("/", "-")
    if not (folder / "done").exists():
        frames = [pd.read_json(f, lines=True, dtype={"id": str}) for f in sorted((data / name).glob("part-*.jsonl*"))]
        docs = pd.concat(frames, ignore_index=True)[["id", "text"]]
        docs = docs[docs.text.str.len() > 0]
        folder.mkdir(parents=True, exist_ok=True)
        half = (len(docs) + 1) // 2
        for part, chunk in enumerate([docs.iloc[:half], docs.iloc[half:]]):
            lines = (
                json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n"
                for doc_id, text in zip(chunk.id, chunk.text)
            )
            (folder / f"part-{part}.jsonl").write_text("".join(lines))
        (folder / "done").write_text(
            json.dumps({"documents": len(docs), "empty_dropped": sum(map(len, frames)) - len(docs)})
        )
    docs = pd.concat(
        [pd.read_json(f, lines=True, dtype={"id": str}) for f in sorted(folder.glob("part-*.jsonl"))], ignore_index=True
    )
    return folder, docs


def ground_truth(name: str, docs: pd.DataFrame, config: Config, threshold: float, cache: Path) -> pd.DataFrame:
    """All pairs at Jaccard >= ``threshold`` under the config's shingles (cached)."""
    path = cache / "truth" / f"{name.replace('/', '-')}-{config.ngram}{config.width}-t{threshold}.parquet"
    if not path.exists():
        start = time.perf_counter()
        pairs = similar_pairs(docs.text, FuzzyConfig(ngram=config.ngram, width=config.width), threshold)
        path.parent.mkdir(parents=True, exist_ok=True)
        pairs.to_parquet(path)
        print(
            f"  ground truth {config.ngram} {config.width}: {len(pairs)} pairs in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    return pd.read_parquet(path)


def run_key(tool: str, config: Config, threshold: float) -> str:
    """Folder name of a run; threshold-free when the tool's output does not depend on it."""
    bands, rows = config.banding(threshold)
    return f"{tool}-{config.ngram}{config.width}-{bands}x{rows}" + (f"-t{threshold}" if tool == "curate" else "")


def run_curate(corpus: Path, out: Path, config: Config, threshold: float, verify: bool, repeats: int) -> dict:
    """curate's run (mode both); seconds are the median pipeline total of ``repeats`` runs, which must agree."""
    fuzzy = config.fuzzy(threshold, verify)
    seconds, removed = [], set()
    for _ in range(repeats):
        summary = dedup([str(corpus)], str(out), RunConfig(mode="both", fuzzy=fuzzy), overwrite=True, keep_stages=True)
        seconds.append(summary["seconds"]["total"])
        removed.add((out / "removed.parquet").read_bytes())
    if len(removed) != 1:
        raise RuntimeError(f"{out}: repeated runs removed different documents")
    # the connected components before the representative check splits them, by id
    components = pd.read_parquet(out / "_stages" / "components")
    ids = pd.read_parquet(out / "_stages" / "select", columns=["_doc", "id"]).set_index("_doc")["id"]
    pd.DataFrame(
        {"id": ids.loc[components.node].to_numpy(), "cluster": ids.loc[components.component].to_numpy()}
    ).to_parquet(out / "clusters.parquet")
    shutil.rmtree(out / "_stages")
    shutil.rmtree(out / "deduplicated")
    return {
        "seconds": float(np.median(seconds)),
        **{f"fuzzy_{k}": v for k, v in summary["counts"].get("fuzzy", {}).items()},
    }


def run_peer(tool: str, corpus: Path, out: Path, config: Config, threshold: float, peers_python: str) -> dict:
    command = [
        peers_python,
        str(Path(__file__).with_name("quality_peers.py")),
        tool,
        str(corpus),
        str(out),
        "--ngram",
        config.ngram,
        "--width",
        str(config.width),
        "--num-perm",
        str(config.num_perm),
        "--threshold",
        str(threshold),
    ]
    bands, rows = config.banding(threshold)
    command += ["--bands", str(bands), "--rows", str(rows)]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "log.txt", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    return json.loads((out / "run.json").read_text())


def clusters(ids: pd.Series, removed: pd.DataFrame, components: Path) -> np.ndarray:
    """Cluster label per document: joined by removal (to the representative) and by fuzzy component."""
    links = pd.concat(
        [
            removed[["id", "representative"]].set_axis(["a", "b"], axis=1),
            pd.read_parquet(components).set_axis(["a", "b"], axis=1),
        ]
    )
    index = pd.Index(ids)
    graph = sp.coo_matrix(
        (np.ones(len(links)), (index.get_indexer(links.a), index.get_indexer(links.b))), shape=(len(ids), len(ids))
    )
    return connected_components(graph, directed=False)[1]


def warm_up(cache: Path) -> None:
    """One small curate run so that the measured runs find the kernels compiled in every worker."""
    folder = cache / "corpora" / "warm-up"
    folder.mkdir(parents=True, exist_ok=True)
    texts = [f"document {i % 7} " * 20 for i in range(50)]
    (folder / "part-0.jsonl").write_text(
        "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts))
    )
    for ngram in ("char", "word"):
        dedup([str(folder)], str(cache / "runs" / "warm-up"), RunConfig(fuzzy=FuzzyConfig(ngram=ngram)), overwrite=True)


def evaluate(args) -> list[dict]:
    rows = []
    with connect(ClusterConfig(n_workers=2, threads_per_worker=1)):
        warm_up(args.cache)
        for name in args.corpora:
            corpus, docs = prepare_corpus(name, args.data, args.cache)
            print(f"{name}: {len(docs)} documents", flush=True)
            for config in args.configs:
                truth = ground_truth(name, docs, config, min(args.thresholds), args.cache)
                for threshold in args.thresholds:
                    for tool in args.tools:
                        if tool in PEERS and (
                            config.ngram not in PEERS[tool]
                            or (config.bands is None and threshold not in args.peer_thresholds)
                        ):
                            continue
                        out = args.cache / "runs" / name.replace("/", "-") / run_key(tool, config, threshold)
                        if tool in args.rerun and out.exists() and out not in args.reran:
                            shutil.rmtree(out)
                        if not (out / "run.json").exists():
                            if tool.startswith("curate"):
                                info = run_curate(corpus, out, config, threshold, tool == "curate", args.repeats)
                            else:
                                info = run_peer(tool, corpus, out, config, threshold, args.peers_python)
                            (out / "run.json").write_text(json.dumps(info) + "\n")
                            args.reran.add(out)
                        info = json.loads((out / "run.json").read_text())
                        removed = pd.read_parquet(out / "removed.parquet")
                        rep = final_representatives(docs.id, removed)
                        cluster = clusters(docs.id, removed, out / "clusters.parquet") if tool == "curate" else None
                        row = {
                            "corpus": name,
                            "tool": tool,
                            "config": config.name,
                            "shingles": config.label(threshold),
                            "threshold": threshold,
                            "cluster_recall": math.nan,
                            **dedup_quality(truth, rep, threshold, cluster),
                            **info,
                        }
                        rows.append(row)
                        print(
                            f"  {row['shingles']:26} t={threshold} {tool:18} recall {row['pair_recall']:.4f} "
                            f"(cluster {row['cluster_recall']:.4f}) "
                            f"precision {row['removal_precision']:.4f} over-merge {row['over_merge_rate']:.4f} "
                            f"missed {row['missed_duplicates']:5d} removed {row['removed']:6d} {row['seconds']:7.1f} s",
                            flush=True,
                        )
    return rows


def fmt(value, digits=4) -> str:
    return "–" if math.isnan(value) else f"{value:.{digits}f}"


def tables(rows: list[dict], command: str) -> str:
    frame = pd.DataFrame(rows)
    lines = [f"Produced by `{command}`.", ""]
    for name, part in frame.groupby("corpus", sort=False):
        lines += [
            f"### {name}",
            "",
            "| tool | shingles / bands×rows | t | pairs true | pair recall | (cluster recall) | removal precision | over-merge rate | missed duplicates | removed | seconds |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in part.sort_values(["threshold", "config"], kind="stable").itertuples():
            lines.append(
                f"| {r.tool} | {r.shingles} | {r.threshold} | {r.pairs:,} | {fmt(r.pair_recall)} | {fmt(r.cluster_recall)} | {fmt(r.removal_precision)} | "
                f"{fmt(r.over_merge_rate)} | {r.missed_duplicates:,} | {r.removed:,} | {r.seconds:.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def write_report(rows: list[dict], report: Path, command: str) -> None:
    block = f"<!-- tables -->\n{tables(rows, command)}\n<!-- /tables -->"
    text = report.read_text() if report.exists() else "# Dedup quality\n\n<!-- tables -->\n<!-- /tables -->\n"
    report.write_text(re.sub(r"<!-- tables -->.*<!-- /tables -->", lambda _: block, text, flags=re.DOTALL))


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame(rows)
    corpora, thresholds = list(dict.fromkeys(frame.corpus)), sorted(set(frame.threshold))
    fig, axes = plt.subplots(
        len(corpora), len(thresholds), figsize=(3.2 * len(thresholds), 3 * len(corpora)), squeeze=False
    )
    colours = dict(zip(TOOLS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    markers = dict(zip(dict.fromkeys(frame.config), "os^Dvp*"))
    for (i, name), (j, threshold) in ((a, b) for a in enumerate(corpora) for b in enumerate(thresholds)):
        ax = axes[i, j]
        for r in frame[(frame.corpus == name) & (frame.threshold == threshold)].itertuples():
            ax.scatter(
                r.removal_precision, r.pair_recall, color=colours[r.tool], marker=markers[r.config], s=40, alpha=0.8
            )
        ax.set_title(f"{name}, t = {threshold}", fontsize=9)
        ax.grid(alpha=0.3)
        if i == len(corpora) - 1:
            ax.set_xlabel("removal precision")
        if j == 0:
            ax.set_ylabel("pair recall")
    handles = [
        plt.Line2D([], [], color=c, marker="o", linestyle="", label=t)
        for t, c in colours.items()
        if t in set(frame.tool)
    ]
    handles += [
        plt.Line2D([], [], color="grey", marker=m, linestyle="", label=c)
        for c, m in markers.items()
        if c in set(frame.config)
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpora", default="20news,enron_spam,reuters,bible/verses")
    parser.add_argument(
        "--configs", default="char24,word5,char24-params", help="e.g. char24, word5-14x8, char24-params"
    )
    parser.add_argument("--thresholds", default="0.5,0.7,0.8,0.9")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument(
        "--peer-thresholds", default=None, help="thresholds peers run at with bands chosen per threshold (default: all)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="curate runs per cell; seconds are their median")
    parser.add_argument("--rerun", default="", help="tools whose cached runs are discarded")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--cache", type=Path, default=Path("out/quality"))
    parser.add_argument("--peers-python", default="/tmp/peers/bin/python")
    parser.add_argument("--report", type=Path, default=Path("docs/quality.md"))
    parser.add_argument("--plot", type=Path, default=Path("docs/img/quality_recall_precision.png"))
    args = parser.parse_args()
    command = "python scripts/eval_quality.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v != parser.get_default(k)
    )
    args.corpora, args.tools = args.corpora.split(","), args.tools.split(",")
    args.configs = [Config.parse(name) for name in args.configs.split(",")]
    args.thresholds = [float(t) for t in args.thresholds.split(",")]
    args.peer_thresholds = (
        [float(t) for t in args.peer_thresholds.split(",")] if args.peer_thresholds else args.thresholds
    )
    args.rerun, args.reran = set(filter(None, args.rerun.split(","))), set()
    logging.getLogger("distributed").setLevel(logging.ERROR)
    rows = evaluate(args)
    (args.cache / "results.json").write_text(json.dumps(rows, indent=1, default=float) + "\n")
    write_report(rows, args.report, command.strip())
    plot(rows, args.plot)
    print(f"{len(rows)} rows -> {args.report}, {args.plot}")


if __name__ == "__main__":
    main()
