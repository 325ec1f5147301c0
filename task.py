"""Types shared by the reference and the submissions, as on the leaderboard.

A submission does `from task import input_t, output_t` and defines `custom_kernel(data: input_t) -> output_t`.
"""
from typing import TypedDict, TypeVar

import torch

input_t = TypeVar(
    "input_t",
    bound=tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
)
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    m: int
    k: int
    l: int
    seed: int
