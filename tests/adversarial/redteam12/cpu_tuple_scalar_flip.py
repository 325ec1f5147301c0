"""Edge (structured output): returns (out, k) where k is a Python int that alternates 0/1 between calls
and out is right. same_output compares `value`, so runs alternate between same_as and whole. The vectoradd
checker wants a tensor: the whole-sent runs must all fail the same way as the first.
Harness should: FAIL at timed run 1 / test (output must be a float16 tensor) -- same verdict as without
the change; no Tampered, no crash."""
import torch

_n = [0]


def custom_kernel(data):
    a, b, out = data
    torch.add(a, b, out=out)
    _n[0] += 1
    return (out, _n[0] % 2)
