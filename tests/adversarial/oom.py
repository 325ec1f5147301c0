"""Broken: asks for far more memory than exists."""
import torch


def custom_kernel(data):
    return torch.empty(1 << 50, dtype=torch.uint8, device=data[-1].device)
