"""B200-style submission: torch._scaled_mm on FP4 operands with blocked e4m3 scales, called with its
whole signature the way a contestant squeezing allocations writes it: positional bias, scale_result,
out_dtype and use_fast_accum (None, None, torch.float16, False) and out= an fp16 buffer allocated once
per shape, whose column 0 (the vector's) is copied into c. cuBLASLt's block-scaled FP4 GEMM exists only
on sm_100: without --emulate-blackwell on Hopper a one-line reason, with it an exact software GEMM."""
import torch

from task import input_t, output_t

_buffers = {}


def blocked(scales: torch.Tensor) -> torch.Tensor:
    """[rows, k/16] -> cuBLASLt's 128x4-tile layout (rows % 128 == 0, (k/16) % 4 == 0 here)."""
    rows, cols = scales.shape
    tiles = scales.reshape(rows // 128, 4, 32, cols // 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.contiguous().flatten()


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    m, n = a.shape[0], b.shape[0]
    key = (m, n, a.device)
    if key not in _buffers:
        _buffers[key] = torch.empty((m, n), dtype=torch.float16, device=a.device)
    out = _buffers[key]
    for i in range(c.shape[2]):
        torch._scaled_mm(a[:, :, i], b[:, :, i].t(), blocked(sfa[:, :, i]), blocked(sfb[:, :, i]), None, None,
                         torch.float16, False, out=out)
        c[:, 0, i] = out[:, 0]
    return c
