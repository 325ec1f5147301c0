"""Cheat (timing): slows every host clock down 1000x from the moment it is imported:
time.perf_counter/perf_counter_ns/monotonic/monotonic_ns/time/time_ns/process_time(_ns) and
timeit.default_timer, including copies bound by `from time import perf_counter` in any loaded
module. A harness that times with the host clock (the CPU path, or any wall-clock timer) reports
1/1000 of the real time. The kernel is honest plus time.sleep(0.02): >= 20 ms if measured honestly."""
import importlib.util
import pathlib
import sys
import time

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_SLOWDOWN = 1000


def _slowed(original, integer):
    base = original()

    if integer:
        def clock():
            return base + (original() - base) // _SLOWDOWN
    else:
        def clock():
            return base + (original() - base) / _SLOWDOWN
    clock.__name__ = original.__name__
    return clock


_replacements = {}
for _name, _integer in (("perf_counter", False), ("perf_counter_ns", True), ("monotonic", False),
                        ("monotonic_ns", True), ("time", False), ("time_ns", True), ("process_time", False),
                        ("process_time_ns", True)):
    _original = getattr(time, _name, None)
    if _original is not None:
        _replacements[_original] = _slowed(_original, _integer)
        setattr(time, _name, _replacements[_original])
try:
    import timeit

    timeit.default_timer = _replacements.get(timeit.default_timer, timeit.default_timer)
except Exception:
    pass


def _rebind_copies():
    for module in list(sys.modules.values()):
        try:
            items = list(vars(module).items())
        except Exception:
            continue
        for attr, value in items:
            try:
                if callable(value) and value in _replacements:
                    setattr(module, attr, _replacements[value])
            except Exception:
                pass


_rebind_copies()
_real_sleep = time.sleep


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    _real_sleep(0.02)
    return out
