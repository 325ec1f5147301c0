"""Diagnosis for #40 (not a test): can the worker see, through CUPTI's API callbacks, every call that
queues GPU work on a stream other than the timed one? Loads libcupti (the one torch's process maps, or
one beside torch's CUDA libraries), subscribes, and runs torch the ways a submission queues work:
a copy and a kernel on a side stream, the same after joining the side stream to the current stream,
a graph captured and replayed on a side stream, a high-priority stream. Prints, per action, which
callback domain fired (driver, runtime) with the stream each call named (decoded with
eval/worker/native/stream_table.h), then whether torch's profiler still works afterwards.

    python3 docs/experiments/cupti_probe.py            # JSON on stdout
As a submission's import (inside the sandbox): cupti_probe.run() and print the result to stderr."""
from __future__ import annotations

import ctypes
import glob
import json
import os
import pathlib
import re
import sys
import time

TABLE = pathlib.Path(__file__).resolve().parents[2] / "eval" / "worker" / "native" / "stream_table.h"
KIND = {0: "work", 1: "record", 2: "wait", 3: "capture_begin", 4: "capture_end", 5: "none"}


def table():
    rows = {}
    for m in re.finditer(r"\{(\d+), (\d+), (\d+), (\d+), (-?\d+), (\d), \"(\w+)\"\}", TABLE.read_text()):
        d, cb, k, s, e, cfg, name = m.groups()
        rows[(int(d), int(cb))] = (int(k), int(s), int(e), int(cfg), name)
    return rows


def find_cupti():
    import torch
    seen = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "libcupti" in line:
                seen.append(line.split()[-1])
    if seen:
        return seen[0], "mapped"
    base = pathlib.Path(torch.__file__).resolve().parents[1]
    pats = [str(base / "nvidia" / "**" / "libcupti.so*"), str(base / "torch" / "lib" / "libcupti*.so*"),
            "/usr/local/cuda*/lib64/libcupti.so*", "/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so*"]
    for p in pats:
        for hit in sorted(glob.glob(p, recursive=True)):
            return hit, "found"
    return None, "none"


def run():
    import torch
    out = {"torch": torch.__version__, "cuda": torch.version.cuda}
    torch.cuda.init()
    x = torch.ones(1 << 24, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    path, how = find_cupti()
    out["cupti"] = [path, how]
    if not path:
        return out
    lib = ctypes.CDLL(path)
    rows = table()
    log = []
    CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)

    def cb(user, domain, cbid, data):
        if ctypes.c_int.from_address(data).value != 0:  # CUPTI_API_ENTER only
            return
        row = rows.get((domain, cbid))
        if row is None:
            log.append((domain, cbid, None, None))
            return
        k, s, e, cfg, name = row
        params = ctypes.c_void_p.from_address(data + 16).value
        if cfg:
            params = ctypes.c_void_p.from_address(params).value
        stream = ctypes.c_void_p.from_address(params + s).value or 0
        log.append((domain, cbid, name, hex(stream)))

    cb_c = CB(cb)
    sub = ctypes.c_void_p()
    r = lib.cuptiSubscribe(ctypes.byref(sub), cb_c, None)
    out["subscribe"] = r
    if r != 0:
        msg = ctypes.c_char_p()
        lib.cuptiGetResultString(r, ctypes.byref(msg))
        out["subscribe_error"] = msg.value.decode() if msg.value else str(r)
        return out
    out["enable"] = [lib.cuptiEnableDomain(1, sub, d) for d in (1, 2)]  # driver, runtime
    side = torch.cuda.Stream()
    hi = torch.cuda.Stream(priority=-1)
    cur = torch.cuda.current_stream()
    out["streams"] = {"current": hex(cur.cuda_stream), "side": hex(side.cuda_stream), "high": hex(hi.cuda_stream)}

    def act(label, fn):
        log.clear()
        fn()
        torch.cuda.synchronize()
        names = [(d, n or cb, s) for d, cb, n, s in log if n]
        others = {}
        for d, cb, n, _ in log:
            if not n:
                others[f"{d}:{cb}"] = others.get(f"{d}:{cb}", 0) + 1
        out.setdefault("actions", {})[label] = {"stream_calls": names[:12], "other_calls": others}

    def side_copy():
        with torch.cuda.stream(side):
            y.copy_(x)

    def side_kernel():
        with torch.cuda.stream(side):
            y.add_(1)

    def joined():
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            y.add_(1)
        cur.wait_stream(side)

    def high():
        with torch.cuda.stream(hi):
            y.mul_(1.0)

    def default():
        y.add_(1)

    g = torch.cuda.CUDAGraph()

    def capture():
        with torch.cuda.graph(g):
            y.add_(2)

    def replay_side():
        with torch.cuda.stream(side):
            g.replay()

    def cudart_copy():
        rt = None
        for name in ("libcudart.so.13", "libcudart.so.12"):
            try:
                rt = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if rt is None:
            return
        rt.cudaMemcpyAsync(ctypes.c_void_p(y.data_ptr()), ctypes.c_void_p(x.data_ptr()), ctypes.c_size_t(1 << 20), 3,
                           ctypes.c_void_p(side.cuda_stream))

    for label, fn in [("default_kernel", default), ("side_copy", side_copy), ("side_kernel", side_kernel),
                      ("joined", joined), ("high_priority", high), ("graph_capture", capture),
                      ("graph_replay_side", replay_side), ("cudart_copy_side", cudart_copy)]:
        try:
            act(label, fn)
        except Exception as e:  # noqa: BLE001
            out.setdefault("actions", {})[label] = {"error": repr(e)[:200]}
    # host cost of a launch with callbacks on (the table's ids only) against none
    lib.cuptiEnableDomain(0, sub, 1)
    lib.cuptiEnableDomain(0, sub, 2)
    log.clear()

    def launches(n=3000):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            y.add_(1)
        dt = time.perf_counter() - t
        torch.cuda.synchronize()
        return dt / n * 1e6

    out["launch_us_no_callbacks"] = round(min(launches() for _ in range(3)), 3)
    lib.cuptiUnsubscribe(sub)
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            y.add_(1)
            torch.cuda.synchronize()
        out["profiler_after"] = len(p.key_averages())
    except Exception as e:  # noqa: BLE001
        out["profiler_after"] = repr(e)[:200]
    sub2 = ctypes.c_void_p()
    out["resubscribe"] = lib.cuptiSubscribe(ctypes.byref(sub2), cb_c, None)
    if out["resubscribe"] == 0:
        lib.cuptiUnsubscribe(sub2)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=1))
    sys.stdout.flush()
    os._exit(0)
