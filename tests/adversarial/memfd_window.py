"""Attack (red team round 11): memory files counted only by what is mapped of them. Sixteen memory
files (memfd_create) of 24 MiB each, written through the descriptor, then one page of each mapped
(libc's mmap, which keeps no descriptor) and the descriptor closed: only a 4 KiB mapping holds each
file, and a watch that counts a mapping by its length saw 64 KiB where 384 MiB were held. Then
files kept by name in its own /dev/shm (a private tmpfs, not under its folders): 4 x 48 MiB. Both
under a 192 MiB quota. Expected: the judge counts the whole file behind a mapping and what its
/dev/shm holds, and kills it with the disk-quota reason."""
import ctypes
import importlib.util
import os
import pathlib
import time

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_chunk = b"\xa5" * (24 << 20)
KEPT = []
for _ in range(16):
    _fd = os.memfd_create("zzz_window")
    os.write(_fd, _chunk)
    KEPT.append(_libc.mmap(None, 4096, 1, 1, _fd, 0))  # PROT_READ, MAP_SHARED
    os.close(_fd)
    time.sleep(0.05)
time.sleep(1.5)
if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
    for _i in range(4):
        try:
            with open(f"/dev/shm/zzz_kept{_i}", "wb") as _f:
                _f.write(b"\x5a" * (48 << 20))
        except OSError:
            break
        time.sleep(0.1)
time.sleep(1.5)


def custom_kernel(data):
    return _honest.custom_kernel(data)
