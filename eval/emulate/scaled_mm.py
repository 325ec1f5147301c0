"""`torch._scaled_mm` on FP4 (float4_e2m1fn_x2) operands with e4m3 block scales in the blocked
(swizzled) layout cuBLASLt uses, one scale per 16 elements: decoded exactly, products summed in
float32 (as cuBLAS accumulates), rounded once to out_dtype. Pure torch; runs on CPU and any GPU."""
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


def scaled_mm_fp4(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False, *,
                  out=None):
    """a [m, k/2] and b [k/2, n] (a transposed [n, k/2] buffer) FP4; scales blocked e4m3. The
    arguments in torch._scaled_mm's order (bias, scale_result, out_dtype, use_fast_accum; out)."""
    m, n, k = a.shape[0], b.shape[1], a.shape[1] * 2
    values_a = decode_fp4_rows(a) * unblock_scales(scale_a, m, k // BLOCK).repeat_interleave(BLOCK, dim=1)
    values_b = decode_fp4_rows(b.t()) * unblock_scales(scale_b, n, k // BLOCK).repeat_interleave(BLOCK, dim=1)
    result = values_a @ values_b.t()
    if scale_result is not None:
        result = result * scale_result
    if bias is not None:
        result = result + bias
    result = result.to(out.dtype if out is not None else (out_dtype or torch.bfloat16))
    if out is not None:
        out.copy_(result)
        return out
    return result


def fp4_available() -> bool:
    """Whether torch._scaled_mm can run FP4 here: a CUDA GPU of compute capability 10 or later."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 10


def install() -> None:
    """torch._scaled_mm in this process: FP4 operands through scaled_mm_fp4, the rest through torch."""
    original = torch._scaled_mm
    if getattr(original, "_fp4_emulated", False):
        return
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)

    def _scaled_mm(a, b, scale_a, scale_b, *args, **kwargs):
        if fp4 is not None and (a.dtype == fp4 or b.dtype == fp4):
            return scaled_mm_fp4(a, b, scale_a, scale_b, *args, **kwargs)
        return original(a, b, scale_a, scale_b, *args, **kwargs)

    _scaled_mm._fp4_emulated = True
    torch._scaled_mm = _scaled_mm
