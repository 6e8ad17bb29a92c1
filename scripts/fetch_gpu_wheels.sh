#!/usr/bin/env bash
# Download, here, the wheels of curate's own dependencies that the offline GPU host lacks
# (../shared/gpu/README.md, "What the H200 host needed", step 3): pydantic (with pydantic-core,
# annotated-types, typing-inspection, typing-extensions), zstandard and zlib-ng, and the test runner's
# plugins pyproject.toml's addopts name (pytest-xdist, with execnet) and pytest-timeout, for
# CPython 3.12 on manylinux x86_64, into the git-ignored folder .whl/ (about 9 MB).
# scripts/gpu_check.sh installs them on the host. A re-run fetches them anew (from pip's cache).
#
#   bash scripts/fetch_gpu_wheels.sh [DEST]      # DEST default: .whl
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$REPO/.whl}
mkdir -p "$DEST"
rm -f "$DEST"/*.whl  # two versions of one wheel (after a release) would fail the host's install
# pip resolves the dependencies for the host's platform, so pydantic gets the pydantic-core it pins.
host=(--only-binary=:all: --python-version 3.12 --implementation cp
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST")
python3 -m pip download -q "${host[@]}" "pydantic>=2" "typing-extensions>=4.16" zstandard zlib-ng
# The plugins alone: their pytest and its dependencies would shadow the host's (its pytest 9.1).
python3 -m pip download -q "${host[@]}" --no-deps pytest-xdist execnet pytest-timeout
ls -l "$DEST"
