"""Cheat (native secrets): goes after the signing key with ctypes, every way a contestant's native
code could: the exported symbols g_key / key of the worker's compiled module (dlsym), the key page
itself (the memfd_secret mapping in /proc/self/maps, made readable with mprotect), /proc/self/mem
read at that page, and process_vm_readv on itself. With the key it could sign any reply; here it
only records what it got and, if anything landed, returns zeros (so the run fails). Must pass: the
key is not exported, its page stays PROT_NONE (mprotect on it is refused unless the compiled part
asks), and memfd_secret keeps it out of /proc/self/mem."""
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
PROT_READ = 1


def _maps():
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            yield lo, hi, parts[1], parts[5] if len(parts) > 5 else ""


def _landed():
    got = []
    for _, _, _, path in _maps():
        if "eval_worker_native" in path and path.endswith(".so"):
            try:
                lib = ctypes.CDLL(path)
                for name in ("g_key", "key", "_ZL5g_key", "S"):
                    try:
                        ctypes.c_uint8.in_dll(lib, name)
                        got.append(f"symbol {name}")
                    except ValueError:
                        pass
            except OSError:
                pass
            break
    for lo, hi, perms, path in _maps():
        if "secretmem" not in path and not (perms.startswith("---") and hi - lo == 4096 and "memfd" in path):
            continue
        if _libc.mprotect(ctypes.c_void_p(lo), hi - lo, PROT_READ) == 0:
            got.append("mprotect of the key page")
            try:
                ctypes.string_at(lo, 32)
            except Exception:
                pass
        try:
            fd = os.open("/proc/self/mem", os.O_RDONLY)
            try:
                if len(os.pread(fd, 32, lo)) == 32:
                    got.append("/proc/self/mem read of the key page")
            finally:
                os.close(fd)
        except OSError:
            pass
    return got


_LANDED = _landed()


def custom_kernel(data):
    if _LANDED:
        return torch.zeros_like(data[-1])  # a real cheat would now sign whatever it liked
    return _honest.custom_kernel(data)
