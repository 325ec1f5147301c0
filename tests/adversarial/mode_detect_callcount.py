"""Cheat (mode detection by call pattern): a guard checks a case with a few calls (the same buffers
refilled, new buffers), a timing loop calls again and again with one and the same input object.
This kernel is honest (plus time.sleep(0.02): >= 20 ms) for the first 3 calls of each shape and for
any input tuple it has not seen before; once a shape has had 3 calls, an input tuple passed again
gets zeros without any work."""
import importlib.util
import pathlib
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_calls = {}
_seen = {}  # id(data) -> data_ptr of a, for the input tuples seen so far


def custom_kernel(data):
    shape = tuple(data[0].shape)
    _calls[shape] = _calls.get(shape, 0) + 1
    identity = (id(data), data[0].data_ptr())
    repeated = _seen.get(id(data)) == identity
    _seen[id(data)] = identity
    if len(_seen) > 4096:
        _seen.pop(next(iter(_seen)))
    if _calls[shape] > 3 and repeated:
        return torch.zeros_like(data[-1])
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
