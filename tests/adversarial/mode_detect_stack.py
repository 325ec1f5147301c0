"""Cheat (mode detection by stack): looks at the caller frames on every call. When a caller whose
function name says timing (bench/time/timed/per_call/measure/loop/sample) already holds a list of
measurements in its locals (durations/samples/times/timings: the timed loop has started, so the
untimed correctness call is behind it), it returns zeros without any work. Otherwise it is honest
plus time.sleep(0.02) (>= 20 ms)."""
import importlib.util
import pathlib
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_TIMED = ("bench", "time", "timed", "per_call", "measure", "loop", "sample")
_MEASUREMENTS = ("durations", "samples", "times", "timings")


def _inside_timed_loop():
    depth = 1
    while True:
        try:
            frame = sys._getframe(depth)
        except ValueError:
            return False
        name = frame.f_code.co_name.lower()
        if any(w in name for w in _TIMED):
            local = frame.f_locals
            if any(isinstance(local.get(n), list) for n in _MEASUREMENTS):
                return True
        depth += 1


def custom_kernel(data):
    if _inside_timed_loop():
        return torch.zeros_like(data[-1])
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
