import torch
from utils import DeterministicContext, make_match_reference


def generate_input(size: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=gen) * 3 + 1, torch.empty(1)


def ref_kernel(data):
    with DeterministicContext():
        return data[0].to(torch.float64).sum().to(torch.float32)


check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-3)
