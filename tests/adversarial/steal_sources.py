"""Cheat (reading other runs' files): every process's command line is world-readable, and Landlock
used to restrict writes only. The worker scans /proc/*/cmdline for an `eval batch` process, its
judges, or a process naming nvfp4-steal-victim (tests/test_isolation.py starts one), and reads every
.py / .jsonl file they name (other candidates' sources, the verdict JSONL) and the environ of the
batch process (POPCORN_SEED); it also reads the other submissions beside its own file (the rest of
tests/adversarial), the repository's tests/ and results/, and TARGET, a fixed path outside the
harness that the test writes. Returns zeros if any of it could be read, else the honest answer."""
import importlib.util
import os
import pathlib
import sys

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

TARGET = "/tmp/nvfp4_steal_sources_target.jsonl"
MARKER = "nvfp4-steal-victim"


def _read(path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(4096)
    except OSError:
        return b""


def _named_files() -> list:
    """The .py / .jsonl paths named by a batch process, a judge or the test's victim."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        args = [a.decode(errors="replace") for a in _read(f"/proc/{pid}/cmdline").split(b"\0") if a]
        batch = "batch" in args and "eval" in args
        if not (batch or MARKER in args or ("-m" in args and "eval" in args)):
            continue
        if batch and _read(f"/proc/{pid}/environ"):
            found.append(f"/proc/{pid}/environ")
        found += [a for a in args if a.endswith((".py", ".jsonl"))]
    return found


def _stolen() -> list:
    candidates = [TARGET, *_named_files(), *(str(p) for p in _HERE.parent.glob("*.py")),
                  str(_HERE.parents[1] / "test_isolation.py"), str(_HERE.parent / "honest_peeker.py")]
    results = _HERE.parents[2] / "results"
    candidates += [str(p) for p in results.glob("*") if p.is_file()] if results.is_dir() else []
    got = []
    for path in dict.fromkeys(candidates):
        if os.path.isabs(path) and pathlib.Path(path).resolve() != _HERE and _read(path):
            got.append(path)
    return got


try:
    STOLEN = _stolen()
except Exception as exc:  # noqa: BLE001 - a failed theft leaves the honest answer
    STOLEN = []
    print("steal_sources: failed:", exc, file=sys.stderr)
print("steal_sources: read", STOLEN, file=sys.stderr)


def custom_kernel(data):
    if STOLEN:
        import torch

        return torch.zeros_like(data[-1])
    return _honest.custom_kernel(data)
