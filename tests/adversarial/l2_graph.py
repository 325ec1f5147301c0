"""Timing attack (GPU, #40): honest v5, but the copies that warm L2 with A and its scales (as in
l2_side_copy.py) are a CUDA graph captured once, replayed on a side stream when it is called, during
the harness's wait: one launch, the copy engines do the rest before the start event unless the flush
comes after them. Judged with benchmark against v5 (manifest: expect no-faster)."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
RING = 4 << 20
_state = {}


def _flat(t):
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _capture(data, stream):
    """The copies as a graph, captured on `stream` without a device sync (the harness's wait may be
    on the GPU: the capture only records, so a new input costs no timed sync)."""
    a, sfa = data[0], data[2]
    if "ring" not in _state:
        _state["ring"] = torch.empty(RING, dtype=torch.uint8, device=a.device)
    ring = _state["ring"]
    flats = [_flat(sfa), _flat(a)]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        graph.capture_begin(capture_error_mode="relaxed")
        for flat in flats:
            for off in range(0, flat.numel(), RING):
                n = min(RING, flat.numel() - off)
                ring[:n].copy_(flat[off:off + n])
        graph.capture_end()
    return graph, flats


def custom_kernel(data):
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()
    key = (data[0].data_ptr(), data[2].data_ptr())
    if _state.get("key") != key:  # once per input (benchmark mode keeps its inputs from run to run)
        _state["graph"] = _capture(data, _state["stream"])
        _state["key"] = key
    with torch.cuda.stream(_state["stream"]):
        _state["graph"][0].replay()
    return _honest.custom_kernel(data)
