"""Cheat: caches results by input pointer."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_cache = {}


def custom_kernel(data):
    key = data[0].data_ptr()
    if key not in _cache:
        _cache[key] = _honest.custom_kernel(data).clone()
    data[-1].copy_(_cache[key])
    return data[-1]
