"""Fuzzy dedup front class: MinHash -> LSH buckets -> edges -> verify (two rounds) -> components -> groups."""

import dask.dataframe as dd

from curate.config import FuzzyConfig
from curate.dedup.components import connected_components
from curate.dedup.edges import bucket_stars, buckets_over_cap, member_pairs, unique_edges
from curate.dedup.keep import KeepPolicy
from curate.dedup.minhash import lsh_buckets
from curate.dedup.representatives import component_groups
from curate.dedup.verify import JACCARD, score_edges, verify_edges


class FuzzyDedup:
    """Near-duplicate groups by MinHash + LSH, optionally verified by exact Jaccard similarity.

    Each method is one stage (Dask DataFrame in, Dask DataFrame out), so a pipeline can write
    or persist between stages; calling the object chains them all.

    Parameters
    ----------
    config : FuzzyConfig, default=FuzzyConfig()
    text_field, id_field : str
    keep : KeepPolicy, default=KeepPolicy("first")

    References
    ----------
    .. [1] A. Broder, "On the resemblance and containment of documents", 1997.
    .. [2] Leskovec, Rajaraman, Ullman, "Mining of Massive Datasets", ch. 3 (banding).
    .. [3] Kiveris et al., "Connected Components in MapReduce and Beyond", SoCC 2014.
    .. [4] NeMo Curator fuzzy deduplication (the parameters' defaults).
    """

    def __init__(
        self, config: FuzzyConfig = FuzzyConfig(), *, text_field: str = "text", id_field: str = "id", keep: KeepPolicy = KeepPolicy()
    ):
        self.config, self.text_field, self.id_field, self.keep = config, text_field, id_field, keep

    def __repr__(self) -> str:
        return f"FuzzyDedup({self.config!r}, keep={self.keep})"

    def buckets(self, docs: dd.DataFrame) -> dd.DataFrame:
        """``(_bucket, _doc)`` pairs; see :func:`curate.dedup.minhash.lsh_buckets`."""
        return lsh_buckets(docs, self.text_field, self.config)

    def stars(self, buckets: dd.DataFrame) -> dd.DataFrame:
        """``(_bucket, u, v, _members)`` rows; see :func:`curate.dedup.edges.bucket_stars`."""
        return bucket_stars(buckets)

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
        return scored[scored[JACCARD] >= self.config.threshold]

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

    def components(self, edges: dd.DataFrame) -> dd.DataFrame:
        """``(node, component)``; see :func:`curate.dedup.components.connected_components`."""
        return connected_components(edges[["u", "v"]], local_max_edges=self.config.local_components_max_edges)

    def groups(self, components: dd.DataFrame, docs: dd.DataFrame) -> dd.DataFrame:
        """The group table; see :func:`curate.dedup.representatives.component_groups`."""
        return component_groups(
            components, docs, text_field=self.text_field, id_field=self.id_field, keep=self.keep, config=self.config
        )

    def __call__(self, docs: dd.DataFrame) -> dd.DataFrame:
        """All stages on ``docs`` (columns ``_doc``, id, text, keep column); returns the group table."""
        stars = self.stars(self.buckets(docs))
        scored = self.score(self.edges(stars), docs)
        edges = self.passed(scored)
        if self.config.verify:
            pairs = self.member_pairs(stars, scored, self.components(edges))
            edges = dd.concat([edges, self.verify(pairs, docs)])
        return self.groups(self.components(edges), docs)
