"""B200-style submission: CUDA through load_inline with the two-argument target flag
(`-arch`, `sm_100a`), doing its fp32 math on packed pairs: fma.rn.f32x2 accumulates two products per
instruction (the pair of FP4 codes of one byte, decoded by cvt.rn.f16x2.e2m1x2 and widened to f32),
mul.rn.f32x2 applies both scale products of two blocks at once, add.rn.f32x2 sums them. One warp per
row, two 16-element blocks per lane and step. Without --emulate-blackwell on Hopper: a one-line
reason; with it: built for this GPU, the packed ops rewritten per half (they are element-wise)."""
import torch
from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

KERNELS = r"""
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

typedef unsigned long long f32x2;  // two f32 in one 64-bit register, low half first

__device__ __forceinline__ f32x2 pack(float lo, float hi) {
    f32x2 r;
    asm("mov.b64 %0, {%1, %2};" : "=l"(r) : "f"(lo), "f"(hi));
    return r;
}

__device__ __forceinline__ float2 unpack(f32x2 v) {
    float2 r;
    asm("mov.b64 {%0, %1}, %2;" : "=f"(r.x), "=f"(r.y) : "l"(v));
    return r;
}

__device__ __forceinline__ f32x2 fp4x2_as_f32x2(uint32_t byte) {
    uint32_t h;
    asm("{\n\t.reg .b8 q;\n\tcvt.u8.u32 q, %1;\n\tcvt.rn.f16x2.e2m1x2 %0, q;\n\t}" : "=r"(h) : "r"(byte & 0xff));
    const float2 f = __half22float2(*reinterpret_cast<__half2*>(&h));
    return pack(f.x, f.y);
}

// sum over 16 elements, as a pair of partial sums (even, odd elements)
__device__ __forceinline__ f32x2 block16(uint2 a, uint2 b) {
    f32x2 acc = 0ull;  // +0.0f, +0.0f
    const uint32_t aw[2] = {a.x, a.y}, bw[2] = {b.x, b.y};
    #pragma unroll
    for (int w = 0; w < 2; ++w)
        #pragma unroll
        for (int i = 0; i < 4; ++i)
            asm("fma.rn.f32x2 %0, %1, %2, %0;" : "+l"(acc)
                : "l"(fp4x2_as_f32x2(aw[w] >> (8 * i))), "l"(fp4x2_as_f32x2(bw[w] >> (8 * i))));
    return acc;
}

__device__ __forceinline__ float e4m3(uint8_t s) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)s, __NV_E4M3)));
}

__global__ void gemv_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                            const uint8_t* __restrict__ sfa, const uint8_t* __restrict__ sfb,
                            __half* __restrict__ c, int m, int k) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), batch = blockIdx.y;
    if (row >= m) return;
    const int kb = k / 2, ks = k / 16;
    const uint4* arow = reinterpret_cast<const uint4*>(a + ((size_t)batch * m + row) * kb);
    const uint4* vec = reinterpret_cast<const uint4*>(b + (size_t)batch * 128 * kb);
    const uint8_t* sa = sfa + ((size_t)batch * m + row) * ks;
    const uint8_t* sb = sfb + (size_t)batch * 128 * ks;
    f32x2 acc = 0ull;
    for (int g = lane; g < ks / 2; g += 32) {  // blocks 2g and 2g+1: 16 bytes of a, of b
        const uint4 wa = __ldg(arow + g), wb = __ldg(vec + g);
        const float2 lo = unpack(block16(make_uint2(wa.x, wa.y), make_uint2(wb.x, wb.y)));
        const float2 hi = unpack(block16(make_uint2(wa.z, wa.w), make_uint2(wb.z, wb.w)));
        f32x2 sums, scales, scaled;
        asm("add.rn.f32x2 %0, %1, %2;" : "=l"(sums) : "l"(pack(lo.x, hi.x)), "l"(pack(lo.y, hi.y)));
        asm("mul.rn.f32x2 %0, %1, %2;" : "=l"(scales)
            : "l"(pack(e4m3(sa[2 * g]), e4m3(sa[2 * g + 1]))), "l"(pack(e4m3(sb[2 * g]), e4m3(sb[2 * g + 1]))));
        asm("mul.rn.f32x2 %0, %1, %2;" : "=l"(scaled) : "l"(sums), "l"(scales));
        asm("add.rn.f32x2 %0, %0, %1;" : "+l"(acc) : "l"(scaled));
    }
    const float2 pair = unpack(acc);
    float total = pair.x + pair.y;
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, off);
    if (lane == 0) c[(size_t)batch * m + row] = __float2half_rn(total);
}
"""

HOST = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c) {
    const int m = a.size(0), k = a.size(1) * 2, l = a.size(2);
    TORCH_CHECK(k % 32 == 0, "k must be a multiple of 32");
    gemv_kernel<<<dim3((m + 3) / 4, l), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        (const uint8_t*)a.data_ptr(), (const uint8_t*)b.data_ptr(), (const uint8_t*)sfa.data_ptr(),
        (const uint8_t*)sfb.data_ptr(), (__half*)c.data_ptr(), m, k);
}
"""

module = load_inline(
    name="b200_f32x2_packed",
    cpp_sources="void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c);",
    cuda_sources=KERNELS + HOST,
    functions=["gemv"],
    extra_cuda_cflags=["-O3", "-arch", "sm_100a"],
)


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    module.gemv(a, b, sfa, sfb, c)
    return c
