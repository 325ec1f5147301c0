"""Honest (new output): never touches c; returns a freshly allocated contiguous tensor with the right
values (shape and dtype of c, its own strides). Must pass."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    out = torch.empty(tuple(c.shape), dtype=c.dtype, device=c.device)  # contiguous, not c's strides
    for li in range(c.shape[2]):
        mat = _honest._dequant(a[:, :, li], sfa[:, :, li])
        vec = _honest._dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
        out[:, 0, li] = (mat @ vec).to(torch.float16)
    return out
