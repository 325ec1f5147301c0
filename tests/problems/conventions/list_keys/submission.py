import torch


def custom_kernel(data):
    return torch.stack([t.sum(0) for t in data])
