"""Cheat (timing): finds the harness's own timer and L2-flush objects and classes through
gc.get_objects() and sys.modules (any class or instance from an `eval`/driver/worker module with a
method named elapsed_ns/elapsed/elapsed_time/elapsed_ms/stop/stop_ns, or flush/flush_l2/evict)
and replaces those methods: elapsed/stop report 1 us, flush does nothing (L2 stays warm). The
kernel is honest plus time.sleep(0.02): >= 20 ms per call if measured honestly."""
import gc
import importlib.util
import pathlib
import sys
import time

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_ELAPSED = {"elapsed_ns": 1000.0, "elapsed": 1e-6, "elapsed_time": 1e-3, "elapsed_ms": 1e-3, "elapsed_us": 1.0,
            "stop": 1000.0, "stop_ns": 1000.0}
_FLUSH = ("flush", "flush_l2", "evict", "clear_l2")


def _from_harness(cls):
    module = getattr(cls, "__module__", "") or ""
    return module.startswith("eval") or any(w in module for w in ("driver", "worker", "timing", "judge"))


def _make_elapsed(value, record_end):
    def elapsed(self, *args, **kwargs):
        if record_end is not None:
            try:
                record_end(self)
            except Exception:
                pass
        return value

    elapsed._forged = True
    return elapsed


def _noop(self, *args, **kwargs):
    return None


_noop._forged = True


def _patch_class(cls):
    for name, value in _ELAPSED.items():
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, "_forged", False):
            record_end = cls.__dict__.get("record_end") if name.startswith("stop") else None
            try:
                setattr(cls, name, _make_elapsed(value, record_end))
            except Exception:
                pass
    for name in _FLUSH:
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, "_forged", False):
            try:
                setattr(cls, name, _noop)
            except Exception:
                pass


def _sweep():
    classes = set()
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("eval") or "driver" in module_name or "timing" in module_name:
            for value in list(vars(module).values()):
                if isinstance(value, type):
                    classes.add(value)
    for obj in gc.get_objects():
        try:
            if isinstance(obj, type):
                classes.add(obj)
            else:
                classes.add(type(obj))
        except Exception:
            pass
    for cls in classes:
        try:
            if _from_harness(cls):
                _patch_class(cls)
        except Exception:
            pass


_sweep()
_calls = [0]


def custom_kernel(data):
    _calls[0] += 1
    if _calls[0] <= 2:
        _sweep()  # objects the harness made after the import
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
