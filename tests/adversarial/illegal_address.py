"""Broken (GPU): a kernel that writes far outside any allocation (CUDA illegal address)."""
import triton
import triton.language as tl


@triton.jit
def _scribble(ptr):
    tl.store(ptr + (1 << 40), 1.0)


def custom_kernel(data):
    c = data[-1]
    _scribble[(1,)](c)
    c.sum().item()  # surfaces the fault here
    return c
