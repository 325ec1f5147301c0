import torch


def custom_kernel(data):
    x, y = data
    torch.cumsum(x, 0, out=y)
    return y
