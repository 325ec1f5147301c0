"""Attack (red team round 4, disk fill): a worker writes below its private folders (TMPDIR, the only
place it may write) until the disk is full, so every other worker and judge on the machine fails
with "No space left on device". Here: 48 MiB files, one after another, until the write fails or the
worker has written 1 GiB; then the honest answer, as if nothing happened. Expected: the judge's
disk quota (EVAL_WORKER_DISK, set low for this test) kills the worker with the reason."""
import importlib.util
import os
import pathlib
import tempfile
import time

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

CHUNK = b"\x5a" * (1 << 20)


def _fill(limit=1 << 30, size=48 << 20):
    written, n = 0, 0
    while written < limit:
        path = os.path.join(tempfile.gettempdir(), f"fill-{n}")
        try:
            with open(path, "wb") as handle:
                for _ in range(size >> 20):
                    handle.write(CHUNK)
        except OSError:
            break
        written += size
        n += 1
    time.sleep(2)  # what a real filler does next: hold it
    return written


def custom_kernel(data):
    _fill()
    return _honest.custom_kernel(data)
