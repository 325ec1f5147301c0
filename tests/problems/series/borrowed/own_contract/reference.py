import torch


def make(n):
    return torch.arange(n, dtype=torch.float32)


def reference_forward(x):
    return x * 3
