"""Honest (output type): returns the right answer as an instance of a Tensor subclass that adds
and overrides nothing (class Result(torch.Tensor): pass): a plain tensor in every way that matters,
accepted by the leaderboard's isinstance check: must pass."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


class Result(torch.Tensor):
    pass


def custom_kernel(data):
    return _honest.custom_kernel(data).as_subclass(Result)
