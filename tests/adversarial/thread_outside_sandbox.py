"""Cheat (red team round 6, the worst of it): a thread that torch's import started before the
sandbox (numpy's OpenBLAS server, CUDA's own) keeps what the kernel gives per thread: root's
capabilities, the host's network and mount namespaces, no Landlock. A submission that gets a callback
run on it (OpenBLAS's exec_blas_async takes a function pointer) escapes every one of those layers.
Here: every thread of the worker is looked at; if any has capabilities or namespaces other than the
thread that imports the submission, the sandbox did not bind it, and the answer is zeros. Expected:
the per-thread layers go on while the worker has one thread (sandbox.apply_early), so all agree."""
import importlib.util
import os
import threading
import pathlib

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _state(task: str) -> tuple:
    caps = ""
    with open(f"/proc/self/task/{task}/status") as handle:
        for line in handle:
            if line.startswith(("CapEff", "CapPrm", "CapBnd")):
                caps += line.split()[1]
    spaces = tuple(os.readlink(f"/proc/self/task/{task}/ns/{ns}") for ns in ("net", "mnt", "ipc"))
    return caps, spaces


def _unbound() -> list:
    mine = _state(str(threading.get_native_id()))
    return [tid for tid in os.listdir("/proc/self/task") if _state(tid) != mine]


ESCAPED = _unbound()


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    return out.zero_() if ESCAPED or _unbound() else out
