"""deep_nest_cleanup: builds chains of 5000 nested folders in every folder it may write (TMPDIR,
HOME, its build folder: torch's extension folder), so that the judge's clean-up (a recursive
rmtree on Python before 3.12) raises RecursionError and the judge dies without verdicts, leaving the
worker's folder behind. Honest result: it must pass, and nothing of it may remain
(tests/test_worker_lifecycle.py)."""
import importlib.util
import os
from pathlib import Path

from task import input_t, output_t

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("torch_ref_deep", _ROOT / "submission" / "torch_ref.py")
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def _nest(base: str, depth: int = 5000) -> None:
    start = os.open(".", os.O_RDONLY)
    try:
        os.makedirs(base, exist_ok=True)
        os.chdir(base)
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
    except OSError as exc:
        print("deep_nest_cleanup:", base, exc)
    finally:
        os.fchdir(start)
        os.close(start)


for _place in ("TMPDIR", "HOME", "TORCH_EXTENSIONS_DIR"):
    if os.environ.get(_place):
        _nest(os.path.join(os.environ[_place], "zzz_deep_nest"))


def custom_kernel(data: input_t) -> output_t:
    return _ref.custom_kernel(data)
