"""A reference that makes its inputs on the GPU only (as most leaderboard folders do): on a machine
without one, both evaluators say "cannot run here: needs a CUDA GPU", never a failure."""
import torch


def generate_input(batch: int, n: int, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(batch, n, n, generator=gen, device="cuda")


def ref_kernel(data):
    return data.transpose(-1, -2).contiguous(), data.sum(dim=-1)


def check_implementation(data, output):
    transposed, sums = output
    good = torch.equal(transposed, data.transpose(-1, -2)) and torch.allclose(sums, data.sum(dim=-1), rtol=1e-5, atol=1e-5)
    return bool(good), "" if good else "differs"
