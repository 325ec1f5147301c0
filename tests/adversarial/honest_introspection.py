"""Honest (looks, never touches): at import and on its first calls it inspects the process the way
a curious contestant might -- names in sys.modules, gc counts and a gc.get_objects() census of
tensor types, the caller frames' function names (sys._getframe), inspect.stack(0), live threads,
/proc/self/status -- and prints a summary. It modifies nothing it finds and computes honestly.
Must pass."""
import collections
import gc
import importlib.util
import inspect
import pathlib
import sys
import threading

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _census():
    kinds = collections.Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, torch.Tensor))
    modules = sorted(name for name in sys.modules if name.startswith(("eval", "reference", "task")) or "native" in name)
    try:
        with open("/proc/self/status") as handle:
            status = [line.strip() for line in handle if line.startswith(("Uid", "NoNewPrivs", "Seccomp"))]
    except OSError:
        status = []
    return {"tensors": dict(kinds), "modules": modules, "gc": gc.get_count(),
            "threads": [t.name for t in threading.enumerate()], "status": status}


print("census at import:", _census())
_calls = [0]


def custom_kernel(data):
    _calls[0] += 1
    if _calls[0] <= 2:
        callers, depth = [], 1
        while True:
            try:
                callers.append(sys._getframe(depth).f_code.co_name)
            except ValueError:
                break
            depth += 1
        print("callers:", callers, "stack:", [f.function for f in inspect.stack(0)][:20], "census:", _census())
    return _honest.custom_kernel(data)
