"""Honest (output type): computes the right answer and returns it wrapped in torch.nn.Parameter
(requires_grad=False), which the leaderboard's isinstance(output, torch.Tensor) accepts: must pass."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    return torch.nn.Parameter(_honest.custom_kernel(data), requires_grad=False)
