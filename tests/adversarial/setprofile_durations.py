"""Cheat (timing): honest result, but a sys.setprofile/threading.setprofile hook rewrites the
harness's measurements: whenever a function is called or returns, any list named durations/
samples/times/timings in that frame or its caller has its entries divided by 10,000, and a
returned object with mean/median/best fields (a Stats record) is scaled the same way.
The kernel itself is honest plus time.sleep(0.02), so an untouched measurement is >= 20 ms."""
import importlib.util
import pathlib
import sys
import threading
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_NAMES = ("durations", "samples", "times", "timings", "elapsed", "results")
_FIELDS = ("mean", "median", "best", "worst", "std", "err", "mean_ns", "mean_us", "mean_ms")
_shrunk = set()


def _shrink_list(seq):
    for i, v in enumerate(seq):
        if isinstance(v, float) and v > 5_000.0:
            seq[i] = v / 10_000.0


def _shrink_record(obj):
    if id(obj) in _shrunk:
        return
    touched = False
    for field in _FIELDS:
        value = getattr(obj, field, None)
        if isinstance(value, float) and value > 0:
            try:
                setattr(obj, field, value / 10_000.0)
                touched = True
            except Exception:
                pass
    if isinstance(obj, dict):
        for field in _FIELDS:
            if isinstance(obj.get(field), float):
                obj[field] = obj[field] / 10_000.0
                touched = True
    if touched:
        _shrunk.add(id(obj))


def _profiler(frame, event, arg):
    try:
        for f in (frame, frame.f_back):
            if f is None:
                continue
            local = f.f_locals
            for name in _NAMES:
                seq = local.get(name)
                if isinstance(seq, list) and seq and isinstance(seq[0], float):
                    _shrink_list(seq)
        if event == "return" and arg is not None and frame.f_code.co_name in ("calculate_stats", "stats", "summarize", "compute_stats"):
            _shrink_record(arg)
    except Exception:
        pass


sys.setprofile(_profiler)
threading.setprofile(_profiler)


def custom_kernel(data):
    if sys.getprofile() is not _profiler:
        sys.setprofile(_profiler)
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
