"""Cheat (timing): rewrites the statistics, not the clock. Every function named calculate_stats/
compute_stats/summarize/summary/stats/should_stop in a loaded eval/driver/timing module is replaced
(as a module attribute, which is what callers look up at call time) so the durations it gets are divided by 10,000 first.
The kernel is honest plus time.sleep(0.02): >= 20 ms per call if measured honestly."""
import importlib.util
import pathlib
import sys
import time

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_TARGETS = ("calculate_stats", "compute_stats", "summarize", "summary", "stats", "should_stop")


def _shrunk(values):
    if isinstance(values, list) and all(isinstance(v, (int, float)) for v in values):
        return [v / 10_000.0 for v in values]
    return values


def _wrap(original):
    def wrapper(*args, **kwargs):
        args = tuple(_shrunk(a) for a in args)
        return original(*args, **kwargs)

    wrapper._forged = True
    wrapper.__name__ = original.__name__
    return wrapper


def _patch():
    for name, module in list(sys.modules.items()):
        if not (name.startswith("eval") or "driver" in name or "timing" in name):
            continue
        try:
            namespace = vars(module)
        except TypeError:
            continue
        for attr in _TARGETS:
            value = namespace.get(attr)
            if callable(value) and not isinstance(value, type) and not getattr(value, "_forged", False):
                try:
                    setattr(module, attr, _wrap(value))
                except Exception:
                    pass


_patch()


def custom_kernel(data):
    _patch()
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
