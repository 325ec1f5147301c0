import torch


def custom_kernel(data):
    return torch.stack([t[1:].sum(0) for t in data])
