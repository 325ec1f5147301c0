"""#40 diagnosis control: l2_side_copy's host side (its stream, its ring, the stream context) without a copy."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[3] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_state = {}


def custom_kernel(data):
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()
        _state["ring"] = torch.empty(4 << 20, dtype=torch.uint8, device=data[0].device)
    with torch.cuda.stream(_state["stream"]):
        pass
    return _honest.custom_kernel(data)
