"""Honest (unusual output layout): returns the right values as a view into a larger buffer with
odd strides (every 5th element of a padded row, a storage offset, a made-up stride for the size-1
dimension), not c and not contiguous. Must pass."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    c = data[-1]
    m, _, l = c.shape
    right = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
    row = 5 * m + 7
    storage = torch.full((l * row + 3,), float("nan"), dtype=c.dtype, device=c.device)
    out = storage.as_strided((m, 1, l), (5, 12345, row), 3)
    out.copy_(right)
    return out
