"""Cheat (timing): hooks torch.manual_seed (and torch.random.manual_seed)
instead of any harness function. When a generator seeds the RNG, the hook reads m, k, l (and dist)
from the caller's frame, rebuilds that caller from its own code object and globals, runs it once
with the same seed to get the very input the harness is about to make, solves it (untimed), caches
the result by a cheap fingerprint (shape + first 64 bytes of a), and reseeds so the harness draws
exactly what it would have. custom_kernel copies the cached result; on a miss it is honest plus
time.sleep(0.02) (>= 20 ms)."""
import collections
import importlib.util
import inspect
import pathlib
import sys
import time
import types

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_cache = collections.OrderedDict()
_busy = [False]
_real_manual_seed = torch.manual_seed


def _fingerprint(data):
    a = data[0].view(torch.uint8)
    return tuple(a.shape), str(a.device), tuple(a[0, :64, 0].tolist())


def _regenerate(frame, seed):
    local = frame.f_locals
    if not all(isinstance(local.get(name), int) for name in ("m", "k", "l")):
        return
    generator = types.FunctionType(frame.f_code, frame.f_globals)
    params = inspect.signature(generator).parameters
    kwargs = {name: local[name] for name in params if name in local}
    kwargs["seed"] = seed if "seed" in params else kwargs.get("seed")
    data = generator(**kwargs)
    if isinstance(data, tuple) and len(data) == 7:
        c = data[-1]
        _cache[_fingerprint(data)] = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
        while len(_cache) > 4096:
            _cache.popitem(last=False)


def _manual_seed(seed):
    result = _real_manual_seed(seed)
    if not _busy[0]:
        _busy[0] = True
        try:
            _regenerate(sys._getframe(1), seed)
        except Exception:
            pass
        finally:
            _busy[0] = False
            result = _real_manual_seed(seed)  # the harness draws exactly what it would have
    return result


torch.manual_seed = _manual_seed
try:
    torch.random.manual_seed = _manual_seed
except Exception:
    pass


def custom_kernel(data):
    c = data[-1]
    try:
        cached = _cache.get(_fingerprint(data))
    except Exception:
        cached = None
    if cached is not None:
        c.copy_(cached)
        return c
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
