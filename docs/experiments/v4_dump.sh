#!/usr/bin/env bash
# GPU machine, repo root (carry .device): compile v4's CuTe DSL kernel for the tiles in TUNED and keep
# the generated PTX and cubin (CUTE_DSL_KEEP_PTX / KEEP_CUBIN) in $OUT/dsl.tgz, so that its registers
# and SASS can be read on a machine without a GPU: `ptxas -arch=sm_90a -v FILE.ptx`, or nvdisasm on the
# cubin (pip package nvidia-cuda-nvdisasm).
set -euo pipefail
OUT=${OUT:-/tmp/out}
source .device/activate.sh
mkdir -p "$OUT/dsl"
export CUTE_DSL_KEEP_PTX=1 CUTE_DSL_KEEP_CUBIN=1 CUTE_DSL_DUMP_DIR="$OUT/dsl"
python3 - <<'PY'
import importlib.util
import sys

sys.path.insert(0, ".")
spec = importlib.util.spec_from_file_location("v4", "submission/v4.py")
v4 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v4)
tiles = sorted({tile for row in v4.TUNED.values() for tile in row.values()})
for tile in tiles:
    v4.compile_kernel(v4.hardware_fp4(), *tile)
    print("compiled", tile, flush=True)
PY
ls -la "$OUT/dsl"
tar -C "$OUT/dsl" -czf "$OUT/dsl.tgz" . && rm -rf "$OUT/dsl"
