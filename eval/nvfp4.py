"""NVFP4 formats: FP4 (e2m1) and FP8 (e4m3) decoding, the permuted scale layout, and quantization.

Pure torch, CPU or GPU. Everything here is exact: FP4 and FP8 values are small dyadic rationals that
float32 represents exactly.

Layouts (as the leaderboard's generate_input makes them):
  packed FP4  [mn, k/2, l] uint8 view, element 2j in the low nibble of byte j, 2j+1 in the high one
  scales      [mn, k/16, l] float8_e4m3fn, one per 16 consecutive k
  permuted    [32, 4, rest_m, 4, rest_k, l] view of a contiguous [l, rest_m, rest_k, 32, 4, 4] buffer:
              element [i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, l] is scale [i, j, l]
"""
from __future__ import annotations

import torch

SF_VEC = 16  # elements that share one FP8 scale
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0


def _lut(device) -> torch.Tensor:
    return torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes behind a float4_e2m1fn_x2 / float8 / uint8 tensor, same shape and strides."""
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def decode_fp4(packed: torch.Tensor) -> torch.Tensor:
    """[mn, k/2, ...] packed FP4 -> [mn, k, ...] float32 (low nibble first)."""
    raw = as_bytes(packed)
    lut = _lut(raw.device)
    low = lut[(raw & 0x0F).long()]
    high = lut[(raw >> 4).long()]
    pairs = torch.stack((low, high), dim=2)  # [mn, k/2, 2, ...]
    return pairs.reshape(raw.shape[0], raw.shape[1] * 2, *raw.shape[2:])


def decode_fp8(scales: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn -> float32 (exact)."""
    if scales.dtype == torch.uint8:
        scales = scales.view(torch.float8_e4m3fn)
    return scales.to(torch.float32)


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[mn, k/2, l] FP4 and [mn, k/16, l] FP8 scales -> [mn, k, l] float32 values (exact)."""
    values = decode_fp4(packed)
    return values * decode_fp8(scales).repeat_interleave(SF_VEC, dim=1)


def to_permuted_scales(scales: torch.Tensor) -> torch.Tensor:
    """[mn, sf_k, l] -> the [32, 4, rest_m, 4, rest_k, l] MMA layout, with the leaderboard's strides."""
    mn, sf_k, l = scales.shape
    if mn % 128 or sf_k % 4:
        raise ValueError(f"permuted scales need mn % 128 == 0 and k/16 % 4 == 0, got mn={mn}, k/16={sf_k}")
    rest_m, rest_k = mn // 128, sf_k // 4
    by_l = scales.permute(2, 0, 1).reshape(l, rest_m, 4, 32, rest_k, 4)
    storage = by_l.permute(0, 1, 4, 3, 2, 5).contiguous()  # [l, rest_m, rest_k, 32, 4, 4]
    return storage.permute(3, 4, 1, 5, 2, 0)


def from_permuted_scales(permuted: torch.Tensor) -> torch.Tensor:
    """Inverse of to_permuted_scales: [32, 4, rest_m, 4, rest_k, l] -> [mn, sf_k, l] (contiguous per l)."""
    _, _, rest_m, _, rest_k, l = permuted.shape
    by_l = permuted.permute(5, 2, 1, 0, 4, 3)  # [l, rest_m, 4, 32, rest_k, 4]
    return by_l.reshape(l, rest_m * 128, rest_k * 4).permute(1, 2, 0)


# ----------------------------------------------------------------------------------------------
# Quantization (bf16/fp32 -> NVFP4)

_E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _round_to_e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """Round float32 values (already divided by their block scale, |x| <= 6 expected) to the nearest
    e2m1 code, ties to the even code (the one with mantissa bit 0). Returns uint8 codes 0..15."""
    grid = torch.tensor(_E2M1_GRID, dtype=torch.float32, device=x.device)
    mag = x.abs().clamp(max=E2M1_MAX)
    # midpoints between consecutive grid values; a value on a midpoint goes to the even code
    mids = (grid[1:] + grid[:-1]) / 2
    idx = torch.bucketize(mag.contiguous(), mids, right=False)  # value == mid -> lower index
    idx_c = idx.clamp(max=len(mids) - 1)
    on_mid = mag == mids[idx_c]
    # at a tie bucketize picked the lower code i; move to i+1 when i is odd (mantissa bit set)
    idx = torch.where(on_mid & (idx % 2 == 1), idx + 1, idx)
    sign = (x < 0) | ((x == 0) & torch.signbit(x))
    codes = idx.to(torch.uint8) | (sign.to(torch.uint8) << 3)
    return codes


def quantize_nvfp4(x: torch.Tensor, global_scale: float | None = None):
    """Quantize a real [mn, k, l] tensor (bf16/fp16/fp32, CPU or GPU) to NVFP4.

    Block scale = amax(|x| over 16 elements) / 6, rounded to e4m3 (round to nearest even, as torch
    casts); elements are divided by the *rounded* scale and rounded to the nearest e2m1 value (ties to
    even). All-zero blocks get scale 0 and codes 0. `global_scale` (fp32, optional) divides x first so
    that block scales fit e4m3's range (<= 448); the caller multiplies results by it. With None, a
    power of two is chosen when the largest block scale would exceed 448 or the smallest non-zero one
    would fall under e4m3's smallest subnormal (2^-9).

    Returns (packed float4_e2m1fn_x2 [mn, k/2, l], scales float8_e4m3fn [mn, k/16, l],
    permuted scales [32, 4, rest_m, 4, rest_k, l], global_scale).
    """
    if x.dim() != 3:
        raise ValueError(f"quantize_nvfp4 expects [mn, k, l], got shape {tuple(x.shape)}")
    mn, k, l = x.shape
    if k % SF_VEC:
        raise ValueError(f"k must be a multiple of {SF_VEC}, got {k}")
    xf = x.to(torch.float32)
    blocks = xf.reshape(mn, k // SF_VEC, SF_VEC, l)
    amax = blocks.abs().amax(dim=2)  # [mn, k/16, l]
    if global_scale is None:
        global_scale = _pick_global_scale(amax)
    amax = amax / global_scale
    blocks = blocks / global_scale
    scale_fp8 = (amax / E2M1_MAX).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    scale = scale_fp8.to(torch.float32)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    scaled = torch.where(scale.unsqueeze(2) > 0, blocks / safe.unsqueeze(2), torch.zeros_like(blocks))
    codes = _round_to_e2m1_codes(scaled).reshape(mn, k, l)
    packed = _leaderboard_layout(codes[:, 0::2, :] | (codes[:, 1::2, :] << 4))
    scales = _leaderboard_layout(scale_fp8)
    permuted = to_permuted_scales(scales) if mn % 128 == 0 and (k // SF_VEC) % 4 == 0 else None
    return packed.view(torch.float4_e2m1fn_x2), scales, permuted, float(global_scale)


def _leaderboard_layout(t: torch.Tensor) -> torch.Tensor:
    """Copy [mn, x, l] into the leaderboard's storage order, l outermost (exact strides, also for l=1)."""
    mn, x, l = t.shape
    out = torch.empty((l, mn, x), dtype=t.dtype, device=t.device).permute(1, 2, 0)
    out.copy_(t)
    return out


def _pick_global_scale(amax: torch.Tensor) -> float:
    """1.0 unless the block scales would leave e4m3's range; then the power of two that fits them."""
    largest = float(amax.max()) / E2M1_MAX if amax.numel() else 0.0
    if largest > E4M3_MAX:
        return float(2.0 ** torch.ceil(torch.log2(torch.tensor(largest / E4M3_MAX))).item())
    nonzero = amax[amax > 0]
    smallest = float(nonzero.min()) / E2M1_MAX if nonzero.numel() else 1.0
    if smallest < 2.0**-9 and largest * 2.0**6 < E4M3_MAX:
        return 2.0**-6
    return 1.0
