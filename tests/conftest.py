import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path

import dask
import pytest
from dask.dataframe.dask_expr._expr import Expr, MaybeAlignPartitions, OpAlignPartitions
from distributed import Client, LocalCluster

logging.getLogger("distributed.shuffle").setLevel(logging.ERROR)  # P2P start/stop notices

FIXTURES = Path(__file__).parent / "data"
# CURATE_SHARED_DATA: the corpora elsewhere (scripts/gpu_check.sh on a host that gets them with the tree).
SHARED = Path(os.environ.get("CURATE_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def shared_corpus(name: str) -> Path:
    """A corpus under ../shared/data, or a clean skip where that folder is absent."""
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


@pytest.fixture(scope="session", autouse=True)
def dask_temp(tmp_path_factory):
    """Dask's temporary directory for the session: a folder of pytest's, which it prunes.

    Disk shuffles (the synchronous scheduler, no client) make ``*.partd`` folders that only a
    normal exit of the process removes (partd's exit hook; dask/dask#2139): a test session
    killed at its end (pytest-xdist gives a worker 10 s) left about 200 empty ones in /tmp.
    """
    with dask.config.set(temporary_directory=str(tmp_path_factory.mktemp("dask-temp"))):
        yield


@pytest.fixture(scope="session")
def client():
    """A cluster of two single-threaded worker processes, as the CLI starts, shared by the session.

    Worker processes, not threads: in-process workers ran P2P shuffles' pandas/pyarrow
    conversions in two threads of one process and once hung the suite (every thread waiting
    on a lock); separate processes are also what users run.
    """
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def sync():
    """Dask's synchronous scheduler for the test, which ``curate.pipeline.dedup`` takes over the
    session's client (:func:`curate.cluster.current_client`, Dask's precedence), with disk shuffles.

    For tests of what a run writes, not of how a cluster runs it: a run of a few documents costs
    a third of one on the cluster (no scheduler round trips), and the path that ``curate.deduplicate``
    takes on one machine is tested too. ``test_pipeline`` checks that both give the same bytes.
    """
    with dask.config.set(scheduler="sync"):
        yield


@pytest.fixture
def joined(client) -> list[str]:
    """``curate dedup`` flags that run on the session's cluster (``--scheduler-address``) instead of
    starting one: for command-line tests that are not about the cluster's start (each embedded
    start costs seconds of the suite)."""
    return ["--scheduler-address", client.scheduler.address, "--no-progress"]


@pytest.fixture
def fixture_docs() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]


def write_jsonl(path: Path, records) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


@contextmanager
def realignments():
    """Record where Dask, while lowering the expressions built inside the block, aligns frames it
    cannot prove partitioned alike by shuffling or repartitioning them on their index: a list of
    descriptions, filled as collections are computed. curate's frames repeat index labels across
    partitions, so such an alignment pairs rows of different documents (dask-expr's
    ``MaybeAlignPartitions``, e.g. ``frame[mask]`` with a mask from another frame)."""
    found = []

    def recording(lower):
        def _lower(self):
            lowered = lower(self)
            given = {op._name for op in self.operands if isinstance(op, Expr)}
            if lowered is not None and any(dep._name not in given for dep in lowered.dependencies()):
                found.append(f"{type(self).__name__} of {', '.join(arg._name for arg in self.args)}")
            return lowered

        return _lower

    with pytest.MonkeyPatch.context() as patch:
        for cls in (MaybeAlignPartitions, OpAlignPartitions):
            patch.setattr(cls, "_lower", recording(cls._lower))
        yield found
