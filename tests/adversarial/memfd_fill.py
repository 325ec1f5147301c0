"""Attack (red team round 10): memory held in a memory file (memfd_create) that is written and then
unmapped is charged to no process: the worker's resident size and OOM score stay small while the
machine's memory fills (3 GiB in the red team's run), and the OOM killer would pick the judge or a
neighbour. Here seven memory files of 48 MiB each (each below the per-file limit), 336 MiB under a
192 MiB quota, then the honest answer. Expected: the judge's watch counts memory files the worker holds with its disk
files and kills it with the disk-quota reason."""
import importlib.util
import os
import pathlib
import time

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

KEPT = []
_chunk = b"\xa5" * (48 << 20)
for _ in range(7):
    KEPT.append(os.memfd_create("zzz_fill"))
    os.write(KEPT[-1], _chunk)
    time.sleep(0.1)
time.sleep(3)  # a few looks of the watch


def custom_kernel(data):
    return _honest.custom_kernel(data)
