"""numba.cuda kernels equal the CPU kernels: under the CUDA simulator here, on the device with a GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).with_name("cuda_simulator_check.py")


def test_cuda_kernels_match_cpu_kernels_under_the_simulator():
    pytest.importorskip(
        "numba.cuda.simulator",
        reason="numba-cuda (pip install numba-cuda) provides the CUDA simulator",
    )
    env = {
        **os.environ,
        "NUMBA_ENABLE_CUDASIM": "1",
        "PYTHONWARNINGS": "ignore::RuntimeWarning",
    }
    result = subprocess.run(
        [sys.executable, str(CHECK)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # 2 hash widths x 5 shingle settings x 2 buffers, and 2 x 3 band layouts, then "ok".
    assert sum(line.startswith("minhash") for line in lines) == 20
    assert sum(line.startswith("band_buckets") for line in lines) == 6
    assert lines[-1] == "ok"
