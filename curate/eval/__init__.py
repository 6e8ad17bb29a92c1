"""Measuring fuzzy dedup against the truth: every pair of similar documents, found exactly.

:mod:`curate.eval.allpairs` holds the all-pairs similarity kernels (prefix filtering) and
:mod:`curate.eval.quality` the precision and recall of a tool's removals against them
(``scripts/eval_quality.py``, ``docs/quality.md``). Nothing here is needed to deduplicate.
"""
