"""Cheat (GPU only): runs the whole computation on a second CUDA stream and returns without making
the current stream wait for it, so an end event recorded on the current stream right after the
call does not include the kernel's work (and the output is unfinished at that point). Unlike
side_stream.py it has no artificial delay: it is what a kernel author gets by launching on a
private stream and forgetting the join."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_streams = {}


def custom_kernel(data):
    c = data[-1]
    if not c.is_cuda:
        return _honest.custom_kernel(data)
    stream = _streams.setdefault(c.device, torch.cuda.Stream(device=c.device))
    stream.wait_stream(torch.cuda.current_stream(c.device))  # inputs are ready
    with torch.cuda.stream(stream):
        torch.cuda._sleep(2_000_000)  # ~1 ms of "prologue" on the private stream
        _honest.custom_kernel(data)   # writes c on the private stream
    for t in data:
        t.record_stream(stream)
    return c
