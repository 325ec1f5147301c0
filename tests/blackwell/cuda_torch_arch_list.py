"""B200-style submission: the target chosen the way many contestants choose it, by setting
TORCH_CUDA_ARCH_LIST="10.0a" in os.environ before load_inline, with no target flag of its own (torch
turns the list into -gencode=arch=compute_100a,code=sm_100a). FP4 decoded by cvt.rn.f16x2.e2m1x2,
the e4m3 scales by cvt.rn.f16x2.e4m3x2 (two at a time; that one exists since sm_89), products
summed in fp32. One warp per row, four 16-element blocks per lane and step (16-byte loads).
Without --emulate-blackwell on Hopper: a one-line reason; with it: torch's flag retargeted to this
GPU, the FP4 cvt rewritten."""
import os

os.environ["TORCH_CUDA_ARCH_LIST"] = "10.0a"

import torch  # noqa: E402
from torch.utils.cpp_extension import load_inline  # noqa: E402

from task import input_t, output_t  # noqa: E402

KERNELS = r"""
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float2 fp4x2(uint32_t byte) {
    uint32_t h;
    asm("{\n\t.reg .b8 q;\n\tcvt.u8.u32 q, %1;\n\tcvt.rn.f16x2.e2m1x2 %0, q;\n\t}" : "=r"(h) : "r"(byte & 0xff));
    return __half22float2(*reinterpret_cast<__half2*>(&h));
}

__device__ __forceinline__ float2 e4m3x2(uint32_t two) {
    uint32_t h;
    asm("{\n\t.reg .b16 s;\n\tcvt.u16.u32 s, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, s;\n\t}" : "=r"(h) : "r"(two & 0xffff));
    return __half22float2(*reinterpret_cast<__half2*>(&h));
}

__device__ __forceinline__ float dot16(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) {
    float sum = 0.f;
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint32_t x = (i < 4 ? a0 : a1) >> (8 * (i & 3)), y = (i < 4 ? b0 : b1) >> (8 * (i & 3));
        const float2 fa = fp4x2(x), fb = fp4x2(y);
        sum = fmaf(fa.x, fb.x, sum);
        sum = fmaf(fa.y, fb.y, sum);
    }
    return sum;
}

__global__ void gemv_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                            const uint8_t* __restrict__ sfa, const uint8_t* __restrict__ sfb,
                            __half* __restrict__ c, int m, int k) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), batch = blockIdx.y;
    if (row >= m) return;
    const int kb = k / 2, ks = k / 16;
    const uint4* arow = reinterpret_cast<const uint4*>(a + ((size_t)batch * m + row) * kb);
    const uint4* vec = reinterpret_cast<const uint4*>(b + (size_t)batch * 128 * kb);
    const uint32_t* sa = reinterpret_cast<const uint32_t*>(sfa + ((size_t)batch * m + row) * ks);
    const uint32_t* sb = reinterpret_cast<const uint32_t*>(sfb + (size_t)batch * 128 * ks);
    float acc = 0.f;
    for (int g = lane; g < ks / 4; g += 32) {  // blocks 4g .. 4g+3: 32 bytes of a, of b
        const uint4 a_lo = __ldg(arow + 2 * g), a_hi = __ldg(arow + 2 * g + 1);
        const uint4 b_lo = __ldg(vec + 2 * g), b_hi = __ldg(vec + 2 * g + 1);
        const uint32_t s_a = __ldg(sa + g), s_b = __ldg(sb + g);
        const float2 sa01 = e4m3x2(s_a), sa23 = e4m3x2(s_a >> 16), sb01 = e4m3x2(s_b), sb23 = e4m3x2(s_b >> 16);
        acc = fmaf(dot16(a_lo.x, a_lo.y, b_lo.x, b_lo.y), sa01.x * sb01.x, acc);
        acc = fmaf(dot16(a_lo.z, a_lo.w, b_lo.z, b_lo.w), sa01.y * sb01.y, acc);
        acc = fmaf(dot16(a_hi.x, a_hi.y, b_hi.x, b_hi.y), sa23.x * sb23.x, acc);
        acc = fmaf(dot16(a_hi.z, a_hi.w, b_hi.z, b_hi.w), sa23.y * sb23.y, acc);
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
    TORCH_CHECK(k % 64 == 0, "k must be a multiple of 64");
    gemv_kernel<<<dim3((m + 3) / 4, l), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        (const uint8_t*)a.data_ptr(), (const uint8_t*)b.data_ptr(), (const uint8_t*)sfa.data_ptr(),
        (const uint8_t*)sfb.data_ptr(), (__half*)c.data_ptr(), m, k);
}
"""

module = load_inline(
    name="b200_torch_arch_list",
    cpp_sources="void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c);",
    cuda_sources=KERNELS + HOST,
    functions=["gemv"],
    extra_cuda_cflags=["-O3"],
)


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    module.gemv(a, b, sfa, sfb, c)
    return c
