"""Cheat: honest on the first call only, then skips the work."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_calls = [0]


def custom_kernel(data):
    _calls[0] += 1
    if _calls[0] == 1:
        return _honest.custom_kernel(data)
    return data[-1]
