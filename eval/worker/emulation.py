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

import torch

FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
BLOCK = 16  # elements per scale


def decode_fp4_rows(packed: torch.Tensor) -> torch.Tensor:
    """[rows, k/2] packed FP4 (low nibble first along k) -> [rows, k] float32."""
    raw = packed.view(torch.uint8) if packed.dtype != torch.uint8 else packed
    lut = torch.tensor(FP4_VALUES, dtype=torch.float32, device=raw.device)
    pairs = torch.stack((lut[(raw & 0x0F).long()], lut[(raw >> 4).long()]), dim=-1)
    return pairs.reshape(raw.shape[0], raw.shape[1] * 2)


def unblock_scales(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of the leaderboard's `to_blocked`: the flat swizzled scales -> [rows, cols] float32
    (rows a multiple of 128, cols of 4: padded as to_blocked pads)."""
    row_blocks, col_blocks = -(-rows // 128), -(-cols // 4)
    tiles = flat.reshape(row_blocks * col_blocks, 32, 4, 4).transpose(1, 2)  # [tile, 4, 32, 4]
    grid = tiles.reshape(row_blocks, col_blocks, 128, 4).permute(0, 2, 1, 3)
    return grid.reshape(row_blocks * 128, col_blocks * 4)[:rows, :cols].to(torch.float32)


def scaled_mm_fp4(a, b, scale_a, scale_b, bias=None, out_dtype=None, scale_result=None, use_fast_accum=False):
    """a [m, k/2] and b [k/2, n] (a transposed [n, k/2] buffer) FP4; scales blocked e4m3."""
    m, n, k = a.shape[0], b.shape[1], a.shape[1] * 2
    values_a = decode_fp4_rows(a) * unblock_scales(scale_a, m, k // BLOCK).repeat_interleave(BLOCK, dim=1)
    values_b = decode_fp4_rows(b.t()) * unblock_scales(scale_b, n, k // BLOCK).repeat_interleave(BLOCK, dim=1)
    out = values_a @ values_b.t()
    if scale_result is not None:
        out = out * scale_result
    if bias is not None:
        out = out + bias
    return out.to(out_dtype or torch.bfloat16)


def install() -> list[str]:
    """Put the stand-ins in place; returns what is emulated (for the report)."""
    covered = ["torch._scaled_mm on FP4 operands (exact decode, float32 sums)"]
    if torch.cuda.is_available():
        covered.append(_install_nvcc())
    original = torch._scaled_mm
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)

    def _scaled_mm(a, b, scale_a, scale_b, *args, **kwargs):
        if fp4 is not None and (a.dtype == fp4 or b.dtype == fp4):
            return scaled_mm_fp4(a, b, scale_a, scale_b, *args, **kwargs)
        return original(a, b, scale_a, scale_b, *args, **kwargs)

    torch._scaled_mm = _scaled_mm
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
    import os

    from torch.utils import cpp_extension

    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}" + ("a" if major == 9 else "")
    os.environ["EVAL_REAL_NVCC"] = cpp_extension._join_cuda_home("bin", "nvcc")
    os.environ["PYTORCH_NVCC"] = nvcc_command(arch)
    base = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.expanduser("~/.cache/torch_extensions")
    os.environ["TORCH_EXTENSIONS_DIR"] = base.rstrip("/") + "-emulated-blackwell"
    return (f"load_inline/load CUDA built for sm_{arch} with the FP4 cvt and 256-bit loads/stores rewritten "
            "(eval/worker/nvcc_emulate.py)")
