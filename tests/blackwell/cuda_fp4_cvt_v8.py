"""B200-style submission: raw CUDA through load_inline, built only for sm_100a (hard-coded gencode),
FP4 decoded by the hardware conversion cvt.rn.f16x2.e2m1x2, A and b read with 256-bit loads
(ld.global.nc.v8.b32). One warp per row, 64 elements per lane and step, fp32 sums per 16-element block
times both scales. On an older GPU: a one-line reason without --emulate-blackwell; with it the harness
builds it for that GPU with exact stand-ins for the conversion and the loads."""
import torch
from torch.utils.cpp_extension import load_inline

from task import input_t, output_t

CUDA_SRC = r"""
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ void load256(const uint8_t* p, uint32_t (&w)[8]) {
    asm volatile("ld.global.nc.v8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3]), "=r"(w[4]), "=r"(w[5]), "=r"(w[6]), "=r"(w[7])
                 : "l"(p));
}

__device__ __forceinline__ __half2 fp4x2(uint32_t byte) {
    uint32_t h;
    asm("{\n\t.reg .b8 q;\n\tcvt.u8.u32 q, %1;\n\tcvt.rn.f16x2.e2m1x2 %0, q;\n\t}" : "=r"(h) : "r"(byte));
    return *reinterpret_cast<__half2*>(&h);
}

__device__ __forceinline__ float e4m3(uint8_t s) {
    __half_raw raw = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)s, __NV_E4M3);
    return __half2float(__half(raw));
}

// block sum of 16 elements: two words of A and of b (8 FP4 codes each)
__device__ __forceinline__ float block_dot(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) {
    float sum = 0.f;
    uint32_t aw[2] = {a0, a1}, bw[2] = {b0, b1};
    #pragma unroll
    for (int w = 0; w < 2; ++w)
        #pragma unroll
        for (int i = 0; i < 4; ++i) {
            float2 x = __half22float2(fp4x2((aw[w] >> (8 * i)) & 0xff));
            float2 y = __half22float2(fp4x2((bw[w] >> (8 * i)) & 0xff));
            sum = fmaf(x.x, y.x, fmaf(x.y, y.y, sum));
        }
    return sum;
}

__global__ void gemv_kernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                            const uint8_t* __restrict__ sfa, const uint8_t* __restrict__ sfb,
                            __half* __restrict__ c, int m, int k) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, batch = blockIdx.y;
    if (row >= m) return;
    const size_t kb = k / 2, ks = k / 16;
    const uint8_t* arow = a + ((size_t)batch * m + row) * kb;
    const uint8_t* vec = b + (size_t)batch * 128 * kb;  // row 0 of b
    const uint8_t* sa = sfa + ((size_t)batch * m + row) * ks;
    const uint8_t* sb = sfb + (size_t)batch * 128 * ks;
    float acc = 0.f;
    for (size_t byte = (size_t)lane * 32; byte < kb; byte += 32 * 32) {  // 64 elements per lane and step
        uint32_t wa[8], wb[8];
        load256(arow + byte, wa);
        load256(vec + byte, wb);
        const uint32_t scales_a = *reinterpret_cast<const uint32_t*>(sa + byte / 8);
        const uint32_t scales_b = *reinterpret_cast<const uint32_t*>(sb + byte / 8);
        #pragma unroll
        for (int blk = 0; blk < 4; ++blk)
            acc += block_dot(wa[2 * blk], wa[2 * blk + 1], wb[2 * blk], wb[2 * blk + 1]) *
                   e4m3((scales_a >> (8 * blk)) & 0xff) * e4m3((scales_b >> (8 * blk)) & 0xff);
    }
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) c[(size_t)batch * m + row] = __float2half(acc);
}

void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c) {
    const int m = a.size(0), k = a.size(1) * 2, l = a.size(2);
    dim3 grid((m + 3) / 4, l);
    gemv_kernel<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        (const uint8_t*)a.data_ptr(), (const uint8_t*)b.data_ptr(), (const uint8_t*)sfa.data_ptr(),
        (const uint8_t*)sfb.data_ptr(), (__half*)c.data_ptr(), m, k);
}
"""

CPP_SRC = "void gemv(torch::Tensor a, torch::Tensor b, torch::Tensor sfa, torch::Tensor sfb, torch::Tensor c);"

_module = None


def _ext():
    global _module
    if _module is None:
        _module = load_inline(name="b200_style_fp4_cvt_v8", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                              functions=["gemv"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_100a,code=sm_100a"])
    return _module


def custom_kernel(data: input_t) -> output_t:
    a, b, sfa, sfb, _, _, c = data
    _ext().gemv(a, b, sfa, sfb, c)
    return c
