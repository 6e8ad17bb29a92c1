"""GPU parity: every per-partition operation and whole runs give the CPU path's values.

Skipped unless cudf, dask-cudf, dask-cuda and a usable CUDA device are present (decided by
asking the device, not by importing cudf). Run with ``pytest -m gpu`` (scripts/gpu_check.sh).
"""

import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import curate
from curate import backend
from curate.cli import main
from curate.kernels.digests import CHUNK_BYTES
from curate.kernels.minhash import permutations
from tests.conftest import FIXTURES, shared_corpus
from tests.cuda_simulator_check import EXTRA, LONG
from tests.test_normalize_device import ALL_POINTS, OPTIONS, mixes

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        bool(backend.missing_gpu_packages()) or not backend.gpu_usable(),
        reason="needs cudf, dask-cudf, dask-cuda and a usable CUDA device",
    ),
]


@pytest.fixture(scope="module")
def texts() -> pd.Series:
    """Real text: 2,000 20news posts when the shared data is there, else the fixture; plus non-ASCII."""
    try:
        shard = shared_corpus("20news") / "part-00000.jsonl.gz"
        real = pd.read_json(shard, lines=True, nrows=2000, dtype=False)["text"].tolist()
    except pytest.skip.Exception:
        real = [json.loads(line)["text"] for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]
    # Long texts: several md5 chunks, several segments of the MinHash kernel's reduction.
    long = [LONG * 10, "x" * CHUNK_BYTES, "y" * (CHUNK_BYTES + 1)]
    return pd.Series(real + EXTRA + long + [None], dtype="str")


@pytest.fixture(scope="module")
def books() -> pd.Series:
    """Whole books (the first gutenberg shard): long documents, where one thread per document starved the GPU."""
    shard = shared_corpus("gutenberg") / "part-00000.jsonl.zst"
    return pd.read_json(shard, lines=True, dtype=False)["text"].astype("str")


def on_gpu(series: pd.Series):
    import cudf

    return cudf.Series(series)


def host(array):
    import cupy

    return cupy.asnumpy(array) if isinstance(array, cupy.ndarray) else np.asarray(array)


@pytest.mark.parametrize("digest", [backend.md5_hex, backend.sha256_hex])
def test_digests(texts, digest):
    assert digest(on_gpu(texts)).to_pandas().tolist() == digest(texts).tolist()


@pytest.mark.parametrize("digest", [backend.md5_hex, backend.sha256_hex])
def test_digests_of_books_and_a_slice(books, digest):
    # A slice of a column: its offsets do not start at 0.
    for series in (books, books.iloc[3:17]):
        gpu = digest(on_gpu(series))
        assert gpu.to_pandas().tolist() == digest(series).tolist()
        assert gpu.index.to_pandas().tolist() == series.index.tolist()


def test_text_buffers(texts):
    offsets, data = backend.text_buffers(on_gpu(texts.iloc[5:50]))
    cpu_offsets, cpu_data = backend.text_buffers(texts.iloc[5:50])
    offsets = host(offsets)
    assert np.array_equal(np.diff(offsets), np.diff(cpu_offsets))
    assert host(data)[offsets[0] : offsets[-1]].tobytes() == cpu_data[cpu_offsets[0] : cpu_offsets[-1]].tobytes()


def test_text_buffers_of_a_column_that_cudf_spills(texts):
    # to_pylibcudf unwraps buffers without unspilling them: a spilled one has no device memory.
    # With cuDF's device limit at 0, every buffer is spilled as it is made.
    from cudf.core.buffer.spill_manager import SpillManager, get_global_manager, set_global_manager

    previous = get_global_manager()
    set_global_manager(SpillManager(device_memory_limit=0))
    try:
        offsets, data = backend.text_buffers(on_gpu(texts.iloc[5:50]))
        offsets, data = host(offsets), host(data)
    finally:
        set_global_manager(previous)
    cpu_offsets, cpu_data = backend.text_buffers(texts.iloc[5:50])
    assert np.array_equal(np.diff(offsets), np.diff(cpu_offsets))
    assert data[offsets[0] : offsets[-1]].tobytes() == cpu_data[cpu_offsets[0] : cpu_offsets[-1]].tobytes()


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize(("width", "words"), [(24, False), (5, False), (2, False), (1, False), (3, True)])
def test_minhash_and_bands(texts, bits, width, words):
    a, b = permutations(260, 42, bits)
    signatures, counts = backend.minhash_signatures(on_gpu(texts), 42, a, b, width, words)
    cpu_signatures, cpu_counts = backend.minhash_signatures(texts, 42, a, b, width, words)
    assert np.array_equal(host(counts), cpu_counts)
    assert np.array_equal(host(signatures), cpu_signatures)
    buckets = backend.band_buckets(signatures, 20, 13)
    assert np.array_equal(host(buckets), backend.band_buckets(cpu_signatures, 20, 13))


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize(("width", "words"), [(5, True), (1, True), (24, False)])
def test_minhash_of_books(books, bits, width, words):
    a, b = permutations(112, 42, bits)
    signatures, counts = backend.minhash_signatures(on_gpu(books.iloc[:12]), 42, a, b, width, words)
    cpu_signatures, cpu_counts = backend.minhash_signatures(books.iloc[:12], 42, a, b, width, words)
    assert np.array_equal(host(counts), cpu_counts)
    assert np.array_equal(host(signatures), cpu_signatures)


@pytest.mark.parametrize(
    "options",
    [o for o in OPTIONS if sum(o.values()) in (0, 1, len(o) - 1, len(o))],  # none, each alone, all but each, all
    ids=lambda o: "+".join(k for k, v in o.items() if v) or "none",
)
def test_normalize(texts, options):
    # cudf's translate / replace / strip against the CPU; random mixes of every character the
    # map changes and of the trim characters (tests/test_normalize_device.py); every code point.
    series = pd.concat([texts, pd.Series(mixes(2000) + ["".join(ALL_POINTS)], dtype="str")], ignore_index=True)
    for nul in (True, False):  # a partition with a NUL character takes the host path
        one = pd.Series(["a\x00B,  c" if nul else "a B,  c", "Zwei  Wörter."], dtype="str")
        assert (
            backend.normalize_text(on_gpu(one), **options).to_pandas().tolist()
            == backend.normalize_text(one, **options).tolist()
        )
    series = series.str.replace("\x00", "", regex=False)  # the device path, every other code point
    gpu = backend.normalize_text(on_gpu(series), **options).to_pandas()
    cpu = backend.normalize_text(series, **options)
    # The texts hold a null: it stays null (NFKC takes it to the host and back).
    assert gpu.isna().tolist() == cpu.isna().tolist() and cpu.isna().sum() == 1
    assert gpu.fillna("").tolist() == cpu.fillna("").tolist()


def test_jaccard_greedy(texts):
    # As verification calls it: the partition's texts once, pairs by position, sorted by x.
    x = np.repeat(np.arange(len(texts)), 2)
    y = (x + np.tile([1, 7], len(texts))) % len(texts)
    for words, width in ((False, 24), (True, 3)):
        assert np.array_equal(
            backend.jaccard(on_gpu(texts), x, y, width, words),
            backend.jaccard(texts, x, y, width, words),
        )
    starts = np.array([0, 10, 40, len(texts)], np.int64)
    for gpu, cpu in zip(
        backend.greedy_representatives(on_gpu(texts), starts, 0.1, 5, False),
        backend.greedy_representatives(texts, starts, 0.1, 5, False),
    ):
        assert np.array_equal(gpu, cpu)


@pytest.mark.parametrize(("width", "words"), [(24, False), (5, True), (1, False)])
def test_jaccard_of_books(books, width, words):
    # Long documents (hundreds of thousands of shingles), a near copy and a half of one, a slice.
    series = books.iloc[2:14]
    first = series.iloc[0]
    series = pd.concat(
        [series, pd.Series([first.replace(" the ", " a ", 50), first[: len(first) // 2], ""], dtype="str")],
        ignore_index=True,
    )
    n = len(series)
    x = np.repeat(np.arange(n), 3)
    y = np.where(np.arange(3 * n) % 3 == 0, n - 3, (x + np.tile([0, 1, 2], n)) % n)
    gpu = backend.jaccard(on_gpu(series), x, y, width, words)
    cpu = backend.jaccard(series, x, y, width, words)
    assert len(np.unique(cpu)) > 5 and np.array_equal(gpu, cpu)


def test_jaccard_of_books_tile_by_tile(books):
    # Above its budget the device kernel takes the pairs tile by tile (the second round's
    # partitions may hold the texts of nearly every candidate): the CPU kernel's values still.
    import cupy

    from curate.backend_cudf import text_buffers_cudf
    from curate.kernels.cuda import jaccard_cuda

    series = books.iloc[2:14]
    series = pd.concat(
        [series, pd.Series([series.iloc[0].replace(" the ", " a ", 50)], dtype="str")], ignore_index=True
    )
    n = len(series)
    x = np.repeat(np.arange(n), 3)
    y = np.where(np.arange(3 * n) % 3 == 0, n - 1, (x + np.tile([0, 1, 5], n)) % n)
    offsets, data = text_buffers_cudf(on_gpu(series))
    budget = int(offsets[-1] - offsets[0]) // 6
    got = cupy.asnumpy(jaccard_cuda(offsets, data, x, y, 24, False, xp=cupy, budget=budget))
    cpu = backend.jaccard(series, x, y, 24, False)
    assert len(np.unique(cpu)) > 5 and np.array_equal(got, cpu)


EDGE_PARTITIONS = {
    "no rows": [],
    "all empty": ["", "", ""],  # a strings column with no character bytes: a zero-length data buffer
    "all null": [None, None],
    "one row": ["one short text"],
    "shorter than a shingle": ["ab", "", "abc d", None],
}


@pytest.mark.parametrize("kind", EDGE_PARTITIONS)
def test_partitions_with_little_or_no_text_match_cpu(kind):
    # Every per-partition operation on the partitions a run meets at its edges (a filtered or
    # tiny partition), sliced too (offsets not from 0): the CPU path's values, no error.
    base = pd.Series(["lead", *EDGE_PARTITIONS[kind]], dtype="str")
    for series in (base.iloc[1:], pd.Series(EDGE_PARTITIONS[kind], dtype="str")):
        gpu = on_gpu(series)
        for digest in (backend.md5_hex, backend.sha256_hex):
            assert digest(gpu).to_pandas().tolist() == digest(series).tolist()
        for bits in (32, 64):
            a, b = permutations(26, 42, bits)
            for width, words in ((5, False), (3, True), (1, False)):
                signatures, counts = backend.minhash_signatures(gpu, 42, a, b, width, words)
                cpu_signatures, cpu_counts = backend.minhash_signatures(series, 42, a, b, width, words)
                assert np.array_equal(host(counts), cpu_counts) and np.array_equal(host(signatures), cpu_signatures)
                assert np.array_equal(
                    host(backend.band_buckets(signatures, 2, 13)), backend.band_buckets(cpu_signatures, 2, 13)
                )
        x = np.arange(len(series))
        assert np.array_equal(
            backend.jaccard(gpu, x, x[::-1].copy(), 5, False), backend.jaccard(series, x, x[::-1].copy(), 5, False)
        )
        options = {"lowercase": True, "whitespace": True, "punctuation": True, "nfkc": False}
        normalized = backend.normalize_text(gpu, **options).to_pandas()
        assert normalized.fillna("\0").tolist() == backend.normalize_text(series, **options).fillna("\0").tolist()


def test_label_components():
    # The one-task components path on cudf edges (cuGraph's kernel where pylibcugraph is
    # installed, else scipy after a copy) against the pandas path: same smallest-node labels.
    rng = np.random.default_rng(0)
    ids = rng.choice(2**62, 5000, replace=False).astype(np.int64)
    edges = pd.DataFrame({"u": rng.choice(ids, 4000), "v": rng.choice(ids, 4000)})
    edges = pd.concat([edges, pd.DataFrame({"u": ids[:50], "v": ids[:50]})], ignore_index=True)  # self-loops
    import cudf

    gpu = backend.label_components(cudf.from_pandas(edges))
    cpu = backend.label_components(edges)
    assert isinstance(gpu, pd.DataFrame) and gpu.equals(cpu)


def test_numba_cuda_kernels_on_the_device():
    check = Path(__file__).with_name("cuda_simulator_check.py")
    result = subprocess.run(
        [sys.executable, str(check), "--device"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "ok", result.stdout + result.stderr


def test_partitions_with_either_kind_of_index_keep_their_columns():
    # A RangeIndex partition and filtered ones (unnamed integer index) in one shuffle: P2P
    # shuffles brought them back with an extra `index` column (first H200 run, in what is now in_order).
    import cudf
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from curate.dedup.keys import in_order

    frame = pd.DataFrame({"_doc": np.arange(100, dtype=np.int64)[::-1], "kind": "exact"})
    with LocalCUDACluster(n_workers=1) as cluster, Client(cluster), backend.use_backend("gpu"):
        whole = dd.from_pandas(cudf.from_pandas(frame.iloc[:50]), npartitions=2)
        filtered = dd.from_pandas(cudf.from_pandas(frame.iloc[50:]), npartitions=2)
        filtered = filtered[filtered["_doc"] % 2 == 0]
        ordered = in_order(dd.concat([whole, filtered]), (0, 30, 60, 99), by=["_doc", "kind"])
        result = backend.on_host(ordered).compute()
    assert list(result.columns) == ["_doc", "kind"]
    assert result["_doc"].tolist() == sorted([*range(50, 100), *range(0, 50, 2)])


def test_the_embedded_cluster_gives_each_gpu_worker_its_gpu_and_the_cores():
    from dask.system import CPU_COUNT
    from dask_cuda.utils import get_n_gpus

    from curate.cluster import connect
    from curate.config import load_config

    with connect(load_config().cluster, "gpu") as client:
        workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
    assert len(workers) == get_n_gpus()
    assert all(w["resources"] == {"GPU": 1} and w["nthreads"] == max(1, CPU_COUNT // len(workers)) for w in workers)


def _memory_setup():
    import cudf
    import cupy
    from numba.cuda.cudadrv import driver

    driver._ensure_memory_manager()
    allocator = cupy.cuda.get_allocator()
    return (
        cudf.get_option("spill_device_limit"),
        f"{allocator.__module__}.{allocator.__name__}",
        driver._memory_manager.__name__,
    )


def test_the_embedded_cluster_gives_cudf_the_device_limit_and_kernels_rmm():
    # The limit went into LocalCUDACluster's env, which dask-cuda replaces per worker with
    # CUDA_VISIBLE_DEVICES alone: cuDF spilled only when an allocation failed. CuPy and numba
    # allocated outside RMM, where neither RMM nor cuDF's spilling on demand sees their memory.
    from curate.cluster import connect
    from curate.config import load_config

    config = load_config(None, {"cluster": {"gpu": {"enable_cudf_spill": True, "device_memory_limit": "32MB"}}})
    with connect(config.cluster, "gpu") as client:
        setups = client.run(_memory_setup)
    assert set(setups.values()) == {(32_000_000, "rmm.allocators.cupy.rmm_cupy_allocator", "RMMNumbaManager")}


def dedup(inputs, out: Path, *flags) -> dict[str, bytes]:
    """Every output file of a run by its path in OUT, but summary.json (times, backend)."""
    result = CliRunner().invoke(main, ["dedup", *map(str, inputs), "-o", str(out), "--no-progress", *flags])
    assert result.exit_code == 0, result.output
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert {"removed.parquet", "duplicates.parquet"} <= files.keys()
    return {name: data for name, data in files.items() if name != "summary.json"}


def test_skip_mode_run_with_bad_records_and_repeated_ids_matches_cpu(tmp_path):
    # `--on-error skip --backend gpu` had not run on a device: each bad line's bytes stay on the
    # host (cudf has no binary type) and repeated ids are marked on cudf partitions.
    lines = (FIXTURES / "docs.jsonl").read_text().splitlines()
    again = json.dumps({**json.loads(lines[0]), "text": "the same id, another text"})
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("\n".join([*lines[:6], '{"id": "n1", "text": 5}', "not json"]) + "\n")
    (tmp_path / "in" / "b.jsonl").write_text("\n".join([again, *lines[6:]]) + "\n")
    cpu = dedup([tmp_path / "in"], tmp_path / "cpu", "--backend", "cpu", "--on-error", "skip")
    assert sum(name.startswith("rejected/") for name in cpu) == 1
    assert dedup([tmp_path / "in"], tmp_path / "gpu", "--backend", "gpu", "--on-error", "skip") == cpu


def test_reference_run_matches_cpu(tmp_path):
    # --reference on GPU workers: the stars of reference documents alone left out on cudf
    # partitions, the fixed rows through the cudf dispatcher of the greedy split.
    lines = (FIXTURES / "docs.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "published.jsonl").write_text("".join(lines[:6]))
    (tmp_path / "new.jsonl").write_text("".join(lines[6:]))
    flags = ["--reference", str(tmp_path / "published.jsonl"), "--keep", "longest"]
    cpu = dedup([tmp_path / "new.jsonl"], tmp_path / "cpu", *flags, "--backend", "cpu")
    written = [json.loads(line)["id"] for line in cpu["deduplicated/part.00000.jsonl"].splitlines()]
    assert written == ["a9", "a10", "a11"]
    assert dedup([tmp_path / "new.jsonl"], tmp_path / "gpu", *flags, "--backend", "gpu") == cpu


def test_keep_max_on_integers_past_2_53_with_nulls_matches_cpu(tmp_path):
    # The host copy of a cudf partition made an integer column with nulls float64: 2**53 and
    # 2**53 + 1 tied, so --keep max kept the earlier copy where the CPU run keeps the later one.
    text = "the same text in three records, so that one group holds them all"
    lines = [{"id": "a", "text": text, "score": 2**53}, {"id": "b", "text": text, "score": None}]
    lines.append({"id": "c", "text": text, "score": 2**53 + 1})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    flags = ["--mode", "exact", "--keep", "max:score"]
    cpu = dedup([tmp_path / "in.jsonl"], tmp_path / "cpu", "--backend", "cpu", *flags)
    assert [json.loads(line)["id"] for line in cpu["deduplicated/part.00000.jsonl"].splitlines()] == ["c"]
    assert dedup([tmp_path / "in.jsonl"], tmp_path / "gpu", "--backend", "gpu", *flags) == cpu


def test_jsonl_to_parquet_with_fields_of_empty_lists_and_objects_matches_cpu(tmp_path):
    # A field that is [] or {} in every record is list<null> or struct<> in Arrow, which libcudf
    # may not hold (a helper's reading, not yet run on a device). JSONL to Parquet read every
    # field onto the device; now the stages take only the id, text and keep columns there, and
    # the final write reads the rest on the host.
    lines = [json.loads(line) for line in (FIXTURES / "docs.jsonl").read_text().splitlines()]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({**r, "tags": [], "meta": {}}) + "\n" for r in lines))
    flags = ["--output-format", "parquet"]
    cpu = dedup([tmp_path / "in.jsonl"], tmp_path / "cpu", "--backend", "cpu", *flags)
    assert dedup([tmp_path / "in.jsonl"], tmp_path / "gpu", "--backend", "gpu", *flags) == cpu


def test_sorts_on_cudf_partitions_do_not_warn():
    # sort_values(kind="stable") made cudf warn on every partition of a run (its sort is always stable).
    import cudf

    from curate.dedup.keys import in_order

    table = cudf.DataFrame({"_doc": [5, 1, 9, 3], "kind": ["exact"] * 4})
    with dask.config.set(scheduler="sync"), warnings.catch_warnings():
        warnings.simplefilter("error")
        result = in_order(dd.from_pandas(table, npartitions=2), (0, 4, 9)).compute()
    assert result["_doc"].to_arrow().to_pylist() == [1, 3, 5, 9]


@pytest.mark.parametrize("mode", ["exact", "fuzzy", "both"])
@pytest.mark.parametrize("source", ["frame", "read_documents"])
def test_api_on_cudf_partitions_matches_pandas(mode, source):
    # curate.deduplicate on device frames had not run: keying a frame without _doc
    # (rename_axis), joining the host step's components to cudf documents, and mode exact or
    # fuzzy's empty group table of the other kind each failed as the graph was built (read in
    # the RAPIDS 26.10 source).
    import cudf

    frame = pd.read_json(FIXTURES / "docs.jsonl", lines=True, dtype=False)
    results = []
    for name in ("cpu", "gpu"):
        with backend.use_backend(name), dask.config.set(scheduler="sync"):
            if source == "read_documents":
                docs = curate.read_documents(str(FIXTURES / "docs.jsonl"))
            else:
                docs = dd.from_pandas(frame if name == "cpu" else cudf.from_pandas(frame), npartitions=2)
            kept, removed, duplicates = curate.deduplicate(docs, mode=mode, id_field="id").compute()
        kept, removed, duplicates = (
            backend.to_host(table).reset_index(drop=True) for table in (kept, removed, duplicates)
        )
        results.append((kept[["id", "text"]], removed, duplicates.sort_values(["kind", "id"], ignore_index=True)))
    (cpu_kept, cpu_removed, cpu_duplicates), (gpu_kept, gpu_removed, gpu_duplicates) = results
    assert len(cpu_removed) > 0
    pd.testing.assert_frame_equal(gpu_kept, cpu_kept, check_dtype=False)
    pd.testing.assert_frame_equal(gpu_removed, cpu_removed, check_dtype=False)
    pd.testing.assert_frame_equal(gpu_duplicates, cpu_duplicates, check_dtype=False)


def shown(dtype) -> str:
    return f"{dtype!r}{getattr(dtype, 'storage', '')}"  # pandas' string dtypes show no storage


def test_stage_frames_read_back_on_the_device_keep_their_meta(tmp_path):
    # Every stage is written to Parquet and read back; on the H200 the rows of the exact and the
    # fuzzy group tables could not be concatenated ("All columns must be the same type"), and
    # which column differed was not seen. Read back on the device, each partition of every stage
    # has its meta's dtypes and a RangeIndex.
    from curate.checkpoints import read_stage_frame

    dedup([FIXTURES / "docs.jsonl"], tmp_path / "out", "--backend", "gpu", "--keep-stages")
    differ = []
    with backend.use_backend("gpu"), dask.config.set(scheduler="sync"):
        for folder in sorted({f.parent for f in (tmp_path / "out" / "_stages").rglob("part.*.parquet")}):
            frame = read_stage_frame(folder)
            for i in range(frame.npartitions):
                part = frame.get_partition(i).compute()
                odd = [(c, shown(part[c].dtype), shown(t)) for c, t in frame._meta.dtypes.items() if part[c].dtype != t]
                if odd or type(part.index).__name__ != "RangeIndex":
                    differ.append((folder.name, i, type(part.index).__name__, odd))
    assert differ == []


def gutenberg_slice(n_shards: int) -> list[Path]:
    return sorted(shared_corpus("gutenberg").glob("part-*.jsonl.zst"))[:n_shards]


@pytest.mark.parametrize("corpus", ["20news", "gutenberg", "both kinds"])
def test_whole_run_matches_cpu(tmp_path, corpus):
    # 20news has fuzzy duplicates only and the gutenberg slice none; "both kinds" removes exact
    # and fuzzy duplicates, whose rows meet in the removed table (their concat failed on the
    # first H200 run that had both: "All columns must be the same type").
    inputs = {"20news": [shared_corpus("20news")], "gutenberg": gutenberg_slice(2)}.get(
        corpus, [FIXTURES / "docs.jsonl"]
    )
    cpu = dedup(
        inputs,
        tmp_path / "cpu",
        "--backend",
        "cpu",
        "--n-workers",
        "2",
        "--threads-per-worker",
        "1",
    )
    if corpus == "both kinds":
        kinds = pq.read_table(io.BytesIO(cpu["removed.parquet"])).column("kind").to_pylist()
        assert {"exact", "fuzzy"} <= set(kinds)
    assert dedup(inputs, tmp_path / "gpu", "--backend", "gpu") == cpu
    # Each GPU worker's peak device memory (RMM's statistics), for the run and per stage.
    summary = json.loads((tmp_path / "gpu" / "summary.json").read_text())
    device = summary["peak_device_bytes"]
    assert device["workers"] and min(device["workers"].values()) > 0
    assert all(0 <= stage["total"] <= device["total"] for stage in summary["stage_peak_device_bytes"].values())


def test_spilling_cluster_with_device_limit_below_the_data(tmp_path):
    # About 64 MB of text (4 gutenberg shards) through workers allowed 32 MB of device memory.
    inputs = gutenberg_slice(4)
    cpu = dedup(
        inputs,
        tmp_path / "cpu",
        "--backend",
        "cpu",
        "--n-workers",
        "2",
        "--threads-per-worker",
        "1",
        "--blocksize",
        "16MB",  # the same partitions, so that deduplicated/part.N are the same files
    )
    flags = ["--rmm-async", "--enable-cudf-spill", "--device-memory-limit", "32MB", "--blocksize", "16MB"]
    assert dedup(inputs, tmp_path / "gpu", "--backend", "gpu", *flags) == cpu
    summary = json.loads((tmp_path / "gpu" / "summary.json").read_text())
    assert summary["device_spilled_bytes"] > 0  # cuDF's count: the limit did make it spill


def test_ucx_on_one_gpu(tmp_path):
    pytest.importorskip("distributed_ucxx")
    inputs = [shared_corpus("20news")]
    cpu = dedup(
        inputs,
        tmp_path / "cpu",
        "--backend",
        "cpu",
        "--n-workers",
        "2",
        "--threads-per-worker",
        "1",
    )
    assert (
        dedup(
            inputs,
            tmp_path / "gpu",
            "--backend",
            "gpu",
            "--protocol",
            "ucx",
            "--cuda-visible-devices",
            "0",
        )
        == cpu
    )
