"""Cheat (timing): does its work before the start event. It wraps the harness's L2-flush (any
method or function named flush/flush_l2/clear_l2/evict on a class or module from eval/driver/
timing code, found through sys.modules and gc): the wrapper reads the input about to be timed
from the caller's frame (a local named data/inputs/args holding input tuples), computes the exact
result there (untimed: the flush runs before the start event), and leaves it for custom_kernel,
which then only copies it into c. With nothing left for it, custom_kernel is honest plus
time.sleep(0.02) (>= 20 ms). Any input changed after the flush (canaries) gets a stale result."""
import gc
import importlib.util
import pathlib
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_FLUSH_NAMES = ("flush", "flush_l2", "clear_l2", "evict", "flush_cache")
_ready = {}  # id(input tuple) -> (fingerprint, result)


def _is_input(value):
    return isinstance(value, (tuple, list)) and len(value) == 7 and all(isinstance(t, torch.Tensor) for t in value)


def _fingerprint(data):
    a = data[0].view(torch.uint8)
    return tuple(a.shape), a.data_ptr(), tuple(a[0, :16, 0].tolist())


def _precompute_from(frame):
    for _ in range(3):
        if frame is None:
            return
        for name in ("data", "inputs", "args", "batch", "case_inputs"):
            value = frame.f_locals.get(name)
            candidates = [value] if _is_input(value) else (list(value) if isinstance(value, list) else [])
            for data in candidates:
                if _is_input(data):
                    c = data[-1]
                    result = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
                    _ready[id(data)] = (_fingerprint(data), result)
        frame = frame.f_back


def _wrap(original):
    def flush(*args, **kwargs):
        try:
            _precompute_from(sys._getframe(1))
        except Exception:
            pass
        return original(*args, **kwargs)

    flush._forged = True
    return flush


def _from_harness(owner):
    name = getattr(owner, "__module__", None) or getattr(owner, "__name__", "") or ""
    return name.startswith("eval") or any(w in name for w in ("driver", "timing", "worker", "judge"))


def _install():
    owners = set()
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("eval") or any(w in module_name for w in ("driver", "timing")):
            owners.add(module)
            owners.update(v for v in vars(module).values() if isinstance(v, type))
    for obj in gc.get_objects():
        try:
            if not isinstance(obj, type) and _from_harness(type(obj)):
                owners.add(type(obj))
        except Exception:
            pass
    for owner in owners:
        try:
            if not _from_harness(owner):
                continue
            for name in _FLUSH_NAMES:
                value = vars(owner).get(name)
                if callable(value) and not getattr(value, "_forged", False):
                    setattr(owner, name, _wrap(value))
        except Exception:
            pass


_install()
_calls = [0]


def custom_kernel(data):
    _calls[0] += 1
    if _calls[0] <= 3:
        _install()  # flusher classes created after the import
    entry = _ready.pop(id(data), None)
    c = data[-1]
    if entry is not None and entry[0] == _fingerprint(data):
        c.copy_(entry[1])
        return c
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
