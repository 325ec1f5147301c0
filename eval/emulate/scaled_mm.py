"""`torch._scaled_mm` on block-scaled operands, its whole signature (bias, scale_result, out_dtype,
use_fast_accum; out): FP4 (float4_e2m1fn_x2) with e4m3 scales per 16 elements (NVFP4) or e8m0 per 32
(MXFP4), FP8 (float8_e4m3fn / float8_e5m2) with e8m0 scales per 32 (MXFP8), scales in the blocked
(swizzled) layout cuBLASLt uses. Decoded exactly, products summed in float32 (as cuBLAS accumulates;
use_fast_accum changes nothing there), bias added in float32, rounded once to the output dtype;
scale_result multiplies FP8 outputs only (cuBLASLt's D scale). Pure torch; runs on CPU and any GPU."""
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


def block_of(scale: torch.Tensor) -> int:
    """Elements per scale: 32 for e8m0 (MX formats), 16 for e4m3 (NVFP4)."""
    return 32 if scale.dtype == getattr(torch, "float8_e8m0fnu", None) else BLOCK


def decode_rows(t: torch.Tensor) -> torch.Tensor:
    """[rows, k] FP8 or [rows, k/2] packed FP4 -> [rows, k] float32 (exact)."""
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    return decode_fp4_rows(t) if t.dtype in (fp4, torch.uint8) else t.to(torch.float32)


def scaled_values(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """[rows, k] float32: each element times its block's scale (both exact, so the product is)."""
    values = decode_rows(t)
    block = block_of(scale)
    rows, k = values.shape
    return values * unblock_scales(scale, rows, -(-k // block)).repeat_interleave(block, dim=1)[:, :k]


def scaled_mm_blocked(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False,
                      *, out=None):
    """a [m, k] (FP4: [m, k/2]) and b [k, n] (a transposed [n, k] buffer); scales blocked. The
    arguments in torch._scaled_mm's order (bias, scale_result, out_dtype, use_fast_accum; out)."""
    result = scaled_values(a, scale_a) @ scaled_values(b.t(), scale_b).t()
    if bias is not None:
        result = result + bias.to(torch.float32)
    dtype = out.dtype if out is not None else out_dtype or (torch.bfloat16 if _is_fp4(a) else a.dtype)
    if scale_result is not None and dtype.is_floating_point and torch.finfo(dtype).bits == 8:
        result = result * scale_result.to(torch.float32)
    result = result.to(dtype)
    if out is not None:
        out.copy_(result)
        return out
    return result


scaled_mm_fp4 = scaled_mm_blocked  # the name the FP4-only stand-in had


def _is_fp4(t: torch.Tensor) -> bool:
    return t.dtype == getattr(torch, "float4_e2m1fn_x2", None)


def is_block_scaled(a, b, scale_a, scale_b) -> bool:
    """FP4 operands, or FP8 operands with e8m0 block scales (tensor- and row-wise FP8 is torch's own,
    which runs on sm_89 and later)."""
    e8m0 = getattr(torch, "float8_e8m0fnu", None)
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    return _is_fp4(a) or _is_fp4(b) or (a.dtype in fp8 and e8m0 is not None and scale_a.dtype == e8m0)


def fp4_available() -> bool:
    """Whether torch._scaled_mm can run FP4 here: a CUDA GPU of compute capability 10 or later."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 10


def install() -> None:
    """torch._scaled_mm in this process: block-scaled operands through scaled_mm_blocked, the rest
    through torch."""
    original = torch._scaled_mm
    if getattr(original, "_fp4_emulated", False):
        return

    def _scaled_mm(a, b, scale_a, scale_b, *args, **kwargs):
        if is_block_scaled(a, b, scale_a, scale_b):
            return scaled_mm_blocked(a, b, scale_a, scale_b, *args, **kwargs)
        return original(a, b, scale_a, scale_b, *args, **kwargs)

    _scaled_mm._fp4_emulated = True
    torch._scaled_mm = _scaled_mm
