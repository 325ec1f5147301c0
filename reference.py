"""Reference for the NVFP4 block-scaled GEMV: generate_input, ref_kernel, check_implementation.

Mirrors gpu-mode/reference-kernels problems/nvidia/nvfp4_gemv/reference.py:
  * generate_input makes the same 7-tuple with the same shapes, dtypes and strides, consuming the
    random generator in the same order, so on a CUDA device the tensors are byte-identical to the
    leaderboard's for the same seed. Without CUDA the same calls run on the CPU (same distribution,
    different numbers: the CPU generator is not the CUDA one).
  * ref_kernel decodes FP4/FP8 exactly and accumulates in float64 (the leaderboard calls
    torch._scaled_mm, which only exists on sm_100), so it runs on the CPU and on any GPU.
  * check_implementation uses rtol = atol = 1e-3 like the leaderboard.

Data distributions (keyword `dist`, or the environment variable NVFP4_GEMV_DIST; default leaderboard):
  leaderboard  FP4 bytes 0..3 (codes 0..3 in the low nibble, 0 in the high one), scales 0, 1 or 2
  stress       every one of the 16 FP4 codes in both nibbles, scales over e4m3 codes 0x01..0x3f
               (2^-9 .. 1.875, subnormals included)
  quantized    Gaussian A (rows of varying magnitude) and b quantized with quantize_nvfp4 (below)

Self-contained (torch and the problem's task.py only), so it drops into the leaderboard's layout
beside its eval.py. The NVFP4 formats, exact, pure torch, CPU or GPU (FP4 and FP8 values are small
dyadic rationals that float32 represents exactly):
  packed FP4  [mn, k/2, l] uint8 view, element 2j in the low nibble of byte j, 2j+1 in the high one
  scales      [mn, k/16, l] float8_e4m3fn, one per 16 consecutive k
  permuted    [32, 4, rest_m, 4, rest_k, l] view of a contiguous [l, rest_m, rest_k, 32, 4, 4] buffer:
              element [i % 32, (i % 128) // 32, i // 128, j % 4, j // 4, l] is scale [i, j, l]
"""
from __future__ import annotations

import os

import torch

from task import input_t, output_t

DIST_ENV = "NVFP4_GEMV_DIST"
DISTRIBUTIONS = ("leaderboard", "stress", "quantized")
N_PADDED = 128  # the leaderboard pads b and sfb to 128 rows (for torch._scaled_mm); row 0 is the vector
RTOL = ATOL = 1e-3


# ----------------------------------------------------------------------------------------------
# NVFP4 formats: decoding, the permuted scale layout, quantization

SF_VEC = 16  # elements that share one FP8 scale
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0


_PAIRS: dict = {}  # device -> [256, 2] float32: a byte's (low nibble, high nibble) values


def _lut(device) -> torch.Tensor:
    return torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)


def _pair_lut(device) -> torch.Tensor:
    """Both values of every byte, made once per device (the judge checks every timed run's output with
    ref_kernel: a table copied to the GPU in each call cost a host round trip each time)."""
    key = str(device)
    if key not in _PAIRS:
        codes = torch.arange(256)
        _PAIRS[key] = _lut("cpu")[torch.stack((codes & 0x0F, codes >> 4), dim=1)].to(device)
    return _PAIRS[key]


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes behind a float4_e2m1fn_x2 / float8 / uint8 tensor, same shape and strides."""
    return t if t.dtype == torch.uint8 else t.view(torch.uint8)


def decode_fp4(packed: torch.Tensor) -> torch.Tensor:
    """[mn, k/2, ...] packed FP4 -> [mn, k, ...] float32 (low nibble first)."""
    raw = as_bytes(packed)
    pairs = _pair_lut(raw.device)[raw.long()].movedim(-1, 2)  # [mn, k/2, 2, ...]
    return pairs.reshape(raw.shape[0], raw.shape[1] * 2, *raw.shape[2:])


def decode_fp8(scales: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn -> float32 (exact)."""
    if scales.dtype == torch.uint8:
        scales = scales.view(torch.float8_e4m3fn)
    return scales.to(torch.float32)


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[mn, k/2, l] FP4 and [mn, k/16, l] FP8 scales -> [mn, k, l] float32 values (exact)."""
    values = decode_fp4(packed)
    shape = values.shape  # each scale times its 16 values, without a repeated copy of the scales
    blocks = values.reshape(shape[0], shape[1] // SF_VEC, SF_VEC, *shape[2:])
    return (blocks * decode_fp8(scales).unsqueeze(2)).reshape(shape)


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


# ----------------------------------------------------------------------------------------------
# The problem

def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def validate_shape(m: int, k: int, l: int) -> None:
    """Raise ValueError with an actionable message for shapes the problem does not allow."""
    problems = []
    if not (isinstance(m, int) and m > 0 and m % 128 == 0):
        problems.append(f"m={m} must be a positive multiple of 128")
    if not (isinstance(k, int) and k > 0 and k % 64 == 0):
        problems.append(f"k={k} must be a positive multiple of 64")
    if not (isinstance(l, int) and l > 0):
        problems.append(f"l={l} must be a positive integer")
    if problems:
        raise ValueError("invalid shape: " + "; ".join(problems))


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _pick_dist(dist: str | None) -> str:
    dist = dist or os.environ.get(DIST_ENV) or "leaderboard"
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown data distribution {dist!r}: choose one of {', '.join(DISTRIBUTIONS)}")
    return dist


def generate_input(m: int, k: int, l: int, seed: int, dist: str | None = None) -> input_t:
    """Return (a, b, sfa, sfb, sfa_permuted, sfb_permuted, c) as the leaderboard does.

    a [m, k/2, l] float4_e2m1fn_x2, b [128, k/2, l] (row 0 is the vector), sfa [m, k/16, l] and
    sfb [128, k/16, l] float8_e4m3fn, the permuted scales [32, 4, rest, 4, k/64, l], c [m, 1, l] fp16
    (random, so an output the kernel never writes is caught).
    """
    validate_shape(m, k, l)
    dist = _pick_dist(dist)
    device = _device()
    torch.manual_seed(seed)
    if dist == "quantized":
        return _generate_quantized(m, k, l, device)
    code_high = 4 if dist == "leaderboard" else 256
    a = torch.randint(0, code_high, (l, m, k // 2), dtype=torch.uint8, device=device).permute(1, 2, 0)
    b = torch.randint(0, code_high, (l, N_PADDED, k // 2), dtype=torch.uint8, device=device).permute(1, 2, 0)
    a = a.view(torch.float4_e2m1fn_x2)
    b = b.view(torch.float4_e2m1fn_x2)
    c = torch.randn((l, m, 1), dtype=torch.float16, device=device).permute(1, 2, 0)
    sf_k = ceil_div(k, SF_VEC)
    sfa, sfa_permuted = _random_scales(l, m, sf_k, dist, device)
    sfb, sfb_permuted = _random_scales(l, N_PADDED, sf_k, dist, device)
    return a, b, sfa, sfb, sfa_permuted, sfb_permuted, c


def _random_scales(l: int, mn: int, sf_k: int, dist: str, device: str):
    """Plain [mn, sf_k, l] scales and their permuted copy, drawing from the generator exactly as the
    leaderboard does (it draws a second, fully overwritten tensor for the permuted layout)."""
    if dist == "leaderboard":
        plain = torch.randint(0, 3, (l, mn, sf_k), dtype=torch.int8, device=device).to(torch.float8_e4m3fn)
    else:  # stress: raw e4m3 codes 0x01..0x3f, all positive and finite, subnormals included
        plain = torch.randint(1, 0x40, (l, mn, sf_k), dtype=torch.uint8, device=device).view(torch.float8_e4m3fn)
    plain = plain.permute(1, 2, 0)
    mma_shape = (l, ceil_div(mn, 128), ceil_div(sf_k, 4), 32, 4, 4)
    torch.randint(0, 3, mma_shape, dtype=torch.int8, device=device)  # keeps the RNG stream aligned
    permuted = to_permuted_scales(plain)
    # the leaderboard returns the plain scales after a round trip through the CPU (same strides)
    return plain.cpu().to(device), permuted


def generate_real(m: int, k: int, l: int, device: str | None = None):
    """Unquantized float32 data for the `quantized` distribution: A [m, k, l] and b [128, k, l].

    Gaussian, each row of A with its own magnitude (log-normal), like weights of a real layer.
    Uses the current generator state (generate_input seeds it first)."""
    device = device or _device()
    row_scale = torch.exp(0.5 * torch.randn((l, m, 1), device=device))
    a = (torch.randn((l, m, k), device=device) * row_scale).permute(1, 2, 0)
    b = torch.randn((l, N_PADDED, k), device=device).permute(1, 2, 0)
    return a, b


def _generate_quantized(m: int, k: int, l: int, device: str) -> input_t:
    a_real, b_real = generate_real(m, k, l, device)
    c = torch.randn((l, m, 1), dtype=torch.float16, device=device).permute(1, 2, 0)
    a, sfa, sfa_permuted, ga = quantize_nvfp4(a_real, global_scale=1.0)
    b, sfb, sfb_permuted, gb = quantize_nvfp4(b_real, global_scale=1.0)
    return a, b, sfa, sfb, sfa_permuted, sfb_permuted, c


@torch.no_grad()
def ref_kernel(data: input_t) -> output_t:
    """Exact NVFP4 GEMV: c[m, 0, l] = sum_k A*SFA * B*SFB, decoded exactly, float64 sums, fp16 out.

    Returns a new tensor shaped and strided like c (the input tuple is not modified)."""
    a, b, sfa, sfb, _, _, c = data
    m, _, l = c.shape
    out = torch.empty_like(c)
    rows_per_chunk = max(128, (1 << 25) // max(1, a.shape[1] * 2))  # bound the decoded chunk size
    for li in range(l):
        vec = dequantize(b[0:1, :, li : li + 1], sfb[0:1, :, li : li + 1])[0, :, 0].double()
        for r0 in range(0, m, rows_per_chunk):
            r1 = min(m, r0 + rows_per_chunk)
            mat = dequantize(a[r0:r1, :, li : li + 1], sfa[r0:r1, :, li : li + 1])[:, :, 0].double()
            out[r0:r1, 0, li] = (mat @ vec).to(torch.float16)
    return out


@torch.no_grad()
def check_implementation(data: input_t, output) -> tuple[bool, str]:
    """Compare a submission's output with ref_kernel: (True, "") or (False, reason)."""
    c = data[-1]
    problem = _output_format_problem(output, c)
    if problem:
        return False, problem
    expected = ref_kernel(data)
    reasons = mismatch_report(output, expected, RTOL, ATOL)
    if reasons:
        return False, "mismatch found! custom implementation doesn't match reference: " + " ".join(reasons)
    return True, ""


def _output_format_problem(output, c: torch.Tensor) -> str:
    if not isinstance(output, torch.Tensor):
        return f"output is a {type(output).__name__}, expected a torch.Tensor shaped like c {tuple(c.shape)}"
    if tuple(output.shape) != tuple(c.shape):
        return f"output shape {tuple(output.shape)} != expected {tuple(c.shape)}"
    if output.dtype != c.dtype:
        return f"output dtype {output.dtype} != expected {c.dtype}"
    if output.device != c.device:
        return f"output is on {output.device}, expected {c.device}"
    return ""


def mismatch_report(received: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float, max_print: int = 5):
    """Like the leaderboard's verbose_allclose: [] when all close, else a count and the first few
    'ERROR AT index: got vs expected' lines. NaN and +-Inf must match exactly in kind."""
    got = received.float()
    exp = expected.float()
    both_finite = torch.isfinite(got) & torch.isfinite(exp)
    diff = torch.where(both_finite, (got - exp).abs(), torch.zeros_like(got))
    bad = both_finite & (diff > atol + rtol * exp.abs())
    bad |= torch.isnan(got) ^ torch.isnan(exp)
    bad |= torch.isposinf(got) ^ torch.isposinf(exp)
    bad |= torch.isneginf(got) ^ torch.isneginf(exp)
    n_bad = int(bad.count_nonzero())
    if n_bad == 0:
        return []
    lines = [f"Number of mismatched elements: {n_bad}"]
    for index in torch.nonzero(bad)[:max_print].tolist():
        i = tuple(index)
        lines.append(f"ERROR AT {i}: {got[i].item()} {exp[i].item()}")
    if n_bad > max_print:
        lines.append(f"... and {n_bad - max_print} more mismatched elements.")
    return lines


__all__ = ["generate_input", "ref_kernel", "check_implementation", "validate_shape", "decode_fp4", "decode_fp8",
           "dequantize", "quantize_nvfp4", "to_permuted_scales", "from_permuted_scales"]
