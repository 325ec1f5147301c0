"""Timing attack (GPU, #40): honest v5, but first queues device-to-device copies of A and its scales
on a stream of its own (non-blocking, never joined) when it is called. The harness calls
custom_kernel while its wait runs on the GPU; every SM is held then, the copy engines are not, so the
copies pull A into L2 before the start event (into a small ring: L2 keeps A, not the copies). Before
#40 the flush came before the wait and this bought 5 % on the 7168x16384 case with check: pass; now
the flush comes last and evicts what the copies brought. Judged with benchmark against v5
(manifest: expect no-faster)."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
RING = 4 << 20
_state = {}


def _flat(t):
    """Every byte of t's storage, as one uint8 tensor (whatever t's layout)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def warm(data, stream):
    """Queue copies of A and sfa through a RING-byte buffer on `stream` (nothing waits for them)."""
    a, _, sfa = data[0], data[1], data[2]
    ring = _state.get("ring")
    if ring is None:
        ring = _state["ring"] = torch.empty(RING, dtype=torch.uint8, device=a.device)
    with torch.cuda.stream(stream):
        for t in (sfa, a):
            flat = _flat(t)
            for off in range(0, flat.numel(), RING):
                n = min(RING, flat.numel() - off)
                ring[:n].copy_(flat[off:off + n])


def custom_kernel(data):
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()  # torch's pool: non-blocking streams
    warm(data, _state["stream"])
    return _honest.custom_kernel(data)
