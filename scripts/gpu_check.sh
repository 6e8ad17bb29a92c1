#!/usr/bin/env bash
# One command for an offline GPU host: install the staged RAPIDS wheels, run the GPU tests and
# the GPU benchmark, write everything to a results folder.
#
#   bash scripts/gpu_check.sh [PART_DIR ...]
#
# PART_DIR: folders made by shared/gpu/stage-rapids.sh (part-01 ... part-07, see
# shared/gpu/README.md), each installed with its own install-rapids.sh; default: gpu-parts/part-*.
# Environment: PYTHON (default /opt/torch/.venv/bin/python3, the host's interpreter), DATA
# (default ../shared/data), RESULTS (default results/gpu-<date>), BENCH=0 to skip the benchmark,
# BENCH_ARGS (extra arguments for scripts/bench_gpu.py, e.g. "--shards 8 --copies 2").
# Exit codes: 0 all passed, 10 parts still missing, 1 a test or the benchmark failed.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python3}
DATA=${DATA:-$REPO/../shared/data}
RESULTS=${RESULTS:-$REPO/results/gpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS"
exec > >(tee "$RESULTS/gpu_check.log") 2>&1

# 1. RAPIDS wheels, part by part (install-rapids.sh: 0 ready, 10 waiting for parts, 1 error).
parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=("$REPO"/gpu-parts/part-*)
if [[ ! -f /tmp/rapids-site.env || ${#parts[@]} -gt 0 && -d ${parts[0]} ]]; then
    status=1
    for part in "${parts[@]}"; do
        [[ -d $part ]] || continue
        bash "$part/install-rapids.sh" "$part"
        status=$?
        [[ $status -eq 1 ]] && { echo "install-rapids.sh failed on $part"; exit 1; }
    done
    [[ $status -eq 10 ]] && { echo "waiting for more parts (see the list above)"; exit 10; }
fi
[[ -f /tmp/rapids-site.env ]] || { echo "no /tmp/rapids-site.env: no RAPIDS install finished"; exit 1; }
# shellcheck disable=SC1091
source /tmp/rapids-site.env
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

# 2. What this host has; curate's own pure-Python dependencies may be missing on it.
nvidia-smi || true
"$PYTHON" - <<'PY' | tee "$RESULTS/environment.txt"
import importlib, platform
print("python", platform.python_version())
for name in ["cudf", "dask_cudf", "dask_cuda", "distributed_ucxx", "rmm", "cupy", "numba", "numba_cuda", "dask",
             "distributed", "pandas", "pyarrow", "pydantic", "click", "rich", "yaml", "zstandard", "scipy", "fsspec", "pytest"]:
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}")
    except Exception as err:  # report every missing piece, not only the first
        print(f"{name} MISSING ({type(err).__name__}: {err})")
from numba import cuda
print("numba.cuda device:", cuda.is_available() and cuda.get_current_device().name)
PY
if grep -q MISSING "$RESULTS/environment.txt"; then
    echo "some packages are missing (above); tests that need them will fail or skip"
fi

# 3. GPU tests, then the CUDA kernels on the device, and the CPU tests of the GPU config.
failed=0
(cd "$REPO" && "$PYTHON" -m pytest -m gpu -rs -q --junitxml="$RESULTS/pytest-gpu.xml" \
    tests/test_gpu.py) || failed=1
(cd "$REPO" && "$PYTHON" -m pytest -rs -q --junitxml="$RESULTS/pytest-config.xml" tests/test_gpu_config.py) || failed=1

# 4. Benchmark: MinHash GB/s; end-to-end MB/s per GPU on gutenberg and on edited copies of it.
if [[ ${BENCH:-1} != 0 ]]; then
    # shellcheck disable=SC2086
    (cd "$REPO" && "$PYTHON" scripts/bench_gpu.py --data "$DATA" --out "$RESULTS/bench_gpu.json" ${BENCH_ARGS:-}) || failed=1
fi
echo "results in $RESULTS"
exit $failed
