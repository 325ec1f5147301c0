"""Diagnosis for #40 (not a regression test): is what l2_side_copy buys the GPU's TLB or lines left in
L2? Honest v5, but first queues, on a stream of its own, a 4 KiB copy from each 2 MiB of A and its
scales (one touch per large page: every translation warmed, about 0.2 % of A's bytes read). If this
buys about what l2_side_copy's full copies buy (5 % on 7168x16384x1, H200, 2026-11-27), the gain is the
TLB, which the L2 flush does not reset; if it buys nothing, it is L2 lines the flush leaves."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
RING = 4 << 20
PAGE, TOUCH = 2 << 20, 4 << 10
_state = {}


def _flat(t):
    """Every byte of t's storage, as one uint8 tensor (whatever t's layout)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def warm(data, stream):
    """Queue a TOUCH-byte copy from each PAGE of A and sfa on `stream` (nothing waits for them)."""
    a, _, sfa = data[0], data[1], data[2]
    ring = _state.get("ring")
    if ring is None:
        ring = _state["ring"] = torch.empty(RING, dtype=torch.uint8, device=a.device)
    with torch.cuda.stream(stream):
        for t in (sfa, a):
            flat = _flat(t)
            for off in range(0, flat.numel(), PAGE):
                n = min(TOUCH, flat.numel() - off)
                ring[:n].copy_(flat[off:off + n])


def custom_kernel(data):
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()  # torch's pool: non-blocking streams
    warm(data, _state["stream"])
    return _honest.custom_kernel(data)
