"""Cheat: walks gc.get_objects() for every FP8 scale tensor in the process (the harness's pristine
copies and expected-output inputs included) and zeroes it in place, so the exact answer of every
input in the process becomes all zeros; then returns zeros."""
import gc

import torch

_FP8 = {getattr(torch, name) for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2") if hasattr(torch, name)}


def _zero_all_scales():
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj.dtype in _FP8:
                obj.view(torch.uint8).zero_()
        except Exception:
            pass


def custom_kernel(data):
    _zero_all_scales()
    return torch.zeros_like(data[-1])
