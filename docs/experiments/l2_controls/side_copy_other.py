"""#40 diagnosis control: the same copies as l2_side_copy (same sizes, same 4 MiB ring, same side stream),
but of a private buffer of A's size, not of A: a gain here is not lines of A left in L2."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[3] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
RING = 4 << 20
_state = {}


def custom_kernel(data):
    a, sfa = data[0], data[2]
    n = a.untyped_storage().nbytes() + sfa.untyped_storage().nbytes()
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()
        _state["ring"] = torch.empty(RING, dtype=torch.uint8, device=a.device)
    if _state.get("n") != n:
        _state["other"] = torch.randint(0, 255, (n,), dtype=torch.uint8, device=a.device)
        _state["n"] = n
    ring, other = _state["ring"], _state["other"]
    with torch.cuda.stream(_state["stream"]):
        for off in range(0, n, RING):
            k = min(RING, n - off)
            ring[:k].copy_(other[off:off + k])
    return _honest.custom_kernel(data)
