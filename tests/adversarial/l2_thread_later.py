"""Timing attack (GPU, #40): honest v5, plus a native thread (no GIL) that it starts when called and
that queues the copies warming L2 with A and its scales (as in l2_side_copy.py) only later, from the
host, at a delay drawn from a sweep (each call the next): some land during the wait, some during
the L2 flush, some after the start event. It aims at the end of the flush, which comes last before
the start event since #40: whatever the copies put in L2 then still shares the GPU with the flush.
Judged with benchmark against v5 (manifest: expect no-faster)."""
import importlib.util
import pathlib

import torch
from torch.utils.cpp_extension import load_inline

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

CPP = r"""
#include <torch/extension.h>
#include <dlfcn.h>
#include <time.h>
#include <thread>
#include <vector>
typedef int (*memcpy_async_t)(void*, const void*, size_t, int, void*);
typedef int (*stream_create_t)(void**, unsigned);
static memcpy_async_t copy_async = nullptr;
static void* side = nullptr;

static long long now_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

bool setup() {
  void* rt = nullptr;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
    if (!rt) rt = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
  void* any = rt ? rt : RTLD_DEFAULT;
  copy_async = (memcpy_async_t)dlsym(any, "cudaMemcpyAsync");
  auto create = (stream_create_t)dlsym(any, "cudaStreamCreateWithFlags");
  if (!copy_async || !create) return false;
  return create(&side, 1) == 0;  // cudaStreamNonBlocking
}

// A thread that waits delay_ns from now, then copies each (src, bytes) through ring on its stream.
void later(std::vector<int64_t> srcs, std::vector<int64_t> sizes, int64_t ring, int64_t ring_bytes, int64_t delay_ns) {
  long long t0 = now_ns();
  std::thread([=] {
    while (now_ns() - t0 < delay_ns) {}
    for (size_t i = 0; i < srcs.size(); i++)
      for (int64_t off = 0; off < sizes[i]; off += ring_bytes) {
        int64_t n = std::min(ring_bytes, sizes[i] - off);
        copy_async((void*)ring, (const void*)(srcs[i] + off), (size_t)n, 3, side);  // device to device
      }
  }).detach();
}
"""
_ext = load_inline("l2_thread_later_ext", cpp_sources=CPP, functions=["setup", "later"], verbose=False)
assert _ext.setup(), "no CUDA runtime to launch from"
RING = 4 << 20
DELAYS_US = [0, 300, 440, 480, 500, 520, 540, 560, 580, 600, 620, 640, 660, 700]
_state = {"call": 0}


def custom_kernel(data):
    a, sfa = data[0], data[2]
    if "ring" not in _state:
        _state["ring"] = torch.empty(RING, dtype=torch.uint8, device=a.device)
    delay = DELAYS_US[_state["call"] % len(DELAYS_US)]
    _state["call"] += 1
    srcs = [sfa.untyped_storage().data_ptr(), a.untyped_storage().data_ptr()]
    sizes = [sfa.untyped_storage().nbytes(), a.untyped_storage().nbytes()]
    _ext.later(srcs, sizes, _state["ring"].data_ptr(), RING, int(delay * 1e3))
    return _honest.custom_kernel(data)
