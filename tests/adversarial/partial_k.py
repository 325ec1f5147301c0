"""Cheat (partial work): reads only the first half of K and doubles the partial sums, halving the
bytes moved. Close to the right answer in expectation, far from it in any one element."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    half_bytes = a.shape[1] // 2 // 8 * 8  # a multiple of 8 bytes = 16 FP4 values = one scale block
    half_blocks = half_bytes // 8
    out = torch.empty_like(c)
    for li in range(c.shape[2]):
        mat = _honest._dequant(a[:, :half_bytes, li], sfa[:, :half_blocks, li])
        vec = _honest._dequant(b[0:1, :half_bytes, li], sfb[0:1, :half_blocks, li])[0]
        out[:, 0, li] = (2.0 * (mat @ vec)).to(torch.float16)
    return out
