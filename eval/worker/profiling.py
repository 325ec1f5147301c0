"""Inside the worker: the torch profiler's table of one call, or one call inside the NVTX range
'custom_kernel' for Nsight Compute. Informational only: nothing here enters a verdict."""
from __future__ import annotations

import torch


def _clone(data):
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in data)


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def profile(kernel, data, ncu: bool = False) -> str:
    from torch.cuda.nvtx import range as nvtx_range
    from torch.profiler import ProfilerActivity, profile as torch_profile

    kernel(_clone(data))  # compile and warm outside the profiled region
    _sync()
    cloned = _clone(data)
    if ncu:
        with nvtx_range("custom_kernel"):
            kernel(cloned)
            _sync()
        return ""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch_profile(activities=activities) as prof:
        kernel(cloned)
        _sync()
    sort = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=20)
