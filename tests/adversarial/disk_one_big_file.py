"""Attack (disk fill, one file): a single file written as fast as the disk takes it, larger than
any quota a judge could watch for between two looks. Expected: the kernel refuses the write past the
worker's file-size limit (RLIMIT_FSIZE at the quota: SIGXFSZ kills the worker), or the judge's
watch kills it first; either way the reason names the disk quota."""
import importlib.util
import os
import pathlib
import tempfile

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def custom_kernel(data):
    chunk = b"\x3c" * (8 << 20)
    path = os.path.join(tempfile.gettempdir(), "big")
    try:
        with open(path, "wb") as handle:
            for _ in range(128):  # 1 GiB
                handle.write(chunk)
    except OSError:
        pass
    return _honest.custom_kernel(data)
