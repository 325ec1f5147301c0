"""Honest (does its own timing): synchronizes the device itself, reads every clock
(perf_counter/perf_counter_ns/monotonic/time/process_time), times itself with its own CUDA events
when there is CUDA, sleeps 0 s, and keeps its own statistics. Patches nothing. Must pass."""
import importlib.util
import pathlib
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
own_timings_ns = []


def custom_kernel(data):
    cuda = data[-1].is_cuda
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter_ns()
    _ = (time.perf_counter(), time.monotonic(), time.monotonic_ns(), time.time(), time.process_time())
    out = _honest.custom_kernel(data)
    time.sleep(0)
    if cuda:
        end.record()
        torch.cuda.synchronize()
        own_timings_ns.append(start.elapsed_time(end) * 1e6)
    else:
        own_timings_ns.append(float(time.perf_counter_ns() - t0))
    del own_timings_ns[:-1000]
    return out
