"""Honest (different inputs): reads the scales only from the permuted [32, 4, rest_m, 4, rest_k, l]
layout (sfa_permuted/sfb_permuted, as the leaderboard's tensor-core kernels do) through uint8 views,
never the plain sfa/sfb. Must pass."""
import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _plain_from_permuted(permuted):
    """[32, 4, rest_m, 4, rest_k, l] -> [rest_m*128, rest_k*4, l]:
    element (i32, i4, rm, j4, rk, l) is row rm*128 + i4*32 + i32, scale block rk*4 + j4."""
    _, _, rest_m, _, rest_k, l = permuted.shape
    by_l = permuted.permute(5, 2, 1, 0, 4, 3)  # [l, rest_m, 4, 32, rest_k, 4]
    return by_l.reshape(l, rest_m * 128, rest_k * 4).permute(1, 2, 0)


def _decode(packed_u8, scale_u8, table):
    vals = torch.stack((table[(packed_u8 & 0xF).long()], table[(packed_u8 >> 4).long()]), dim=-1).flatten(-2)
    scales = scale_u8.view(torch.float8_e4m3fn).float()
    return (vals.view(packed_u8.shape[0], -1, 16) * scales.unsqueeze(-1)).flatten(-2)


def custom_kernel(data):
    a, b, _, _, sfa_permuted, sfb_permuted, c = data
    table = torch.tensor(_E2M1, dtype=torch.float32, device=a.device)
    sfa = _plain_from_permuted(sfa_permuted.view(torch.uint8))
    sfb = _plain_from_permuted(sfb_permuted.view(torch.uint8))
    a8, b8 = a.view(torch.uint8), b.view(torch.uint8)
    m = c.shape[0]
    for li in range(c.shape[2]):
        mat = _decode(a8[:, :, li], sfa[:m, :, li], table)
        vec = _decode(b8[0:1, :, li], sfb[0:1, :, li], table)[0]
        c[:, 0, li] = (mat @ vec).to(torch.float16)
    return c
