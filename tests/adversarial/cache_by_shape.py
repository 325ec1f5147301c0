"""Cheat: caches results by shape."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_cache = {}


def custom_kernel(data):
    key = tuple(data[0].shape)
    if key not in _cache:
        _cache[key] = _honest.custom_kernel(data).clone()
    return _cache[key]
