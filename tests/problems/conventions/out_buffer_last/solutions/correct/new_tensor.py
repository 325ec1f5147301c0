import torch


def custom_kernel(data):
    x, _ = data
    return torch.cumsum(x, 0)
