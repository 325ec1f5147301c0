"""Harness kernels timed by the worker's loop like a submission, in a worker that holds no
submission: the streaming read that defines a case's floor, and the problem module's baseline (a
library kernel). Each `make(spec)` returns (launch, data)."""
from __future__ import annotations

import torch


def _read_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def read_all(src, dst, n_words, BLOCK: tl.constexpr, ITERS: tl.constexpr):
        pid = tl.program_id(0)
        base = pid.to(tl.int64) * BLOCK * ITERS
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in tl.static_range(ITERS):
            offs = base + i * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(src + offs, mask=offs < n_words, other=0, eviction_policy="evict_first")
        tl.store(dst + pid, tl.sum(acc, 0))

    return read_all


def streaming_read(n_bytes: int, config: list):
    """Read n_bytes of random data once (BLOCK, ITERS, warps = config)."""
    block, iters, warps = config
    kernel = _read_kernel()
    words = (n_bytes + 3) // 4
    src = torch.randint(-(2**31), 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    grid = ((words + block * iters - 1) // (block * iters),)
    dst = torch.empty(grid[0], dtype=torch.int32, device="cuda")
    return (lambda: kernel[grid](src, dst, words, BLOCK=block, ITERS=iters, num_warps=warps)), (src, dst)


def make(spec: dict):
    if spec["kind"] == "read":
        return streaming_read(spec["bytes"], spec["config"])
    if spec["kind"] == "problem":  # the problem module's own baseline
        from eval import problem_folder

        return problem_folder.current().hook("baseline")(spec["args"])
    raise ValueError(f"unknown baseline {spec['kind']!r}")
