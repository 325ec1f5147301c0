"""Broken: writes NaN."""
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    out[0, 0, 0] = float("nan")
    return out
