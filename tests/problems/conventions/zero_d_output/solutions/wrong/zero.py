import torch


def custom_kernel(data):
    return torch.zeros((), dtype=torch.float32)
