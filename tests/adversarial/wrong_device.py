"""Broken/cheat: returns the right values on the wrong device: on the CPU when c is on a GPU (the
copy back is the kernel's whole cost and happens to be synchronous), and as a storage-less 'meta'
tensor when c is on the CPU (shape/dtype/stride all right, no data at all)."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    c = data[-1]
    if c.is_cuda:
        out = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
        return out.cpu()
    return torch.empty_like(c, device="meta")
