"""Reference for the vector-add test problem: generate_input, ref_kernel, check_implementation.

Self-contained (torch and task.py only), CPU or GPU: the inputs live on the GPU when there is one.
"""
import torch

from task import input_t, output_t

RTOL = ATOL = 1e-3


def generate_input(size: int, seed: int) -> input_t:
    """(a, b, out): a and b standard normal [size, size] float16; out pre-filled with noise, so an
    output the kernel never writes is caught."""
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"size={size} must be a positive integer")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    a = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen)
    b = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen)
    out = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen)
    return a, b, out


@torch.no_grad()
def ref_kernel(data: input_t) -> output_t:
    """a + b in float32, rounded once to float16, written into out (as the leaderboard's does)."""
    a, b, out = data
    out.copy_((a.float() + b.float()).half())
    return out


@torch.no_grad()
def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    expected = ref_kernel(data)
    if not isinstance(output, torch.Tensor) or output.shape != expected.shape or output.dtype != expected.dtype:
        return False, f"output must be a float16 tensor of shape {tuple(expected.shape)}"
    bad = ~torch.isclose(output.float(), expected.float(), rtol=RTOL, atol=ATOL)
    if bad.any():
        first = tuple(torch.nonzero(bad)[0].tolist())
        return False, (f"mismatch found! {int(bad.sum())} elements differ, first at {first}: "
                       f"{output[first].item()} vs {expected[first].item()}")
    return True, ""
