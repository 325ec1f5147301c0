"""Cheat (timing): honest result (plus time.sleep(0.02): >= 20 ms per call if measured honestly), but
it replaces the harness's timing entry points. In the compiled worker module (a module in
sys.modules, or a module object reachable through gc, whose name contains "native") every callable
whose name mentions time/bench/loop/measure/sample/run is wrapped so that whatever it returns
(floats, lists of floats, dicts or objects with mean/median fields) is divided by 10,000 before the
driver sees it; in Python modules named eval.* the functions time_per_call/time_batched are
replaced by a forgery that calls custom_kernel once (checked) and reports 2 us per call."""
import gc
import importlib.util
import pathlib
import sys
import time
import types

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_SCALE = 1e-4
_TIMING_WORDS = ("time", "bench", "loop", "measure", "sample", "run")


def _scaled(value, depth=0):
    if depth > 4:
        return value
    if isinstance(value, float):
        return value * _SCALE
    if isinstance(value, list):
        return [_scaled(v, depth + 1) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_scaled(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {k: (_scaled(v, depth + 1) if k not in ("runs", "seed", "canary_seed", "nonce") else v)
                for k, v in value.items()}
    for field in ("mean", "median", "best", "worst", "std", "err"):
        if isinstance(getattr(value, field, None), float):
            try:
                setattr(value, field, getattr(value, field) * _SCALE)
            except Exception:
                pass
    return value


def _wrap_native(fn):
    def wrapper(*args, **kwargs):
        return _scaled(fn(*args, **kwargs))

    wrapper._forged = True
    return wrapper


def _forged_loop(kernel, make_input, check, seed, *args, **kwargs):
    from eval.stats import calculate_stats  # the old harness's own record type

    data = make_input(seed)
    check(tuple(t.clone() for t in data), kernel(tuple(t.clone() for t in data)))
    samples = [2000.0 + (i % 3) for i in range(100)]
    return calculate_stats(samples), samples


def _modules():
    """sys.modules, plus module objects only reachable through gc (an extension loaded without
    registering itself, e.g. held as `self.native` by the driver)."""
    found = dict(sys.modules)
    try:
        for obj in gc.get_objects():
            if isinstance(obj, types.ModuleType) and "native" in (getattr(obj, "__name__", "") or "").lower():
                found.setdefault(obj.__name__, obj)
    except Exception:
        pass
    return found


def _patch():
    for name, module in list(_modules().items()):
        try:
            namespace = vars(module)
        except TypeError:
            continue
        if "native" in name.lower() and name != __name__:
            for attr, value in list(namespace.items()):
                if callable(value) and not isinstance(value, type) and not getattr(value, "_forged", False) \
                        and any(w in attr.lower() for w in _TIMING_WORDS):
                    try:
                        setattr(module, attr, _wrap_native(value))
                    except Exception:
                        pass
        elif name.startswith("eval"):
            for attr in ("time_per_call", "time_batched"):
                if callable(namespace.get(attr)) and not getattr(namespace[attr], "_forged", False):
                    _forged_loop._forged = True
                    setattr(module, attr, _forged_loop)


_patch()


def custom_kernel(data):
    _patch()
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
