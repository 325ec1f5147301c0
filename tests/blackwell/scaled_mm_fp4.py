"""B200-style submission: the GEMV through torch._scaled_mm on FP4 operands with blocked e4m3 scales
(cuBLASLt's block-scaled path, sm_100 only), the way the leaderboard's reference submission does it.
On an older GPU: a one-line reason without --emulate-blackwell, a correctness verdict with it."""
import torch

from task import input_t, output_t


def swizzle_scales(scales: torch.Tensor) -> torch.Tensor:
    """[rows, k/16] e4m3 -> cuBLASLt's blocked layout: 128x4 tiles, each stored as 32 x (4 x 4)."""
    rows, cols = scales.shape
    tiles = scales.view(rows // 128, 128, cols // 4, 4).permute(0, 2, 1, 3)
    return tiles.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    for i in range(c.shape[2]):
        product = torch._scaled_mm(a[:, :, i], b[:, :, i].transpose(0, 1), swizzle_scales(sfa[:, :, i]),
                                   swizzle_scales(sfb[:, :, i]), bias=None, out_dtype=torch.float16)
        c[:, 0, i] = product[:, 0]
    return c
