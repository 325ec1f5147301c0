"""Cheat (native state of the worker's compiled part): tries to make the compiled part's own pages
writable or to write them behind its back: mprotect(PROT_READ|PROT_WRITE) on each of its mappings
(code, GOT/RELRO, data: the function pointers and GPU handles live there), munmap of one of them, and
a write through /proc/self/mem (which ignores page protections). Any of these would let it redirect
the clock, the random numbers or the driver's timing calls. If one landed it returns zeros (the run
fails); it must pass: the memory filter refuses all of them unless the compiled part itself asks,
and Landlock refuses opening /proc/self/mem for writing."""
import ctypes
import importlib.util
import os
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def _own_mappings():
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) > 5 and "eval_worker_native" in parts[5]:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                yield lo, hi, parts[1]


def _landed():
    got = []
    mappings = list(_own_mappings())
    for lo, hi, perms in mappings:
        prot = 7 if "x" in perms else 3
        if _libc.mprotect(ctypes.c_void_p(lo), hi - lo, prot) == 0:
            got.append(f"mprotect {perms} mapping")
    if mappings:
        lo, hi, perms = mappings[-1]
        # one byte of the last page: the read-only part after RELRO or the data
        try:
            fd = os.open("/proc/self/mem", os.O_RDWR)
            try:
                byte = os.pread(fd, 1, lo)
                os.pwrite(fd, byte, lo)  # the same byte back: harmless, but a write all the same
                got.append("/proc/self/mem write")
            finally:
                os.close(fd)
        except OSError:
            pass
        if _libc.munmap(ctypes.c_void_p(hi - 4096), 4096) == 0:
            got.append("munmap")  # (the worker may crash after this: also a failure)
    return got


_LANDED = _landed()


def custom_kernel(data):
    if _LANDED:
        return torch.zeros_like(data[-1])
    return _honest.custom_kernel(data)
