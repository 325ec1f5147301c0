"""Which read pattern reaches the floor? Loads-only CUDA kernels (16-byte loads, XOR-reduced, no
decode) over case-sized buffers, timed like the harness (L2 flushed, median of per-call runs).
  chunked U    one block per U x 2 KiB contiguous (128 threads, U loads each, all issued up front)
  warp_seg D   persistent: each warp one contiguous segment, D loads in flight (v5's stream kernel)
  cta_seg D    persistent: each block one contiguous segment, its warps interleaved 512 B apart
  sweep D      persistent: warp w reads steps w, w + NW, ... (the whole grid sweeps in order)
  rows D       one block per 8 rows, 2 rows per warp, D steps per row in flight (v5's row kernel)
Run from the repo root on a GPU: python docs/experiments/read_patterns.py
"""
import statistics
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]  # the repo, and probe_timing beside this file
import probe_timing as timing  # noqa: E402
from eval.baselines import READ_CONFIGS  # noqa: E402
from eval.worker import baselines  # noqa: E402

SRC = r"""
#include <stdint.h>
__device__ __forceinline__ uint4 ld(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }
__device__ __forceinline__ void sink(uint32_t x, uint32_t* out) { if (x == 0x12345678u) out[0] = x; }

template <int U> __global__ void __launch_bounds__(128) chunked(const uint4* src, long long n16, uint32_t* out) {
    const long long base = (long long)blockIdx.x * 128 * U + threadIdx.x;
    uint4 v[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) v[u] = base + u * 128 < n16 ? ld(src + base + u * 128) : make_uint4(0, 0, 0, 0);
    uint32_t x = 0;
    #pragma unroll
    for (int u = 0; u < U; ++u) x ^= fold(v[u]);
    sink(x, out);
}

// step = 32 x 16 bytes; MODE 0: warp segments, 1: block segments with warps interleaved, 2: global sweep
template <int D, int MODE> __global__ void __launch_bounds__(128) persistent(const uint4* src, long long steps, uint32_t* out) {
    const int lane = threadIdx.x % 32, wib = threadIdx.x / 32;
    const long long NW = (long long)gridDim.x * 4, w = (long long)blockIdx.x * 4 + wib;
    long long first, count, stride;
    if (MODE == 0) { first = w * steps / NW; count = (w + 1) * steps / NW - first; stride = 1; }
    else if (MODE == 1) {
        const long long b0 = (long long)blockIdx.x * steps / gridDim.x, b1 = (long long)(blockIdx.x + 1) * steps / gridDim.x;
        first = b0 + wib; count = b1 > first ? (b1 - first + 3) / 4 : 0; stride = 4;
    } else { first = w; count = steps > w ? (steps - w + NW - 1) / NW : 0; stride = NW; }
    const uint4* p = src + first * 32 + lane;
    const long long step = stride * 32;
    uint4 ring[D];
    #pragma unroll
    for (int i = 0; i < D; ++i) if (i < count) ring[i] = ld(p + i * step);
    uint32_t x = 0;
    for (long long b = 0; b < count; b += D) {
        #pragma unroll
        for (int i = 0; i < D; ++i) if (b + i < count) {
            x ^= fold(ring[i]);
            if (b + i + D < count) ring[i] = ld(p + (b + i + D) * step);
        }
    }
    sink(x, out);
}

template <int D> __global__ void __launch_bounds__(128) rows(const uint4* src, int row16, uint32_t* out) {
    const int lane = threadIdx.x % 32, wib = threadIdx.x / 32;
    const long long row0 = ((long long)blockIdx.x * 4 + wib) * 2;
    const uint4* p0 = src + row0 * row16 + lane;
    const uint4* p1 = p0 + row16;
    const int count = row16 / 32;
    uint4 r0[D], r1[D];
    #pragma unroll
    for (int i = 0; i < D; ++i) if (i < count) { r0[i] = ld(p0 + i * 32); r1[i] = ld(p1 + i * 32); }
    uint32_t x = 0;
    for (int b = 0; b < count; b += D) {
        #pragma unroll
        for (int i = 0; i < D; ++i) if (b + i < count) {
            x ^= fold(r0[i]) ^ fold(r1[i]);
            if (b + i + D < count) { r0[i] = ld(p0 + (b + i + D) * 32); r1[i] = ld(p1 + (b + i + D) * 32); }
        }
    }
    sink(x, out);
}

#define DEF_CHUNKED(U) void chunked_##U(long long src, long long n16, long long out) { \
    chunked<U><<<(unsigned)((n16 + 128 * U - 1) / (128 * U)), 128>>>((const uint4*)src, n16, (uint32_t*)out); }
DEF_CHUNKED(4) DEF_CHUNKED(8) DEF_CHUNKED(16)
#define DEF_P(D, MODE, NAME) int NAME##_##D(long long src, long long steps, long long out, int per_sm, int sms) { \
    int fit = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, persistent<D, MODE>, 128, 0); \
    const int g = sms * (per_sm && per_sm < fit ? per_sm : fit); \
    persistent<D, MODE><<<g, 128>>>((const uint4*)src, steps, (uint32_t*)out); return g; }
DEF_P(4, 0, warp_seg) DEF_P(8, 0, warp_seg) DEF_P(4, 1, cta_seg) DEF_P(8, 1, cta_seg) DEF_P(4, 2, sweep) DEF_P(8, 2, sweep)
#define DEF_ROWS(D) void rows_##D(long long src, long long n_rows, int row16, long long out) { \
    rows<D><<<(unsigned)(n_rows / 8), 128>>>((const uint4*)src, row16, (uint32_t*)out); }
DEF_ROWS(2) DEF_ROWS(4)
"""
CPP = """
void chunked_4(long long, long long, long long); void chunked_8(long long, long long, long long);
void chunked_16(long long, long long, long long);
int warp_seg_4(long long, long long, long long, int, int); int warp_seg_8(long long, long long, long long, int, int);
int cta_seg_4(long long, long long, long long, int, int); int cta_seg_8(long long, long long, long long, int, int);
int sweep_4(long long, long long, long long, int, int); int sweep_8(long long, long long, long long, int, int);
void rows_2(long long, long long, int, long long); void rows_4(long long, long long, int, long long);
"""
FUNCS = ["chunked_4", "chunked_8", "chunked_16", "warp_seg_4", "warp_seg_8", "cta_seg_4", "cta_seg_8",
         "sweep_4", "sweep_8", "rows_2", "rows_4"]
CASES = [("7168x16384x1 A", 7168, 8192), ("4096x7168x8 A", 4096 * 8, 3584), ("7168x2048x4 A", 7168 * 4, 1024)]


def main():
    mod = load_inline("read_patterns", CPP, cuda_sources=SRC, functions=FUNCS,
                      extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"], verbose=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flusher = timing.L2Flusher()
    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    for label, n_rows, row_bytes in CASES:
        n = n_rows * row_bytes
        src = torch.randint(-(2**31), 2**31 - 1, (n // 4,), dtype=torch.int32, device="cuda")
        ptr, n16, steps = src.data_ptr(), n // 16, n // 512
        runs = {"triton floor": None}
        for u in (4, 8, 16):
            runs[f"chunked {u}"] = lambda u=u: getattr(mod, f"chunked_{u}")(ptr, n16, out.data_ptr())
        for name in ("warp_seg", "cta_seg", "sweep"):
            for d in (4, 8):
                for per_sm in (0, 4, 8):
                    runs[f"{name} {d} x{per_sm or 'max'}"] = lambda f=getattr(mod, f"{name}_{d}"), p=per_sm: f(ptr, steps, out.data_ptr(), p, sms)
        for d in (2, 4):
            runs[f"rows {d}"] = lambda f=getattr(mod, f"rows_{d}"): f(ptr, n_rows, row_bytes // 16, out.data_ptr())
        floor = min(statistics.median(timing.event_samples(baselines.streaming_read(n, list(cfg))[0], flusher, 60))
                    for cfg in READ_CONFIGS) / 1e3
        print(f"== {label}: {n / 1e6:.1f} MB, triton floor {floor:.2f} µs", flush=True)
        for name, fn in runs.items():
            if fn is None:
                continue
            med = statistics.median(timing.event_samples(fn, flusher, 60)) / 1e3
            print(f"   {name:<18} {med:7.2f} µs  {med / floor:5.2f}x  {n / med / 1e6:5.2f} TB/s", flush=True)


if __name__ == "__main__":
    main()
