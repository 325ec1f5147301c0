"""B200-style submission written the way the contest's CUTLASS users wrote theirs: load_inline with
verbose=True, `-gencode` sm_100a, and CUTLASS/CuTe C++ headers taken from the default include path
(the leaderboard's B200 image had CUTLASS installed; no -I here). A decoded with the sm_100-only
FP4 cvt to f16x2 in inline PTX, the vector b with CUTLASS's own NumericArrayConverter on
cutlass::float_e2m1_t (the same cvt for sm_100a, CUTLASS's software path for older targets), the
e4m3 scales as cutlass::float_e4m3_t, A's rows viewed as a CuTe tensor. One warp per row.
Here: needs CUTLASS's headers (.ci/stage-cutlass.sh; every worker then has them on its include
path); without --emulate-blackwell on Hopper a one-line reason, with it the cvt is rewritten."""
import torch
from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

KERNELS = r"""
#include <cuda_fp16.h>
#include <stdint.h>

#include <cutlass/numeric_types.h>
#include <cutlass/numeric_conversion.h>
#include <cute/tensor.hpp>

using Fp4x8 = cutlass::Array<cutlass::float_e2m1_t, 8>;

// eight FP4 codes (a 32-bit word, low nibble first) -> four half2, with the sm_100 cvt
__device__ __forceinline__ void decode_fp4x8(uint32_t w, __half2 (&h)[4]) {
    uint32_t r[4];
    asm("{\n\t.reg .b8 q0, q1, q2, q3;\n\tmov.b32 {q0, q1, q2, q3}, %4;\n\t"
        "cvt.rn.f16x2.e2m1x2 %0, q0;\n\tcvt.rn.f16x2.e2m1x2 %1, q1;\n\t"
        "cvt.rn.f16x2.e2m1x2 %2, q2;\n\tcvt.rn.f16x2.e2m1x2 %3, q3;\n\t}"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(w));
    #pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = *reinterpret_cast<__half2*>(&r[i]);
}

__device__ __forceinline__ float scale_e4m3(uint8_t s) {
    return float(cutlass::float_e4m3_t::bitcast(s));
}

__global__ void gemv_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                            const uint8_t* __restrict__ sfa, const uint8_t* __restrict__ sfb,
                            __half* __restrict__ c, int m, int k) {
    using namespace cute;
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), batch = blockIdx.y;
    if (row >= m) return;
    const int kb = k / 2, ks = k / 16;  // bytes per row; 16-element blocks per row (8 bytes, one scale each)
    // A of this batch as (row, block) of 8-byte words, row-major
    Tensor a_blocks = make_tensor(make_gmem_ptr(reinterpret_cast<const uint64_t*>(a + (size_t)batch * m * kb)),
                                  make_layout(make_shape(m, ks), LayoutRight{}));
    const uint64_t* vec = reinterpret_cast<const uint64_t*>(b + (size_t)batch * 128 * kb);
    const uint8_t* sa = sfa + ((size_t)batch * m + row) * ks;
    const uint8_t* sb = sfb + (size_t)batch * 128 * ks;
    cutlass::NumericArrayConverter<float, cutlass::float_e2m1_t, 8> to_float;
    float acc = 0.f;
    for (int blk = lane; blk < ks; blk += 32) {
        const uint64_t wa = a_blocks(row, blk), wb = vec[blk];
        float part = 0.f;
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            __half2 ha[4];
            decode_fp4x8(static_cast<uint32_t>(wa >> (32 * h)), ha);
            const uint32_t word = static_cast<uint32_t>(wb >> (32 * h));
            const cutlass::Array<float, 8> fb = to_float(reinterpret_cast<const Fp4x8&>(word));
            #pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 fa = __half22float2(ha[i]);
                part = fmaf(fa.x, fb[2 * i], part);
                part = fmaf(fa.y, fb[2 * i + 1], part);
            }
        }
        acc = fmaf(part, scale_e4m3(sa[blk]) * scale_e4m3(sb[blk]), acc);
    }
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) c[(size_t)batch * m + row] = __float2half_rn(acc);
}
"""

HOST = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c) {
    const int m = a.size(0), k = a.size(1) * 2, l = a.size(2);
    TORCH_CHECK(k % 16 == 0, "k must be a multiple of 16");
    gemv_kernel<<<dim3((m + 3) / 4, l), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        (const uint8_t*)a.data_ptr(), (const uint8_t*)b.data_ptr(), (const uint8_t*)sfa.data_ptr(),
        (const uint8_t*)sfb.data_ptr(), (__half*)c.data_ptr(), m, k);
}
"""

module = load_inline(
    name="b200_cutlass_headers_fp4_cvt",
    cpp_sources="void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c);",
    cuda_sources=KERNELS + HOST,
    functions=["gemv"],
    verbose=True,
    extra_cuda_cflags=["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_100a,code=sm_100a"],
)


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    module.gemv(a, b, sfa, sfb, c)
    return c
