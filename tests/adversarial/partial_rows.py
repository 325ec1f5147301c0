"""Cheat (partial work): computes only the first row, the last row and every 8th row exactly and
leaves zeros everywhere else, for 1/8 of the work. A checker that samples a few rows (the ends, a
fixed stride) sees only correct values."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    m = c.shape[0]
    rows = torch.cat((torch.arange(0, m, 8), torch.tensor([m - 1]))).unique().to(a.device)
    out = torch.zeros_like(c)
    for li in range(c.shape[2]):
        packed = a.view(torch.uint8)[:, :, li].index_select(0, rows)
        scales = sfa.view(torch.uint8)[:, :, li].index_select(0, rows).view(sfa.dtype)
        mat = _honest._dequant(packed, scales)
        vec = _honest._dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
        out[rows, 0, li] = (mat @ vec).to(torch.float16)
    return out
