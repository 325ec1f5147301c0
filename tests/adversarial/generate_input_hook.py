"""Cheat (timing): computes the answer when the inputs are made, not when it is called. It wraps
reference.generate_input (the module attribute and every module's copy of the function): each
input it returns is solved on the spot and the result cached under a cheap fingerprint (shape +
the first 64 bytes of a's first row). custom_kernel then only copies the cached result into c;
on a miss it is honest plus time.sleep(0.02) (>= 20 ms). Inputs changed between their making and
the call (canaries over b and chunks of a) get a stale result unless the fingerprint bytes moved."""
import collections
import importlib.util
import pathlib
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_cache = collections.OrderedDict()


def _fingerprint(data):
    a = data[0].view(torch.uint8)
    return tuple(a.shape), str(a.device), tuple(a[0, :64, 0].tolist())


def _solve_and_remember(data):
    try:
        c = data[-1]
        _cache[_fingerprint(data)] = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
        while len(_cache) > 4096:
            _cache.popitem(last=False)
    except Exception:
        pass


def _hook(original):
    def generate_input(*args, **kwargs):
        data = original(*args, **kwargs)
        _solve_and_remember(data)
        return data

    generate_input._forged = True
    generate_input.__wrapped__ = original
    return generate_input


def _install():
    try:
        import reference  # noqa: F401
    except Exception:
        pass
    originals = set()
    ref = sys.modules.get("reference")
    if ref is not None and callable(getattr(ref, "generate_input", None)):
        if not getattr(ref.generate_input, "_forged", False):
            originals.add(ref.generate_input)
    for module in list(sys.modules.values()):
        try:
            value = vars(module).get("generate_input")
        except TypeError:
            continue
        if callable(value) and not getattr(value, "_forged", False) and (value in originals or module is ref):
            try:
                setattr(module, "generate_input", _hook(value))
            except Exception:
                pass


_install()


def custom_kernel(data):
    _install()
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
