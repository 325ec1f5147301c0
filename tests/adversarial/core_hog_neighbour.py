"""core_hog_neighbour: starts one busy process per core at import, alive as long as its worker, and is
slow on purpose, so that on a machine without CUDA, where the cores are the timed device, judges
running beside it (`batch --jobs N`) measure slower times. Honest result: it passes; batch judges
timed modes one at a time without CUDA (tests/test_worker_lifecycle.py)."""
import importlib.util
import os
import time
from pathlib import Path

from task import input_t, output_t

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("torch_ref_hog", _ROOT / "submission" / "torch_ref.py")
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)

for _ in range(os.cpu_count() or 2):
    if os.fork() == 0:
        _x = 0
        while True:
            _x += 1


def custom_kernel(data: input_t) -> output_t:
    time.sleep(0.02)
    return _ref.custom_kernel(data)
