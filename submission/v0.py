"""v0: the leaderboard's CuTe DSL reference kernel, made to run on Hopper.

Same structure as the leaderboard's template_cute.py: one thread per output row, 128-row tiles,
K in tiles of 64, FP32 FFMA per element, scales read through the permuted MMA layout
(blockscaled_utils.tile_atom_to_shape_SF). What it adds: FP4 decode chosen by the compile target.
On sm_100+ the template's Float4E2M1FN -> Float32 conversion (hardware cvt.rn.f16x2.e2m1x2); below
sm_100, which has no such instruction, each code is decoded in software: its bits are placed into an
fp16 bit pattern (value * 2^-14, exact, subnormal code included) and the 2^14 is folded into the scales.
Measured: see docs/perf-notes.md (CuTe DSL path).
"""
import torch

import cutlass
import cutlass.cute as cute
import cutlass.utils.blockscaled_layout as blockscaled_utils
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_ptr
from cutlass.cutlass_dsl import T, dsl_user_op

from task import input_t, output_t

mma_tiler_mnk = (128, 1, 64)
ab_dtype = cutlass.Float4E2M1FN
sf_dtype = cutlass.Float8E4M3FN
c_dtype = cutlass.Float16
sf_vec_size = 16
threads_per_cta = 128
FOLD = 16384.0  # the software decode yields value * 2^-14


@dsl_user_op
def fp4_code_to_f32(code: cutlass.Int32, *, loc=None, ip=None) -> cutlass.Float32:
    """e2m1 code (low 4 bits of `code`) -> value * 2^-14 as float32: s e1 e0 m -> fp16 bits s..e1 e0 m<<9."""
    return cutlass.Float32(
        llvm.inline_asm(
            T.f32(),
            [cutlass.Int32(code).ir_value(loc=loc, ip=ip)],
            "{\n\t.reg .b32 m, s;\n\t.reg .b16 h;\n\t"
            "and.b32 m, $1, 7;\n\tshl.b32 m, m, 9;\n\t"
            "and.b32 s, $1, 8;\n\tshl.b32 s, s, 12;\n\t"
            "or.b32 m, m, s;\n\tcvt.u16.u32 h, m;\n\tcvt.f32.f16 $0, h;\n\t}",
            "=f,r",
            has_side_effects=False,
            is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT,
        )
    )


@cute.kernel
def kernel(
    mA_mkl: cute.Tensor,
    mA32_mkl: cute.Tensor,
    mB_nkl: cute.Tensor,
    mB32_nkl: cute.Tensor,
    mSFA_mkl: cute.Tensor,
    mSFB_nkl: cute.Tensor,
    mC_mnl: cute.Tensor,
    hw_cvt: cutlass.Constexpr,
):
    bidx, bidy, bidz = cute.arch.block_idx()
    tidx, _, _ = cute.arch.thread_idx()

    gSFA_mkl = cute.local_tile(mSFA_mkl, cute.slice_(mma_tiler_mnk, (None, 0, None)), (None, None, None))
    gSFB_nkl = cute.local_tile(mSFB_nkl, cute.slice_(mma_tiler_mnk, (0, None, None)), (None, None, None))
    gC_mnl = cute.local_tile(mC_mnl, cute.slice_(mma_tiler_mnk, (None, None, 0)), (None, None, None))
    # packed words: a K tile of 64 codes is 8 words of 8 codes
    word_tiler = (mma_tiler_mnk[0], 1, mma_tiler_mnk[2] // 8)
    gA32_mkl = cute.local_tile(mA32_mkl, cute.slice_(word_tiler, (None, 0, None)), (None, None, None))
    gB32_nkl = cute.local_tile(mB32_nkl, cute.slice_(word_tiler, (0, None, None)), (None, None, None))
    gA_mkl = cute.local_tile(mA_mkl, cute.slice_(mma_tiler_mnk, (None, 0, None)), (None, None, None))
    gB_nkl = cute.local_tile(mB_nkl, cute.slice_(mma_tiler_mnk, (0, None, None)), (None, None, None))

    tCgC = gC_mnl[tidx, None, bidx, bidy, bidz]
    tCgC = cute.make_tensor(tCgC.iterator, 1)
    res = cute.zeros_like(tCgC, cutlass.Float32)

    k_tile_cnt = gSFA_mkl.layout[3].shape
    for k_tile in range(k_tile_cnt):
        tAgSFA = gSFA_mkl[tidx, None, bidx, k_tile, bidz]
        tBgSFB = gSFB_nkl[0, None, bidy, k_tile, bidz]
        tArSFA = cute.make_rmem_tensor_like(tAgSFA, cutlass.Float32)
        tBrSFB = cute.make_rmem_tensor_like(tBgSFB, cutlass.Float32)
        tArSFA.store(tAgSFA.load().to(cutlass.Float32))
        tBrSFB.store(tBgSFB.load().to(cutlass.Float32))
        if cutlass.const_expr(hw_cvt):
            tAgA = gA_mkl[tidx, None, bidx, k_tile, bidz]
            tBgB = gB_nkl[0, None, bidy, k_tile, bidz]
            tArA = cute.make_rmem_tensor_like(tAgA, cutlass.Float32)
            tBrB = cute.make_rmem_tensor_like(tBgB, cutlass.Float32)
            tArA.store(tAgA.load().to(cutlass.Float32))
            tBrB.store(tBgB.load().to(cutlass.Float32))
            for i in cutlass.range_constexpr(mma_tiler_mnk[2]):
                res += tArA[i] * tArSFA[i] * tBrB[i] * tBrSFB[i]
        else:
            tAgA32 = gA32_mkl[tidx, None, bidx, k_tile, bidz]
            tBgB32 = gB32_nkl[0, None, bidy, k_tile, bidz]
            tArA32 = cute.make_rmem_tensor_like(tAgA32, cutlass.Int32)
            tBrB32 = cute.make_rmem_tensor_like(tBgB32, cutlass.Int32)
            tArA32.store(tAgA32.load())
            tBrB32.store(tBgB32.load())
            for i in cutlass.range_constexpr(mma_tiler_mnk[2]):
                word, nib = i // 8, i % 8
                a_val = fp4_code_to_f32(tArA32[word] >> (4 * nib))
                b_val = fp4_code_to_f32(tBrB32[word] >> (4 * nib))
                # each decoded value carries 2^-14: fold 2^28 into the scale product
                res += a_val * b_val * (tArSFA[i] * tBrSFB[i] * (FOLD * FOLD))

    tCgC.store(res.to(cutlass.Float16))


@cute.jit
def my_kernel(
    a_ptr: cute.Pointer,
    a32_ptr: cute.Pointer,
    b_ptr: cute.Pointer,
    b32_ptr: cute.Pointer,
    sfa_ptr: cute.Pointer,
    sfb_ptr: cute.Pointer,
    c_ptr: cute.Pointer,
    problem_size: tuple,
    hw_cvt: cutlass.Constexpr,
):
    m, _, k, l = problem_size
    a_tensor = cute.make_tensor(
        a_ptr, cute.make_layout((m, cute.assume(k, 32), l), stride=(cute.assume(k, 32), 1, cute.assume(m * k, 32)))
    )
    n_padded_128 = 128  # b and sfb are padded to 128 rows (row 0 is the vector)
    b_tensor = cute.make_tensor(
        b_ptr,
        cute.make_layout((n_padded_128, cute.assume(k, 32), l),
                         stride=(cute.assume(k, 32), 1, cute.assume(n_padded_128 * k, 32))),
    )
    # the same bytes as 32-bit words of 8 codes
    kw = k // 8
    a32_tensor = cute.make_tensor(a32_ptr, cute.make_layout((m, kw, l), stride=(kw, 1, m * kw)))
    b32_tensor = cute.make_tensor(b32_ptr, cute.make_layout((n_padded_128, kw, l), stride=(kw, 1, n_padded_128 * kw)))
    c_tensor = cute.make_tensor(c_ptr, cute.make_layout((cute.assume(m, 32), 1, l), stride=(1, 1, m)))
    sfa_tensor = cute.make_tensor(sfa_ptr, blockscaled_utils.tile_atom_to_shape_SF(a_tensor.shape, sf_vec_size))
    sfb_tensor = cute.make_tensor(sfb_ptr, blockscaled_utils.tile_atom_to_shape_SF(b_tensor.shape, sf_vec_size))
    grid = (cute.ceil_div(c_tensor.shape[0], 128), 1, c_tensor.shape[2])
    kernel(a_tensor, a32_tensor, b_tensor, b32_tensor, sfa_tensor, sfb_tensor, c_tensor, hw_cvt).launch(
        grid=grid, block=[threads_per_cta, 1, 1], cluster=(1, 1, 1)
    )


_compiled = {}


def hardware_fp4() -> bool:
    """sm_100 and newer convert e2m1 in hardware; everything older decodes in software."""
    return torch.cuda.get_device_capability()[0] >= 10


def compile_kernel(hw_cvt: bool):
    """Compile once per decode path and cache (never inside a timed region: the first call compiles)."""
    if hw_cvt not in _compiled:
        ptrs = [make_ptr(ab_dtype, 0, cute.AddressSpace.gmem, assumed_align=16),
                make_ptr(cutlass.Int32, 0, cute.AddressSpace.gmem, assumed_align=16),
                make_ptr(ab_dtype, 0, cute.AddressSpace.gmem, assumed_align=16),
                make_ptr(cutlass.Int32, 0, cute.AddressSpace.gmem, assumed_align=16),
                make_ptr(sf_dtype, 0, cute.AddressSpace.gmem, assumed_align=32),
                make_ptr(sf_dtype, 0, cute.AddressSpace.gmem, assumed_align=32),
                make_ptr(c_dtype, 0, cute.AddressSpace.gmem, assumed_align=16)]
        _compiled[hw_cvt] = cute.compile(my_kernel, *ptrs, (0, 0, 0, 0), hw_cvt)
    return _compiled[hw_cvt]


def custom_kernel(data: input_t) -> output_t:
    a, b, _, _, sfa_permuted, sfb_permuted, c = data
    hw_cvt = hardware_fp4()
    compiled = compile_kernel(hw_cvt)
    m, k, l = a.shape
    k = k * 2
    gmem = cute.AddressSpace.gmem
    compiled(
        make_ptr(ab_dtype, a.data_ptr(), gmem, assumed_align=16),
        make_ptr(cutlass.Int32, a.data_ptr(), gmem, assumed_align=16),
        make_ptr(ab_dtype, b.data_ptr(), gmem, assumed_align=16),
        make_ptr(cutlass.Int32, b.data_ptr(), gmem, assumed_align=16),
        make_ptr(sf_dtype, sfa_permuted.data_ptr(), gmem, assumed_align=32),
        make_ptr(sf_dtype, sfb_permuted.data_ptr(), gmem, assumed_align=32),
        make_ptr(c_dtype, c.data_ptr(), gmem, assumed_align=16),
        (m, 1, k, l),
    )
    return c
