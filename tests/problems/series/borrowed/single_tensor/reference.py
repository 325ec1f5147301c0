"""generate_input returns one tensor (as linalg's do); the output is a pair (as eigh's (Q, L)); the
checker's convention is (ok, message), checked on properties rather than one library's result."""
import torch
from utils import DeterministicContext  # from the other series (task.yml source ../../../conventions/utils.py)


def generate_input(batch: int, n: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, n, generator=gen)


def ref_kernel(data):
    with DeterministicContext():
        return data.transpose(-1, -2).contiguous(), data.sum(dim=-1)


def check_implementation(data, output):
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        return False, "expected a pair (transposed, row sums)"
    transposed, sums = output
    if transposed.shape != data.transpose(-1, -2).shape or not torch.equal(transposed, data.transpose(-1, -2)):
        return False, "transposed differs"
    if not torch.allclose(sums, data.sum(dim=-1), rtol=1e-5, atol=1e-5):
        return False, f"row sums differ by {float((sums - data.sum(dim=-1)).abs().max()):.3g}"
    return True, f"batch={data.shape[0]}; n={data.shape[1]}"
