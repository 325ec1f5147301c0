"""Cheat (GPU): leaves the write of c on a side stream and returns before it is done."""
import torch
import importlib.util
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_side = []


def custom_kernel(data):
    if not _side:
        _side.append(torch.cuda.Stream())
    stream = _side[0]
    c = data[-1]
    result = _honest.custom_kernel(data[:-1] + (torch.empty_like(c),))
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        torch.cuda._sleep(20_000_000)  # ~10 ms: stands in for a long kernel on that stream
        c.copy_(result)
    # keep `result` alive until the side stream has read it: without this the caching allocator
    # hands its block to the next allocation on the current stream (the guard's snapshot), and the
    # delayed copy would copy that instead (seen on an H200: c came back unchanged)
    result.record_stream(stream)
    return c
