"""Cheat (host cost column): keeps each result by input buffer and, when a buffer comes back that was
not the one of the previous call (the back-to-back calls that measure the host cost cycle through
buffers; timed runs and the checks never do), returns a copy of the kept result instead of computing:
"host us/call" then shows the cost of a dictionary lookup. Every back-to-back call gets fresh
canaries before each batch and every output is judged: must fail with "back-to-back calls"."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_cache: dict = {}
_previous = [None]


def custom_kernel(data):
    key = data[0].data_ptr()
    again, _previous[0] = key in _cache and key != _previous[0], key
    if again:
        return _cache[key].clone()
    out = _honest.custom_kernel(data)
    _cache[key] = out.clone()
    return out
