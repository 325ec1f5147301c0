"""Diagnosis for #40 (not a regression test): is what l2_side_copy buys the GPU's TLB or lines left in
L2? Honest v5, but first queues, on a stream of its own, a 256-byte copy from each 2 MiB of A and its
scales (one touch per large page, in one cudaMemcpy2DAsync: every translation warmed, 0.01 % of A's
bytes read, one launch). If this
buys about what l2_side_copy's full copies buy (5 % on 7168x16384x1, H200, 2026-11-27), the gain is the
TLB, which the L2 flush does not reset; if it buys nothing, it is L2 lines the flush leaves."""
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
RING = 4 << 20
PAGE, TOUCH = 2 << 20, 256  # one touch per 2 MiB page: 256 bytes of each
_state = {}


def _flat(t):
    """Every byte of t's storage, as one uint8 tensor (whatever t's layout)."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _cudart():
    """The CUDA runtime torch loaded (its soname), for one strided copy: cudaMemcpy2DAsync."""
    import ctypes
    import glob
    import os

    for name in ["libcudart.so.13", "libcudart.so.12", *glob.glob(os.path.join(os.path.dirname(torch.__file__), "..",
                                                                            "nvidia", "cu*", "lib", "libcudart.so.*"))]:
        try:
            lib = ctypes.CDLL(name)
            lib.cudaMemcpy2DAsync  # noqa: B018
            return lib
        except (OSError, AttributeError):
            continue
    raise RuntimeError("no libcudart found")


def warm(data, stream):
    """One strided copy on `stream` (copy engine, one launch): TOUCH bytes from each PAGE of A and sfa
    (nothing waits for it)."""
    import ctypes

    a, _, sfa = data[0], data[1], data[2]
    lib = _state.get("cudart") or _state.setdefault("cudart", _cudart())
    ring = _state.get("ring")
    if ring is None:
        ring = _state["ring"] = torch.empty(RING, dtype=torch.uint8, device=a.device)
    for t in (sfa, a):
        flat = _flat(t)
        rows = max(1, flat.numel() // PAGE)
        width = min(TOUCH, flat.numel())
        err = lib.cudaMemcpy2DAsync(ctypes.c_void_p(ring.data_ptr()), ctypes.c_size_t(width),
                                    ctypes.c_void_p(flat.data_ptr()), ctypes.c_size_t(PAGE), ctypes.c_size_t(width),
                                    ctypes.c_size_t(min(rows, RING // width)), 3, ctypes.c_void_p(stream.cuda_stream))
        if err:
            raise RuntimeError(f"cudaMemcpy2DAsync: {err}")


def custom_kernel(data):
    if "stream" not in _state:
        _state["stream"] = torch.cuda.Stream()  # torch's pool: non-blocking streams
    warm(data, _state["stream"])
    return _honest.custom_kernel(data)
