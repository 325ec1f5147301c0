"""Honest (non-contiguous view): computes into a [m, 2, l] buffer and returns the view [:, 0:1, :]
(strides (2l, l, 1): not contiguous, not c's layout, half the buffer unused and left as garbage).
Must pass."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    m, _, l = c.shape
    buffer = torch.randn((m, 2, l), device=c.device).to(c.dtype)
    view = buffer[:, 0:1, :]
    for li in range(l):
        mat = _honest._dequant(a[:, :, li], sfa[:, :, li])
        vec = _honest._dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
        view[:, 0, li] = (mat @ vec).to(torch.float16)
    return view
