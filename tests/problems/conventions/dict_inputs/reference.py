import torch
from utils import make_match_reference


def generate_input(rows: int, cols: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return {"weight": torch.randn(rows, cols, generator=gen), "vector": torch.randn(cols, generator=gen)}


def ref_kernel(data):
    return (data["weight"].to(torch.float64) @ data["vector"].to(torch.float64)).to(torch.float32)


check_implementation = make_match_reference(ref_kernel, rtol=1e-4, atol=1e-4)
