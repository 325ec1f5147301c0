"""v4's SASS without a GPU: compile tiles of submission/v4.py with the CuTe DSL on the CPU machine and
print, per tile, ptxas's register count and where the loads (LDG), shared-memory reads (LDS, marked s)
and barriers (BAR, marked b) sit among the kernel's instructions.

Set-up on the CPU machine (once): a Python the DSL's wheel was built for (3.12 for the staged 4.8.1)
with `pip install cuda-python typing_extensions numpy`; the DSL from the staged tarball:
  mkdir -p /tmp/cute-dsl && tar -C /tmp/cute-dsl -xJf .device/cute-dsl-4.8.1.tar.xz
  export PYTHONPATH=/tmp/cute-dsl/nvidia_cutlass_dsl/dsl_packages:/tmp/cute-dsl
Then: CUTE_DSL_ARCH=sm_90a python3.12 docs/experiments/v4_local_sass.py 256,4,256,0 256,4,256,0,3
(HW=1 and sm_100a: the Blackwell path). torch is stubbed when absent (v4 then takes no device query).
Needs ptxas (CUDA toolkit) and nvdisasm (pip nvidia-cuda-nvdisasm) on PATH or in $NVDISASM.
"""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_v4():
    if importlib.util.find_spec("torch") is None:
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(is_available=lambda: False)
        sys.modules["torch"] = torch
        sys.modules["task"] = types.SimpleNamespace(input_t=object, output_t=object)
    sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("v4", ROOT / "submission" / "v4.py")
    v4 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(v4)
    return v4


def describe(dump: Path) -> str:
    ptx, cubin = next(dump.glob("*.ptx")), next(dump.glob("*.cubin"))
    info = subprocess.run(["ptxas", f"-arch={os.environ.get('CUTE_DSL_ARCH', 'sm_90a')}", "-v", str(ptx),
                           "-o", os.devnull], capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", info)
    sass = subprocess.run([os.environ.get("NVDISASM", "nvdisasm"), "-c", str(cubin)],
                          capture_output=True, text=True).stdout.splitlines()
    lines = [ln for ln in sass if re.match(r"\s+/\*[0-9a-f]{4}\*/", ln)]
    marks = [f"{i}{'s' if 'LDS' in ln else 'b' if 'BAR' in ln else ''}"
             for i, ln in enumerate(lines) if re.search(r"\b(LDG|LDS|BAR)\b", ln)]
    return f"regs={regs.group(1) if regs else '?'} instructions={len(lines)}  " + " ".join(marks)


def main(tiles: list) -> None:
    dump = Path(tempfile.mkdtemp(prefix="v4-sass-"))
    os.environ.update(CUTE_DSL_KEEP_PTX="1", CUTE_DSL_KEEP_CUBIN="1", CUTE_DSL_DUMP_DIR=str(dump))  # read at import
    v4 = load_v4()
    for tile in tiles:
        for old in dump.iterdir():
            old.unlink()
        v4.compile_kernel(os.environ.get("HW") == "1", *tile)
        print(tile, describe(dump), flush=True)


if __name__ == "__main__":
    main([tuple(int(x) for x in arg.split(",")) for arg in sys.argv[1:]])
