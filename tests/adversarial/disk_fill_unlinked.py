"""Attack (disk fill, hidden): files that are deleted while open keep their blocks but have no name,
so a quota that only walks the worker's folders sees nothing. Here: eight files, each opened,
unlinked at once and written to 40 MiB through the open descriptor (each below a per-file limit),
the descriptors kept; then the honest answer. Expected: the judge counts open deleted files of the
worker's processes too, and kills it with the disk-quota reason."""
import importlib.util
import os
import pathlib
import tempfile
import time

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

KEPT = []


def _hidden(files=8, size=40 << 20):
    chunk = b"\xa5" * (1 << 20)
    for n in range(files):
        fd, path = tempfile.mkstemp(prefix="ghost-")
        os.unlink(path)
        KEPT.append(fd)
        try:
            for _ in range(size >> 20):
                os.write(fd, chunk)
        except OSError:
            break
    time.sleep(2)


def custom_kernel(data):
    _hidden()
    return _honest.custom_kernel(data)
