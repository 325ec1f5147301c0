"""Timing attack (GPU, #40): honest v5, but first launches a kernel that reads all of A (a byte sum)
on a stream of its own, never joined, when it is called (during the harness's wait). The wait's
kernel holds every SM, so this kernel can start only when the flush ends, beside the timed kernel;
what it reads before the start event is all it could hide. Judged with benchmark against v5
(manifest: expect no-faster)."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_state = {}


def custom_kernel(data):
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()
    a = data[0]
    flat = torch.empty(0, dtype=torch.uint8, device=a.device).set_(a.untyped_storage())
    with torch.cuda.stream(_state["stream"]):
        _state["sink"] = flat.view(torch.int32).sum()  # reads every byte of A into L2
        _state["sink"].record_stream(_state["stream"])
    return _honest.custom_kernel(data)
