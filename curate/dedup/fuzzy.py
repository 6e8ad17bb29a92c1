"""Fuzzy dedup front class: MinHash -> LSH buckets -> edges -> verify (two rounds) -> components -> groups."""

import dask.dataframe as dd

from curate.config import FuzzyConfig
from curate.dedup.components import connected_components
from curate.dedup.edges import bucket_stars, buckets_over_cap, member_pairs, stars_with_member_pairs, unique_edges
from curate.dedup.keep import KeepPolicy
from curate.dedup.keys import require_columns, select
from curate.dedup.minhash import lsh_buckets
from curate.dedup.representatives import component_groups
from curate.dedup.stages import Stage, build_now
from curate.dedup.verify import passed_edges, score_edges, verify_edges
from curate.schema import DOC


class FuzzyDedup:
    """Near-duplicate groups by MinHash + LSH, optionally verified by exact Jaccard similarity.

    Each method is one stage (Dask DataFrame in, Dask DataFrame out), so a pipeline can write
    or persist between stages; calling the object chains them all.

    Parameters
    ----------
    config : FuzzyConfig, default=FuzzyConfig()
    text_field, id_field : str
    keep : KeepPolicy or str, default=KeepPolicy("first")
        A policy or its spec (``"longest"``, ``"max:date"``: :meth:`KeepPolicy.parse`).

    Raises
    ------
    TypeError
        If ``config`` is not a FuzzyConfig (a whole ``RunConfig``: its ``.fuzzy``).

    References
    ----------
    .. [1] A. Broder, "On the resemblance and containment of documents", 1997.
    .. [2] Leskovec, Rajaraman, Ullman, "Mining of Massive Datasets", ch. 3 (banding).
    .. [3] Kiveris et al., "Connected Components in MapReduce and Beyond", SoCC 2014.
    .. [4] NeMo Curator fuzzy deduplication: the default shingles (character 24-grams) and
       260 MinHash values, and libcudf's ``nvtext::minhash`` signatures. Its 20 x 13 bands are
       no longer the default: bands are chosen for the threshold (:mod:`curate.params`).
    .. [5] datasketch ``MinHashLSH``: the search for bands and rows (with curate's weights,
       0.01 / 0.99, rather than its equal ones).
    """

    def __init__(
        self,
        config: FuzzyConfig = FuzzyConfig(),
        *,
        text_field: str = "text",
        id_field: str = "id",
        keep: KeepPolicy | str = KeepPolicy(),
    ):
        if not isinstance(config, FuzzyConfig):  # else an AttributeError deep in the first stage
            fix = " (a RunConfig: pass its .fuzzy, e.g. load_config(...).fuzzy)" if hasattr(config, "fuzzy") else ""
            raise TypeError(f"FuzzyDedup takes a FuzzyConfig, got {type(config).__name__}{fix}")
        self.config, self.text_field, self.id_field, self.keep = config, text_field, id_field, KeepPolicy.parse(keep)

    def __repr__(self) -> str:
        return f"FuzzyDedup({self.config!r}, keep={self.keep})"

    def buckets(self, docs: dd.DataFrame) -> dd.DataFrame:
        """``(_bucket, _doc)`` pairs; see :func:`curate.dedup.minhash.lsh_buckets`."""
        return lsh_buckets(docs, self.text_field, self.config)

    def stars(self, buckets: dd.DataFrame) -> dd.DataFrame:
        """``(_bucket, u, v, _members)`` rows; see :func:`curate.dedup.edges.bucket_stars` (the
        keep policy's reference: buckets of its documents alone give none)."""
        return bucket_stars(buckets, self.keep.reference)

    def edges(self, stars: dd.DataFrame) -> dd.DataFrame:
        """Candidate edges ``(u, v)``; see :func:`curate.dedup.edges.unique_edges`."""
        return unique_edges(stars)

    def score(self, edges: dd.DataFrame, docs: dd.DataFrame) -> dd.DataFrame:
        """Every edge with its ``jaccard``; unchanged when verify is off. See :func:`curate.dedup.verify.score_edges`."""
        if not self.config.verify:
            return edges
        return score_edges(edges, docs, self.text_field, self.config)

    def passed(self, scored: dd.DataFrame) -> dd.DataFrame:
        """The edges of :meth:`score` at or above the threshold (all of them when verify is off)."""
        if not self.config.verify:
            return scored
        return passed_edges(scored, self.config.threshold)

    def member_pairs(self, stars: dd.DataFrame, scored: dd.DataFrame, components: dd.DataFrame) -> dd.DataFrame:
        """Second round: pairs of members of buckets where one failed against the anchor, given
        ``scored`` from :meth:`score` (verify on) and the :meth:`components` of its
        :meth:`passed` edges; see :func:`curate.dedup.edges.member_pairs`."""
        return member_pairs(stars, scored, components, self.config.threshold, self.config.max_member_pairs)

    def buckets_over_cap(self, stars: dd.DataFrame, scored: dd.DataFrame, components: dd.DataFrame):
        """Delayed count of buckets that :meth:`member_pairs` bounded by ``max_member_pairs``."""
        return buckets_over_cap(stars, scored, components, self.config.threshold, self.config.max_member_pairs)

    def verify(self, edges: dd.DataFrame, docs: dd.DataFrame) -> dd.DataFrame:
        """Edges at or above the threshold, with their ``jaccard``; unchanged when verify is off."""
        if not self.config.verify:
            return edges
        return verify_edges(edges, docs, self.text_field, self.config)

    def components(self, edges: dd.DataFrame, n_edges: int | None = None) -> dd.DataFrame:
        """``(node, component)``; see :func:`curate.dedup.components.connected_components`."""
        return connected_components(
            edges[["u", "v"]], local_max_edges=self.config.local_components_max_edges, n_edges=n_edges
        )

    def groups(self, components: dd.DataFrame, docs: dd.DataFrame, edges: dd.DataFrame | None = None) -> dd.DataFrame:
        """The group table, given the verified ``edges`` of the components if at hand (their
        similarities are not computed again); see :func:`curate.dedup.representatives.component_groups`."""
        return component_groups(
            components,
            docs,
            text_field=self.text_field,
            id_field=self.id_field,
            keep=self.keep,
            config=self.config,
            edges=edges,
        )

    def columns(self) -> list[str]:
        """The document columns the stages after LSH read: ``_doc``, the id, the text and the keep policy's column."""
        return list(dict.fromkeys([DOC, self.id_field, self.text_field, *self.keep.columns()]))

    def run(self, docs: dd.DataFrame, stage: Stage = build_now, components=None) -> dict:
        """Every stage on ``docs``, each through ``stage`` (see :mod:`curate.dedup.stages`).

        MinHash + LSH give the candidate edges (stars from each bucket's anchor); the candidates'
        documents are selected where they lie; verification scores every edge; with verification
        on, a second round compares the members of buckets where one failed against the anchor
        (:func:`curate.dedup.edges.member_pairs`); connected components of the verified edges are
        split into groups around their representatives.

        Parameters
        ----------
        docs : dask.dataframe.DataFrame
            A document frame (:mod:`curate.dedup.keys`) with :meth:`columns`.
        stage : callable, default=:func:`curate.dedup.stages.build_now`
            ``stage(name, params, build)``: the Python API builds every stage into one lazy
            graph; ``curate dedup`` writes each to disk and reads it back (``--resume``).
        components : callable, optional
            ``components(edges)`` for the graphs of verified edges; default :meth:`components`
            (one task per graph, nothing computed while the graph is built).

        Returns
        -------
        dict
            Lazy frames: ``groups`` (the group table), ``candidates`` (candidate edges),
            ``edges`` (verified edges of both rounds), ``components``; with verification also
            ``member_pairs`` and ``member_edges``; and ``buckets_over_cap`` (an int, or a Dask
            scalar until computed).
        """
        components = components or self.components
        config = self.config
        # The parameters each stage reads besides the stages before it (keys for --resume).
        later = {
            "threshold",
            "verify",
            "local_components_max_edges",
            "max_member_pairs",
            "num_perm",
            "fp_weight",
            "fn_weight",
        }

        def lsh():
            stars = self.stars(self.buckets(docs))
            return {"edges": self.edges(stars), "stars": stars_with_member_pairs(stars)}

        found = stage("minhash+lsh", config.model_dump(exclude=later), lsh)
        candidates = found["edges"]
        columns = self.columns()
        # Only the documents of a candidate edge are read again and moved, by every stage after this.
        chosen = stage("select", {"columns": columns}, lambda: select(docs[columns], endpoints(candidates)))
        scored = stage(
            "verify", {"threshold": config.threshold, "verify": config.verify}, lambda: self.score(candidates, chosen)
        )
        out = {"candidates": candidates, "buckets_over_cap": 0}
        edges = self.passed(scored)
        if config.verify:  # without verification nothing failed, and the stars already connect every bucket

            def pairs():
                graph = components(edges)
                return {
                    "pairs": self.member_pairs(found["stars"], scored, graph),
                    "buckets_over_cap": self.buckets_over_cap(found["stars"], scored, graph),
                }

            second = stage("member_pairs", {"max_member_pairs": config.max_member_pairs}, pairs)
            members = stage("verify_members", {}, lambda: self.verify(second["pairs"], chosen))
            edges = dd.concat([edges, members])
            out.update(member_pairs=second["pairs"], member_edges=members, buckets_over_cap=second["buckets_over_cap"])
        graph = stage("components", {}, lambda: components(edges))
        groups = stage("groups", self.keep.stage_params(), lambda: self.groups(graph, chosen, edges))
        return {**out, "edges": edges, "components": graph, "groups": groups}

    def __call__(self, docs: dd.DataFrame) -> dd.DataFrame:
        """All stages on ``docs`` (a document frame with :meth:`columns`); returns the group table, lazily.

        Raises
        ------
        ValueError
            If ``docs`` lacks one of :meth:`columns` (``_doc``: :func:`curate.add_doc_keys`).
        """
        require_columns(docs, self.columns())
        return self.run(docs)["groups"]


def endpoints(edges: dd.DataFrame) -> dd.DataFrame:
    """Both ends of every edge as one ``_doc`` column (repeats and all)."""
    return dd.concat([edges[["u"]].rename(columns={"u": DOC}), edges[["v"]].rename(columns={"v": DOC})])
