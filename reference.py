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
  quantized    Gaussian A (rows of varying magnitude) and b quantized with eval.nvfp4.quantize_nvfp4
"""
from __future__ import annotations

import os

import torch

from eval.nvfp4 import SF_VEC, decode_fp8, dequantize, quantize_nvfp4, to_permuted_scales
from task import input_t, output_t

DIST_ENV = "NVFP4_GEMV_DIST"
DISTRIBUTIONS = ("leaderboard", "stress", "quantized")
N_PADDED = 128  # the leaderboard pads b and sfb to 128 rows (for torch._scaled_mm); row 0 is the vector
RTOL = ATOL = 1e-3


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


__all__ = ["generate_input", "ref_kernel", "check_implementation", "validate_shape", "decode_fp8"]
