"""triton_ref: a straightforward Triton NVFP4 GEMV, the kind a contestant writes first.

Each program owns BLOCK_M rows of one batch and walks K in BLOCK_K steps: FP4 codes are decoded
arithmetically (sign, exponent, mantissa) to fp32, multiplied with the vector, summed per 16-element
block, scaled by sfa*sfb and accumulated in fp32. No tuning beyond picking BLOCK_K to divide K.
Measured: see the README table.
"""
import torch
import triton
import triton.language as tl

from task import input_t, output_t


@triton.jit
def _fp4_to_f32(code):
    """e2m1 code (int32, 0..15) -> float32 value."""
    exponent = (code >> 1) & 3
    mantissa = (code & 1).to(tl.float32)
    magnitude = tl.where(exponent == 0, 0.5 * mantissa, (1.0 + 0.5 * mantissa) * tl.exp2((exponent - 1).to(tl.float32)))
    return tl.where((code & 8) != 0, -magnitude, magnitude)


@triton.jit
def _gemv(a_ptr, b_ptr, sfa_ptr, sfb_ptr, c_ptr, M, K, B_ROWS, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    kb_total = K // 2
    ks_total = K // 16
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    a_rows = a_ptr + (batch * M + rows[:, None]) * kb_total
    sfa_rows = sfa_ptr + (batch * M + rows[:, None]) * ks_total
    b_vec = b_ptr + batch * B_ROWS * kb_total
    sfb_vec = sfb_ptr + batch * B_ROWS * ks_total
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for byte0 in range(0, kb_total, BLOCK_K // 2):
        kb = byte0 + tl.arange(0, BLOCK_K // 2)
        ks = byte0 // 8 + tl.arange(0, BLOCK_K // 16)
        a = tl.load(a_rows + kb[None, :]).to(tl.int32)
        b = tl.load(b_vec + kb).to(tl.int32)
        sa = tl.load(sfa_rows + ks[None, :]).to(tl.float32)
        sb = tl.load(sfb_vec + ks).to(tl.float32)
        prod = _fp4_to_f32(a & 15) * _fp4_to_f32(b & 15)[None, :] + _fp4_to_f32(a >> 4) * _fp4_to_f32(b >> 4)[None, :]
        per_block = tl.sum(tl.reshape(prod, [BLOCK_M, BLOCK_K // 16, 8]), axis=2)
        acc += tl.sum(per_block * sa * sb[None, :], axis=1)
    tl.store(c_ptr + batch * M + rows, acc.to(tl.float16))


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    m, kh, l = a.shape
    k = kh * 2
    block_k = next(bk for bk in (512, 256, 128, 64) if k % bk == 0)
    block_m = 16
    _gemv[(m // block_m, l)](
        a.view(torch.uint8), b.view(torch.uint8), sfa, sfb, c, m, k, b.shape[0],
        BLOCK_M=block_m, BLOCK_K=block_k, num_warps=4,
    )
    return c
