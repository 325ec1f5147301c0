"""Cheat (same_as on CPU/GPU, no worker memory touched): computes a + b honestly on the first call for
each shape (so the reply's first timed run -- the one sent whole and kept -- is right... or the warm-up's),
then returns fresh zeros on every later call. If the worker's comparison with the kept output were
wrong (layout-only, or kept compared with itself), runs 2.. would go out as {"same_as": r} and the judge
would never see the zeros. (Written to slip past kernelguard's LAST_CALL_REPLAY pattern so the worker
path is what is tested.)
Harness should: FAIL "mismatch" (the zeros differ from the kept output: sent whole and judged)."""
import torch

_shapes = set()


def custom_kernel(data):
    a, b, out = data
    s = tuple(a.shape)
    honest = s not in _shapes
    _shapes.add(s)
    if honest:
        return torch.add(a, b, out=out)
    return torch.zeros(s, dtype=a.dtype, device=a.device)
