#!/usr/bin/env bash
# Packs the wheels the GPU machine lacks into .whl/ (git-ignored): kernelguard (the static check),
# pure Python, for the GPU machine's Python 3.12. Run from the project's root, on a machine with a
# package index; then carry .whl (the .ci/gpu-* scripts install it to /tmp/site). Seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "kernelguard==0.3.2"
ls -l .whl
