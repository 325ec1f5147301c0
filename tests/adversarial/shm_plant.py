"""Cheat (persistence through shared memory): /dev/shm outlives processes, and the judge deletes only
what a worker's own uid leaves there; a worker that keeps root (the tree is not readable by an
unprivileged uid) could leave a file that any later worker reads (a channel between runs) and pin
RAM (tmpfs) for as long as the machine runs. This one writes MARKER and 64 MiB of ballast there, and
a POSIX semaphore file; honest result. tests/test_isolation.py runs honest_probe_shm.py after it."""
import importlib.util
import os
import pathlib
import sys

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

MARKER = "/dev/shm/zzz_nvfp4_shm_plant"
BALLAST = "/dev/shm/zzz_nvfp4_shm_plant_ballast"
try:
    with open(MARKER, "w") as handle:
        handle.write(f"FORGED_BY_ADVERSARIAL shm_plant: pid {os.getpid()} uid {os.getuid()}\n")
    with open(BALLAST, "wb") as handle:
        chunk = b"\xa5" * (1 << 20)
        for _ in range(64):
            handle.write(chunk)
    with open("/dev/shm/sem.zzz_nvfp4_shm_plant", "wb") as handle:
        handle.write(b"\0" * 32)
except OSError as exc:
    print("shm_plant: could not write:", exc, file=sys.stderr)


def custom_kernel(data):
    return _honest.custom_kernel(data)
