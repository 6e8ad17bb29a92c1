#!/usr/bin/env bash
# Everything curate checks on a GPU, in one command for the offline GPU host, after the RAPIDS
# wheels are installed (../shared/gpu/README.md: one install-rapids.sh call per part, which
# leaves /tmp/rapids-site.env). Bounded by BUDGET_S (540 s); every step has its own timeout.
#
#   bash scripts/gpu_check.sh
#
# The device session, call by call: the host and its /tmp go about 30 s after a call ends, so
# the calls go back to back, and all of them fit in its 15 minutes (start and idle included):
#   here:   bash ../shared/gpu/stage-rapids.sh ../rapids-staged; mkdir -p gpu-parts; for each
#           needed part K (01-07 and 09 on the H200 of 2026-11-30): cp -r ../rapids-staged/part-K gpu-parts/;
#           bash scripts/fetch_gpu_wheels.sh .whl; fill gpu-data (below)
#   device: for each part K, one call with carry ["gpu-parts/part-K"] (the others stay here):
#           RAPIDS_SKIP_SMOKE=1 bash gpu-parts/part-K/install-rapids.sh gpu-parts/part-K
#           (its smoke check would fail without this script's numpy shim; the smoke step below is the check)
#   device: carry [".whl", "gpu-data"], timeout_s 600: bash scripts/gpu_check.sh
#           (BUDGET_S below 540 where less device time is left)
#
# Needs, in the working tree sent with the call (all git-ignored, about 55 MB together):
#   .whl/       curate's pure-Python wheels the host lacks (scripts/fetch_gpu_wheels.sh, here);
#   gpu-data/   20news and the first 8 gutenberg shards (or set DATA), e.g.
#               mkdir -p gpu-data/gutenberg && cp -r ../shared/data/20news gpu-data/ &&
#               cp ../shared/data/gutenberg/part-0000[0-7].jsonl.zst gpu-data/gutenberg/
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, the host's interpreter), DATA
# (default gpu-data, else ../shared/data), RESULTS (default $OUT, else results/gpu-<date>),
# RAPIDS_ENV (default /tmp/rapids-site.env), SITE (where curate and its wheels are installed,
# default /tmp/curate-site), WORK (scratch, default /tmp/curate-gpu-check), BUDGET_S (the whole
# call, default 540), E2E_BYTES (the end-to-end corpus, default 1.1GB), BENCH=0 to skip the
# benchmark, BENCH_ARGS (default "--shards 8").
# Writes into RESULTS: gpu_check.log, environment.txt, smoke.log (20news with exact copies, -v),
# pytest-gpu-runs.xml, pytest-gpu.xml, pytest-cpu-checks.xml, bench_gpu.json, runs/*.log (each
# benchmark run's verbose log, written as it runs). Exit codes: 0 all passed, 1 a step failed,
# 10 RAPIDS not installed yet.
# On 2026-12-04 (the day's second device session) the install took 76 s of device time (8
# calls, start included) and `BUDGET_S=588 bash scripts/gpu_check.sh` 501 s, which left 320 s: enough
# for one more call straight after (the host goes 30 s after a call; that session used 161 s to
# run bench_gpu.py's gutenberg and corpus steps again, warm); /tmp/rapids-site, /tmp/curate-site
# and /tmp/curate-gpu-check (the corpus) are still there (source /tmp/rapids-site.env;
# PYTHONPATH=$PWD:/tmp/curate-site:$PYTHONPATH).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python3}
DATA=${DATA:-$([[ -d $REPO/gpu-data ]] && echo "$REPO/gpu-data" || echo "$REPO/../shared/data")}
RESULTS=${RESULTS:-${OUT:-$REPO/results/gpu-$(date +%Y%m%d-%H%M%S)}}
RAPIDS_ENV=${RAPIDS_ENV:-/tmp/rapids-site.env}
SITE=${SITE:-/tmp/curate-site}
WORK=${WORK:-/tmp/curate-gpu-check}
mkdir -p "$RESULTS" "$WORK"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1
failed=0
step() { echo; echo "== $1 ($(date +%T), ${SECONDS}s)"; }
# One deadline for the whole call (the device run's limit is 600 s): each step gets its own
# cap, never more than what is left before the deadline less 30 s for a cut step to end (SIGINT,
# then KILL 30 s later at most); a step with under 20 s left is skipped. A slow step shortens
# the next ones, so what was measured before it always comes back.
DEADLINE=$((SECONDS + ${BUDGET_S:-540}))
bounded() {  # CAP COMMAND...: COMMAND under `timeout`, within the deadline
    local limit=$1 left=$((DEADLINE - SECONDS - 30))
    shift
    ((left < limit)) && limit=$left
    if ((limit < 20)); then echo "skipped, the budget is spent: $*"; failed=1; return; fi
    timeout -s INT -k 30 "$limit" "$@" || failed=1
}

step "RAPIDS"
[[ -f $RAPIDS_ENV ]] || { echo "no $RAPIDS_ENV: install the RAPIDS parts first (install-rapids.sh)"; exit 10; }
# The env file says `export PYTHONPATH=/tmp/rapids-site:$PYTHONPATH`: unset on a fresh shell.
set +u
# shellcheck disable=SC1090
source "$RAPIDS_ENV"
set -u

step "host fixes and curate, into $SITE"
mkdir -p "$SITE"
# numba-cuda 0.30 calls np.row_stack, which numpy 2.5 removed; sitecustomize runs in every
# process on PYTHONPATH, Dask workers included.
cat > "$SITE/sitecustomize.py" <<'PY'
import numpy

if not hasattr(numpy, "row_stack"):
    numpy.row_stack = numpy.vstack
PY
if compgen -G "$REPO/.whl/*.whl" >/dev/null; then
    timeout 120 "$PYTHON" -m pip install -q --no-index --no-deps --target "$SITE" "$REPO"/.whl/*.whl || failed=1
else
    echo "no wheels in $REPO/.whl (scripts/fetch_gpu_wheels.sh): relying on the host's packages"
fi
# Installed, not only importable: curate reads its version from its package metadata. The
# project comes first on PYTHONPATH, so every process runs this tree's code.
(cd "$REPO" && timeout 120 "$PYTHON" -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" --upgrade .) || failed=1
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export CURATE_SHARED_DATA=$DATA PYTHONUNBUFFERED=1  # a step cut by its time limit keeps its output
cd "$REPO" || exit 1

# The smoke run's input: 20news and exact copies (new ids) of a third of one shard, so that it
# removes both kinds of duplicates in several partitions; its CPU run goes on spare cores now.
mkdir -p "$WORK/both"
ln -sf "$DATA"/20news/part-* "$WORK/both/"
"$PYTHON" - "$DATA/20news" "$WORK/both/copies.jsonl" <<'PY'
import gzip, json, sys
from pathlib import Path

shard = sorted(Path(sys.argv[1]).glob("part-*"))[0]
with gzip.open(shard, "rt") as lines, open(sys.argv[2], "w") as copies:
    for i, line in enumerate(lines):
        if i % 3 == 0:
            record = json.loads(line)
            copies.write(json.dumps({**record, "id": "copy-" + str(record["id"])}) + "\n")
PY
smoke_flags=(--overwrite --no-progress --keep-stages --blocksize 4MB)
nice -n 10 timeout 200 "$PYTHON" -m curate dedup "$WORK/both" -o "$WORK/smoke-cpu" "${smoke_flags[@]}" --backend cpu \
    >"$WORK/smoke-cpu.log" 2>&1 &
smoke_cpu=$!

if [[ ${BENCH:-1} != 0 ]]; then
    # The >= 1 GB corpus for the end-to-end figure (gutenberg books and edited copies), made on
    # the host's spare cores while the environment, smoke and kernel steps run.
    nice -n 10 timeout 240 "$PYTHON" scripts/make_edited_corpus.py "$WORK/edited" \
        --bytes "${E2E_BYTES:-1.1GB}" --source "$DATA/gutenberg" >"$WORK/edited.log" 2>&1 &
    corpus=$!
fi

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
timeout 60 "$PYTHON" - <<'PY' | tee "$RESULTS/environment.txt"
import importlib, importlib.metadata, platform
print("python", platform.python_version())
for name in ["curate", "cudf", "dask_cudf", "dask_cuda", "distributed_ucxx", "rmm", "cupy", "numba", "numba_cuda", "dask",
             "distributed", "pandas", "pyarrow", "numpy", "pydantic", "click", "rich", "yaml", "zstandard", "zlib_ng", "scipy", "fsspec", "pytest",
             "xdist", "setuptools"]:  # setuptools: curate's install (no build isolation) needs 77+
    try:
        module = importlib.import_module(name)
        version = getattr(module, "__version__", None) or importlib.metadata.version(name)
        print(f"{name} {version}")
    except Exception as err:  # report every missing piece, not only the first
        print(f"{name} MISSING ({type(err).__name__}: {err})")
from numba import cuda
print("numba.cuda device:", cuda.is_available() and cuda.get_current_device().name)
PY
grep -q MISSING "$RESULTS/environment.txt" && echo "some packages are missing (above); tests that need them will fail or skip"
echo "data: $DATA"; ls "$DATA" "$DATA/gutenberg" 2>/dev/null | head -20

step "smoke: 20news and exact copies on the GPU (both kinds removed), against the CPU run"
bounded 120 "$PYTHON" -m curate dedup "$WORK/both" -o "$WORK/smoke" "${smoke_flags[@]}" --backend gpu -v \
    >"$RESULTS/smoke.log" 2>&1
grep -v "^\s*$" "$RESULTS/smoke.log" | tail -45
echo "-- the GPU run's stage files (do the files of each stage agree on their schema?)"
"$PYTHON" scripts/stage_schemas.py "$WORK/smoke/_stages"
if wait "$smoke_cpu"; then
    for table in removed.parquet duplicates.parquet; do
        cmp "$WORK/smoke-cpu/$table" "$WORK/smoke/$table" && echo "$table: byte-identical to the CPU run" || failed=1
    done
else
    tail -5 "$WORK/smoke-cpu.log"; echo "the CPU run failed"; failed=1
fi

bench() {  # STEPS CAP [ARGS...]: bench_gpu.py's STEPS; the figures merge into one bench_gpu.json
    # shellcheck disable=SC2086
    bounded "$2" "$PYTHON" scripts/bench_gpu.py --data "$DATA" --out "$RESULTS/bench_gpu.json" --work "$WORK/bench" \
        --steps "$1" "${@:3}" ${BENCH_ARGS:---shards 8}
}
if [[ ${BENCH:-1} != 0 ]]; then
    step "benchmark: kernels (GB/s)"
    bench kernels 100
    step "benchmark: end to end on the >= 1 GB corpus, then with --cache-input, --blocksize 1GB, --blocksize 256MB (MB/s per GPU, peak device memory)"
    if wait "$corpus"; then  # a corpus cut short by its time limit would give a wrong figure
        tail -1 "$WORK/edited.log"
        # 147 s for the first on 2026-12-04 (code of 9b8c7d4); each figure is kept as it is measured
        bench corpus,corpus-cached,corpus-1GB,corpus-256MB 320 --corpus "$WORK/edited"
    else
        cat "$WORK/edited.log"; echo "no corpus: skipped"; failed=1
    fi
fi

# Tests: the whole runs first (byte identity, spilling, UCX), then the rest; three at a time on
# the 16 cores (each starts its own cluster; one GPU is ample). SIGINT, not TERM, on the time
# limit, so that pytest still writes the JUnit file of what ran; -v logs each test as it ends.
# pyproject.toml's addopts ask for pytest-xdist (.whl brings it); a pytest without it refuses
# them and runs nothing. So every pytest here goes through this function, which drops them, and
# the tests spread over processes only where xdist is there.
run_tests() {  # CAP NAME ARGS...: pytest ARGS within CAP, its JUnit file RESULTS/NAME.xml
    bounded "$1" "$PYTHON" -m pytest -o addopts= -p no:cacheprovider --junitxml="$RESULTS/$2.xml" "${@:3}"
}
runs="whole_run or spilling or ucx"
options=(-v -rfEs --tb=short --durations=20)
"$PYTHON" -c "import pytest_timeout" 2>/dev/null && options+=(--timeout=240)
if "$PYTHON" -c "import xdist" 2>/dev/null; then
    options+=(-n 3 --dist load) cpu_spread=(-n 3 --dist loadfile)
else
    cpu_spread=() && echo "no pytest-xdist: one test at a time"
fi
step "GPU tests: whole runs (pytest -m gpu -k '$runs')"
run_tests 200 pytest-gpu-runs -m gpu -k "$runs" "${options[@]}" tests/test_gpu.py
step "GPU tests: the rest"
run_tests 240 pytest-gpu -m gpu -k "not ($runs)" "${options[@]}" tests/test_gpu.py

step "CPU checks of the GPU code, on this host's libraries"
# The simulator test is left out (a minute of Python threads; CI runs it); the typing check
# skips where a device is present, since numba-cuda then compiles for it (the tests above).
run_tests 100 pytest-cpu-checks -rs -q -k "not simulator" "${cpu_spread[@]}" \
    tests/test_gpu_config.py tests/test_backend_dispatch.py \
    tests/test_digests.py tests/test_cuda_kernels.py tests/test_normalize_device.py

if [[ ${BENCH:-1} != 0 ]] && ((DEADLINE - SECONDS > 90)); then
    step "benchmark: 8 gutenberg shards end to end, default and one thread per GPU worker"
    bench gutenberg,one-thread 200
fi
step "done: results in $RESULTS (exit $failed)"
exit $failed
