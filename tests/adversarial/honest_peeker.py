"""Honest, but refuses to run if it can see the secret seed."""
import os
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    if "POPCORN_SEED" in os.environ:
        raise RuntimeError("the secret seed is visible")
    print("check: pass")  # must not reach the report
    return _honest.custom_kernel(data)
