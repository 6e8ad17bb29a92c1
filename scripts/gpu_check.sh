#!/usr/bin/env bash
# Everything curate checks on a GPU, in one command for the offline GPU host, after the RAPIDS
# wheels are installed (../shared/gpu/README.md: one install-rapids.sh call per part, which
# leaves /tmp/rapids-site.env). Bounded to about 9 minutes; every step has its own timeout.
#
#   bash scripts/gpu_check.sh
#
# Needs, in the working tree sent with the call (all git-ignored, about 55 MB together):
#   .whl/       curate's pure-Python wheels the host lacks (scripts/fetch_gpu_wheels.sh, here);
#   gpu-data/   20news and the first 8 gutenberg shards (or set DATA), e.g.
#               mkdir -p gpu-data/gutenberg && cp -r ../shared/data/20news gpu-data/ &&
#               cp ../shared/data/gutenberg/part-0000[0-7].jsonl.zst gpu-data/gutenberg/
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, the host's interpreter), DATA
# (default gpu-data, else ../shared/data), RESULTS (default $OUT, else results/gpu-<date>),
# RAPIDS_ENV (default /tmp/rapids-site.env), SITE (where curate and its wheels are installed,
# default /tmp/curate-site), BENCH=0 to skip the benchmark, BENCH_ARGS (default "--shards 8"), TEST_TIMEOUT (s, default
# 330), BENCH_TIMEOUT (s, default 150).
# Writes into RESULTS: gpu_check.log, environment.txt, pytest-gpu.xml, pytest-cpu-checks.xml,
# bench_gpu.json. Exit codes: 0 all passed, 1 a step failed, 10 RAPIDS not installed yet.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python3}
DATA=${DATA:-$([[ -d $REPO/gpu-data ]] && echo "$REPO/gpu-data" || echo "$REPO/../shared/data")}
RESULTS=${RESULTS:-${OUT:-$REPO/results/gpu-$(date +%Y%m%d-%H%M%S)}}
RAPIDS_ENV=${RAPIDS_ENV:-/tmp/rapids-site.env}
SITE=${SITE:-/tmp/curate-site}
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1
failed=0
step() { echo; echo "== $1 ($(date +%T))"; }

step "RAPIDS"
[[ -f $RAPIDS_ENV ]] || { echo "no $RAPIDS_ENV: install the RAPIDS parts first (install-rapids.sh)"; exit 10; }
# shellcheck disable=SC1090
source "$RAPIDS_ENV"

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
export CURATE_SHARED_DATA=$DATA

step "environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
timeout 120 "$PYTHON" - <<'PY' | tee "$RESULTS/environment.txt"
import importlib, importlib.metadata, platform
print("python", platform.python_version())
for name in ["curate", "cudf", "dask_cudf", "dask_cuda", "distributed_ucxx", "rmm", "cupy", "numba", "numba_cuda", "dask",
             "distributed", "pandas", "pyarrow", "numpy", "pydantic", "click", "rich", "yaml", "zstandard", "scipy", "fsspec", "pytest"]:
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

step "GPU tests (pytest -m gpu)"
(cd "$REPO" && timeout "${TEST_TIMEOUT:-330}" "$PYTHON" -m pytest -m gpu -p no:cacheprovider -rs -q \
    --junitxml="$RESULTS/pytest-gpu.xml" tests/test_gpu.py) || failed=1

step "CPU checks of the GPU code, on this host's libraries"
# The simulator test is left out (a minute of Python threads; CI runs it); the typing check
# skips where a device is present, since numba-cuda then compiles for it (the tests above).
(cd "$REPO" && timeout 120 "$PYTHON" -m pytest -p no:cacheprovider -rs -q -k "not simulator" \
    --junitxml="$RESULTS/pytest-cpu-checks.xml" tests/test_gpu_config.py tests/test_backend_dispatch.py \
    tests/test_digests.py tests/test_cuda_kernels.py tests/test_normalize_device.py) || failed=1

if [[ ${BENCH:-1} != 0 ]]; then
    step "benchmark"
    # shellcheck disable=SC2086
    (cd "$REPO" && timeout "${BENCH_TIMEOUT:-150}" "$PYTHON" scripts/bench_gpu.py --data "$DATA" \
        --out "$RESULTS/bench_gpu.json" ${BENCH_ARGS:---shards 8}) || failed=1
fi
step "done: results in $RESULTS (exit $failed)"
exit $failed
