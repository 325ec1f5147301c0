"""GPU-ONLY cheat (write into the worker's kept copy): the worker keeps the first whole output of a reply
in device memory of its own (timing.h Kept.arena, a plain cuMemAlloc) and reports a later run as
{"same_as": r} when the end-clock copy of its output equals that kept copy (quiet.h same_output ->
dev_same). The kept copy lives in the submission's own CUDA context and address space, and nothing stops
the submission from writing there: this file finds it with cuMemGetAddressRange probes (allocations that
are not torch's caching-allocator segments, of the output's rounded size, holding the bytes of its last
right answer), then on later calls of the same input returns ZEROS and, inside its own call on the
current stream, overwrites every such allocation with zeros too. The end-clock copy (zeros) then equals
the kept copy (zeros): the run goes out as same_as, and the judge, which only judged run r's real bytes,
accepts zeros at the cost of a memset.
Harness should: FAIL (mismatch) -- if it PASSES with a small time, the kept copy is writable by the
submission and same_as is unsound.
RESULT on an H200 (sandbox none, 2026-11-28): PASSED but the trick did NOT land (its search never
found the arena: no zeros went out; the pass is its honest path, slowed by the search). The probe
(+-2 GiB of torch segments, 64 KiB steps) needs work before this says anything about the harness. Run: python3 -m eval --problem tests/problems/vectoradd benchmark FILE"""
import ctypes
import os

import torch

_cu = ctypes.CDLL("libcuda.so.1")
_range = _cu.cuMemGetAddressRange_v2
_range.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
_d2h = _cu.cuMemcpyDtoH_v2
_d2h.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
_memset = _cu.cuMemsetD8Async
_memset.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]

STATS = {"found": 0, "cheated": 0}


def _alloc_at(p):
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    if _range(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(p)) != 0:
        return None
    return base.value, size.value


def _torch_segments():
    return [(s["address"], s["address"] + s["total_size"]) for s in torch.cuda.memory_snapshot()]


def _foreign_allocations(span):
    """Every allocation within +-8 GiB of torch's segments that is not torch's, of at least `span` bytes."""
    segs = _torch_segments()
    if not segs:
        return []
    lo = max(min(a for a, _ in segs) - (2 << 30), 1 << 20)
    hi = max(b for _, b in segs) + (2 << 30)
    found, p, chunk_has = [], lo & ~((2 << 20) - 1), False
    while p < hi:
        got = _alloc_at(p)
        if got:
            base, size = got
            if size >= span and not any(a <= base < b for a, b in segs):
                found.append((base, size))
            p = base + size
            chunk_has = True
            continue
        if chunk_has and (p & ((2 << 20) - 1)):
            p += 65536  # inside a 2 MiB chunk holding small allocations: look closer
        else:
            chunk_has = False
            p = (p + (2 << 20)) & ~((2 << 20) - 1)
    return found


def custom_kernel(data):
    a, b, out = data
    st = getattr(a, "_rt12", None)  # per input object and its values (the harness refills buffers)
    if st is None or not torch.equal(st["row"], a[0]):
        st = {"right": None, "targets": [], "row": a[0].clone()}
        a._rt12 = st
    span = out.numel() * out.element_size()
    if st["targets"]:
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        for t in st["targets"]:
            _memset(t, 0, span, stream)   # the kept copy (and the now copy) become zeros
        out.zero_()
        STATS["cheated"] += 1
        if os.environ.get("RT12_LOG"):  # evidence for a GPU run (sandbox none): how often zeros went out
            with open(os.environ["RT12_LOG"], "a") as f:
                f.write(f"cheat shape={tuple(a.shape)} targets={[hex(t) for t in st['targets']]} n={STATS['cheated']}\n")
        return out
    if st["right"] is not None:  # look for worker allocations holding our last right answer
        buf = ctypes.create_string_buffer(span)
        torch.cuda.synchronize()
        for base, size in _foreign_allocations(span):
            if _d2h(buf, base, span) == 0 and buf.raw == st["right"]:
                st["targets"].append(base)
        STATS["found"] = len(st["targets"])
    torch.add(a, b, out=out)
    st["right"] = out.cpu().numpy().tobytes()
    return out
