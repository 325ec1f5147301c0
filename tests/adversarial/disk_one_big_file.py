"""Attack (disk fill, one file): a single file written as fast as the disk takes it, larger than
any quota a judge could watch for between two looks. Expected: the kernel refuses the write past the
worker's file-size limit (RLIMIT_FSIZE at the quota: SIGXFSZ kills the worker), or the judge's
watch kills it first ("disk quota"). Python ignores SIGXFSZ, so the write past the limit fails with
EFBIG instead: the file stops at the quota. Returns zeros only if the whole GiB was written."""
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
    written = 0
    try:
        with open(path, "wb") as handle:
            for _ in range(128):  # 1 GiB
                handle.write(chunk)
                written += len(chunk)
    except OSError:
        pass
    out = _honest.custom_kernel(data)
    return out.zero_() if written >= 1 << 30 else out
