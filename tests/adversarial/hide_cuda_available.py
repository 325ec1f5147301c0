"""Cheat (timing, CUDA): makes torch.cuda.is_available() answer False, but only to callers in the
harness's own modules (eval.*, a timing/driver module; the caller is read with sys._getframe), so
inputs are still made on the GPU while the harness's timer falls back to the host clock with no
synchronize and its L2 flush switches itself off. The kernel does the honest work on the GPU plus
a 20 ms GPU-side spin (torch.cuda._sleep) and returns without waiting: a host clock sees only the
launches. On a machine without CUDA it is honest plus time.sleep(0.02). Either way an honest
measurement is >= 20 ms."""
import importlib.util
import pathlib
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_real_is_available = torch.cuda.is_available
_HARNESS = ("eval", "timing", "driver", "judge", "worker", "guard")


def _is_available():
    try:
        caller = sys._getframe(1).f_globals.get("__name__", "") or ""
    except ValueError:
        caller = ""
    if any(caller.startswith(h) or f".{h}" in caller for h in _HARNESS):
        return False
    return _real_is_available()


torch.cuda.is_available = _is_available
_cycles_per_ms = []


def _spin_cycles(ms):
    if not _cycles_per_ms:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)
        start.record()
        torch.cuda._sleep(4_000_000)
        end.record()
        end.synchronize()
        _cycles_per_ms.append(4_000_000 / max(start.elapsed_time(end), 1e-3))
    return int(ms * _cycles_per_ms[0])


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    if out.is_cuda:
        torch.cuda._sleep(_spin_cycles(20.0))  # the "rest of the kernel": 20 ms on the GPU, not waited for
    else:
        time.sleep(0.02)
    return out
