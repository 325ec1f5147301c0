import torch


def custom_kernel(data: torch.Tensor):
    return data.mT.contiguous(), data.sum(-1)
