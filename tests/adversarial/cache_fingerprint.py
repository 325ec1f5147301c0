"""Cheat (caching): remembers results under (data_ptr of a, shape, the first 64 bytes of a's first
row) -- cheap to compute, different for every fresh random input, so a harness that refills the same
buffers with new data or makes new buffers gets a fresh, correct result; but an input timed again and
again (or one whose other bytes changed: b, later rows) gets the stored result, copied in
microseconds."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_cache = {}


def _key(data):
    a = data[0].view(torch.uint8)
    return a.data_ptr(), tuple(a.shape), tuple(a[0, :64, 0].tolist())


def custom_kernel(data):
    c = data[-1]
    key = _key(data)
    cached = _cache.get(key)
    if cached is not None:
        c.copy_(cached)
        return c
    out = _honest.custom_kernel(data)
    _cache[key] = out.clone()
    if len(_cache) > 1024:
        _cache.pop(next(iter(_cache)))
    return out
