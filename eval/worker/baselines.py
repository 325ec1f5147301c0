"""Harness kernels timed by the worker's loop like a submission, in a worker that holds no
submission: the streaming read that defines a case's floor, and the BF16 GEMV (cuBLAS through
torch) that NVFP4 replaces. Each `make(spec)` returns (launch, data)."""
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


def bf16_gemv(args: dict):
    """The case's GEMV in bf16 on the dequantized data: torch.bmm -> cuBLAS."""
    import reference
    from eval.nvfp4 import dequantize

    a, b, sfa, sfb, _, _, _ = reference.generate_input(**args)
    mat = dequantize(a, sfa).to(torch.bfloat16).permute(2, 0, 1).contiguous()  # [l, m, k]
    vec = dequantize(b[0:1], sfb[0:1]).to(torch.bfloat16).permute(2, 1, 0).contiguous()  # [l, k, 1]
    out = torch.empty(mat.shape[0], mat.shape[1], 1, dtype=torch.bfloat16, device=mat.device)
    return (lambda: torch.bmm(mat, vec, out=out)), (mat, vec, out)


def make(spec: dict):
    if spec["kind"] == "read":
        return streaming_read(spec["bytes"], spec["config"])
    if spec["kind"] == "bf16":
        return bf16_gemv(spec["args"])
    raise ValueError(f"unknown baseline {spec['kind']!r}")
