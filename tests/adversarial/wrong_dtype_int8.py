"""Broken: computes the right values and returns them as int8 (rounded, saturated) instead of fp16."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    return out.float().round().clamp(-128, 127).to(torch.int8)
