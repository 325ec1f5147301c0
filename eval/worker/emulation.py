"""`--emulate-blackwell`: exact software stand-ins for Blackwell-only library calls, installed in the
worker before the submission is imported, so a B200 submission gets a correctness verdict on an older
GPU. Runs in the submission's process (the judge trusts nothing here: outputs are judged as always).
Times measured with it are emulated, not B200 times; the report says so.

Covered: `torch._scaled_mm` with FP4 (float4_e2m1fn_x2) operands and e4m3 block scales in the
blocked (swizzled) layout cuBLASLt uses, one scale per 16 elements: decoded exactly, products summed
in float32 (as cuBLAS accumulates), rounded once to out_dtype. Other operand types call torch's own.
CUDA built through torch's load_inline / load: built for this GPU through eval/worker/nvcc_emulate.py
(PYTORCH_NVCC), which rewrites the FP4 conversion and 256-bit loads/stores exactly; such builds go
to their own extension folder, so a later run without the flag never loads one.
"""
from __future__ import annotations

import os

import torch

from eval.emulate import scaled_mm
from eval.emulate.scaled_mm import BLOCK, FP4_VALUES, decode_fp4_rows, scaled_mm_fp4, unblock_scales  # noqa: F401


def install() -> list[str]:
    """Put the stand-ins in place; returns what is emulated (for the report)."""
    covered = ["torch._scaled_mm on FP4 operands (exact decode, float32 sums)"]
    if torch.cuda.is_available() or os.environ.get("EVAL_GPU_ARCH"):  # a build-only worker knows the GPU's arch
        covered.append(_install_nvcc())
    scaled_mm.install()
    return covered


def nvcc_command(arch: str) -> str:
    """The nvcc stand-in as PYTORCH_NVCC: by file path, not `-m`, since ninja runs it from the
    extension's build folder, where `eval` is not importable."""
    import os
    import shlex
    import sys

    stand_in = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvcc_emulate.py")
    return f"{shlex.quote(sys.executable)} {shlex.quote(stand_in)} {arch}"


def _install_nvcc() -> str:
    from torch.utils import cpp_extension

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}"
    else:
        arch = os.environ["EVAL_GPU_ARCH"]
    arch += "a" if arch.startswith("9") else ""
    os.environ["EVAL_REAL_NVCC"] = cpp_extension._join_cuda_home("bin", "nvcc")
    os.environ["PYTORCH_NVCC"] = nvcc_command(arch)
    base = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.expanduser("~/.cache/torch_extensions")
    os.environ["TORCH_EXTENSIONS_DIR"] = base.rstrip("/") + "-emulated-blackwell"
    return (f"load_inline/load CUDA built for sm_{arch} with the FP4 cvt and 256-bit loads/stores rewritten "
            "(eval/worker/nvcc_emulate.py)")
