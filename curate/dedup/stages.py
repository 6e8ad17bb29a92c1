"""How a chain of stages is run: one lazy graph, or stage by stage through a checkpoint.

The stage functions of :mod:`curate.dedup` build lazy Dask collections. A chain of them (exact
dedup, fuzzy dedup, resolving the two) calls each stage as ``stage(name, params, build)``:

- ``name`` names the stage (its folder in ``OUT/_stages``, its time in ``summary.json``);
- ``params`` are the parameters it reads besides the stages before it (JSON-able);
- ``build()`` returns the stage's result: a Dask DataFrame, or a dict of them and of Dask
  scalars (counts computed with the frames).

:func:`build_now` (the Python API's) returns ``build()`` itself: the whole chain is one graph and
nothing runs until it is computed. ``curate dedup`` passes a stage that computes and writes each
result and returns it read back from disk (:class:`curate.checkpoints.Checkpoints`), so each stage
starts from data on disk and ``--resume`` can skip the stages already written. Either way the
chain calls the same functions in the same order: there is one path.
"""

from collections.abc import Callable
from typing import Protocol


class Stage(Protocol):
    """How a chain calls each stage: ``stage(name, params, build)`` returns ``build()``'s result,
    as built (:func:`build_now`) or computed and read back (:class:`curate.checkpoints.Checkpoints`)."""

    def __call__(self, name: str, params: dict, build: Callable[[], object]) -> object: ...


def build_now(name: str, params: dict, build: Callable[[], object]) -> object:
    """The stage's lazy result as built: nothing is computed or written."""
    return build()


__all__ = ["Stage", "build_now"]
