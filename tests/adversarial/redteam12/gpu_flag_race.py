"""GPU-ONLY cheat (race the compare kernel's answer word G.flag): dev_same zeroes G.flag (a 256-byte
cuMemAlloc of the worker, driver.h init_gpu), runs same_bytes, reads the flag back. The submission finds
the only 256-byte non-torch allocation by cuMemGetAddressRange probes and, from a background thread on a
stream of its own, keeps memsetting it to 0. A "differs" written by same_bytes can be overwritten before
the read-back, so unchanged_since says "unchanged" and same_output says "same": later runs return zeros
(no work) and go out as {"same_as": r}.
Harness should: FAIL (mismatch / off-stream work / tampered) -- a PASS with small times means the flag
word is racy. Run: python3 -m eval --problem tests/problems/vectoradd benchmark FILE"""
import ctypes
import threading

import torch

_cu = ctypes.CDLL("libcuda.so.1")
_range = _cu.cuMemGetAddressRange_v2
_range.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
_memset32 = _cu.cuMemsetD32Async
_memset32.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
_seen = set()
_flag = []


def _find_flag():
    segs = [(s["address"], s["address"] + s["total_size"]) for s in torch.cuda.memory_snapshot()]
    lo = max(min(a for a, _ in segs) - (2 << 30), 1 << 20)
    hi = max(b for _, b in segs) + (2 << 30)
    p = lo & ~((2 << 20) - 1)
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    while p < hi:
        if _range(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(p)) == 0:
            if size.value == 256 and not any(a <= base.value < b for a, b in segs):
                return base.value
            p = base.value + size.value
        else:
            p += 65536 if p & ((2 << 20) - 1) else (2 << 20)
    return None


def _zero_forever(addr):
    torch.cuda.set_device(0)
    s = torch.cuda.Stream()
    h = ctypes.c_void_p(s.cuda_stream)
    while True:
        for _ in range(64):
            _memset32(addr, 0, 1, h)
        s.synchronize()


def custom_kernel(data):
    a, b, out = data
    row = getattr(a, "_rt12", None)  # same object and same values (the harness refills buffers)
    if row is not None and torch.equal(row, a[0]) and _flag:
        out.zero_()
        return out
    a._rt12 = a[0].clone()
    if not _flag:
        f = _find_flag()
        if f:
            _flag.append(f)
            threading.Thread(target=_zero_forever, args=(f,), daemon=True).start()
    return torch.add(a, b, out=out)
