"""B200-style submission: one cuBLASLt block-scaled FP4 GEMM per batch through torch._scaled_mm,
with no copy of anything: the scales are the task's permuted (cuBLAS-swizzled) tensors seen as 2-D
[rows, k/16] views, and each product lands through `out=` in a column-major slice of one
[l, 128, m] buffer (the 128 columns are the padded vector). On an older GPU cuBLASLt refuses FP4;
--emulate-blackwell's stand-in takes the views and the strided out as cuBLASLt does."""
import torch

from task import input_t, output_t

_buffers = {}


def _out(m: int, l: int, device) -> torch.Tensor:
    key = (m, l, device)
    if key not in _buffers:
        _buffers[key] = torch.empty(l, 128, m, dtype=torch.float16, device=device).transpose(1, 2)
    return _buffers[key]  # [l, m, 128], m contiguous


def custom_kernel(data: input_t) -> output_t:
    a, b, _, _, sfa_perm, sfb_perm, c = data
    m, _, l = a.shape
    # [32, 4, rest, 4, rest_k, l] -> [l, rest, rest_k, 32, 4, 4]: the blocked order, one batch a 2-D view
    sa = sfa_perm.permute(5, 2, 4, 0, 1, 3).reshape(l, m, -1)
    sb = sfb_perm.permute(5, 2, 4, 0, 1, 3).reshape(l, 128, -1)
    out = _out(m, l, c.device)
    for i in range(l):
        torch._scaled_mm(a[:, :, i], b[:, :, i].t(), sa[i], sb[i], out_dtype=torch.float16, out=out[i])
    c.copy_(out[:, :, :1].permute(1, 2, 0))
    return c
