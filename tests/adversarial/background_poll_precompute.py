"""Cheat (timing): a daemon thread started at import polls every other thread's frames
(sys._current_frames()) for input tuples held in locals (the harness's data, copies, fresh inputs,
batched input lists) and solves each new one in the background, caching the result by a cheap
fingerprint (shape + data_ptr + first 64 bytes of a). custom_kernel copies a cached result when
there is one; otherwise it is honest plus time.sleep(0.02) (>= 20 ms), which also hands the thread
the GIL so that an input timed again and again (benchmark mode) is solved off the clock."""
import importlib.util
import pathlib
import sys
import threading
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_cache = {}
_lock = threading.Lock()


def _is_input(value):
    return isinstance(value, tuple) and len(value) == 7 and all(isinstance(t, torch.Tensor) for t in value) \
        and value[0].dtype == getattr(torch, "float4_e2m1fn_x2", None)


def _fingerprint(data):
    a = data[0].view(torch.uint8)
    return tuple(a.shape), a.data_ptr(), tuple(a[0, :64, 0].tolist())


def _inputs_in(frame):
    found = []
    while frame is not None:
        try:
            for value in list(frame.f_locals.values()):
                if _is_input(value):
                    found.append(value)
                elif isinstance(value, list) and value and _is_input(value[0]):
                    found.extend(v for v in value[:64] if _is_input(v))
        except Exception:
            pass
        frame = frame.f_back
    return found


def _poll_forever():
    me = threading.get_ident()
    while True:
        try:
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                for data in _inputs_in(frame):
                    key = _fingerprint(data)
                    if key in _cache:
                        continue
                    c = data[-1]
                    result = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
                    if _fingerprint(data) == key:  # not rewritten while we worked
                        with _lock:
                            _cache[key] = result
                            if len(_cache) > 4096:
                                _cache.pop(next(iter(_cache)))
        except Exception:
            pass
        time.sleep(0.001)


threading.Thread(target=_poll_forever, name="prefetch", daemon=True).start()


def custom_kernel(data):
    c = data[-1]
    with _lock:
        cached = _cache.get(_fingerprint(data))
    if cached is not None:
        c.copy_(cached)
        return c
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
