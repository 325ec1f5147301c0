"""Honest: adds in place into the pre-allocated output."""
import torch

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
