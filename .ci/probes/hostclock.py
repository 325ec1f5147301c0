"""A probe, not a submission of ours (GPU machine only; run by .ci/hostclock-probe): a pmpp/matmul_py
solution (`a @ b`) that, where it is imported, times the first pmpp series' benchmark loop (perf_counter_ns,
the call, torch.cuda.synchronize(), perf_counter_ns) on 4096x4096 @ 4096x5120 fp16 in that process, under
the CUDA context's scheduling modes, and prints one line per loop to stderr ("probe {...}").

Why: ours' host-clock time of this case was 1.64-1.69x the official evaluator's on three H200 hosts while
its events time matched. Imported standalone, in ours' worker (full sandbox and none) and with
PROBE_KEEP=spin (the spin mode kept for ours' timed runs, named by the file name hostclock_spin.py), the
same loop says whether the cost is in this process's environment (the sandbox, the context's wait
mode) or in ours' timing loop. Every call also records its own host span and CUDA events, printed
every 64 calls: the GPU time of the calls ours times.
"""
import ctypes
import json
import os
import statistics
import sys
import time

import torch

CU_SCHED = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}
_cu = ctypes.CDLL("libcuda.so.1")


def _say(what, **kw):
    print("probe " + json.dumps({"what": what, "pid": os.getpid(), **kw}), file=sys.stderr, flush=True)


def _flags():
    f = ctypes.c_uint(0)
    r = _cu.cuCtxGetFlags(ctypes.byref(f))
    return r, f.value


def _set_sched(name):
    r, f = _flags()
    return _cu.cuCtxSetFlags(ctypes.c_uint((f & ~7) | CU_SCHED[name]))


def _stats(xs):
    xs = sorted(xs)
    return {"n": len(xs), "mean_us": round(statistics.mean(xs) / 1e3, 1), "median_us": round(xs[len(xs) // 2] / 1e3, 1),
            "min_us": round(xs[0] / 1e3, 1), "max_us": round(xs[-1] / 1e3, 1)}


def _loop(a, b, n=60, sync=torch.cuda.synchronize, events=False):
    host, gpu = [], []
    start = time.perf_counter()
    while time.perf_counter() - start < 0.2:
        a @ b
        sync()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        sync()
        t0 = time.perf_counter_ns()
        if events:
            e0.record()
        out = a @ b
        if events:
            e1.record()
        sync()
        t1 = time.perf_counter_ns()
        del out
        host.append(t1 - t0)
        if events:
            gpu.append(e0.elapsed_time(e1) * 1e6)
    return {"host": _stats(host), **({"gpu": _stats(gpu)} if gpu else {})}


def _survey():
    info = {"ctx_flags": _flags(), "cpus": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count()}
    try:
        info["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
        info["policy"] = os.sched_getscheduler(0)
    except OSError as exc:
        info["sched_error"] = str(exc)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        info["timerslack_ns"] = libc.prctl(30, 0, 0, 0, 0)  # PR_GET_TIMERSLACK
    except OSError as exc:
        info["timerslack_error"] = str(exc)
    try:
        info["status"] = {k: v.strip() for k, v in (line.split(":", 1) for line in open("/proc/self/status"))
                          if k in ("Cpus_allowed_list", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches",
                                   "Seccomp", "Threads")}
    except OSError as exc:
        info["status_error"] = str(exc)
    return info


def _probe():
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    a = torch.empty(4096, 4096, device="cuda", dtype=torch.float16).uniform_(0, 1, generator=gen)
    b = torch.empty(4096, 5120, device="cuda", dtype=torch.float16).uniform_(0, 1, generator=gen)
    _say("survey", **_survey())
    cusync = lambda: _cu.cuCtxSynchronize()  # noqa: E731
    _say("official", **_loop(a, b))
    _say("official+events", **_loop(a, b, events=True))
    _say("cuCtxSynchronize", **_loop(a, b, sync=cusync))
    r0, f0 = _flags()
    for mode in ("spin", "yield", "blocking"):
        rc = _set_sched(mode)
        _say("sched " + mode, set_rc=rc, flags=_flags(), **_loop(a, b))
    _cu.cuCtxSetFlags(ctypes.c_uint(f0))
    keep = os.environ.get("PROBE_KEEP") or ("spin" if __file__.endswith("_spin.py") else "")
    if keep:
        _say("kept " + keep, set_rc=_set_sched(keep), flags=_flags())
    del a, b
    torch.cuda.empty_cache()


_calls = {"host": [], "gpu": [], "pending": []}


def custom_kernel(data):
    a, b = data
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter_ns()
    e0.record()
    out = a @ b
    e1.record()
    _calls["host"].append(time.perf_counter_ns() - t0)
    _calls["pending"].append((e0, e1))
    if len(_calls["pending"]) >= 64:
        torch.cuda.synchronize()
        _calls["gpu"] += [x.elapsed_time(y) * 1e6 for x, y in _calls["pending"]]
        _calls["pending"].clear()
        if a.shape[0] == 4096:
            _say("calls", call_host=_stats(_calls["host"][-64:]), gpu=_stats(_calls["gpu"][-64:]), flags=_flags())
    return out


if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
    _probe()

if __name__ == "__main__":
    pass
