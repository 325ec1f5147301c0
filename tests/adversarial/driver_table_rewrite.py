"""Cheat (timing, CUDA driver; GPU only): rewrites the CUDA driver's own function table so that
cuEventElapsedTime reports 1/1000 of the real time for everyone in the process (the harness's
compiled part included), the way native code of a contestant can with ctypes: it finds the table
words holding cuEventElapsedTime's implementation (the values cuGetProcAddress and the exported
symbol give, and the slot an exported trampoline jumps through: `jmp [rip+d]` / `mov rax,[rip+d]`),
in libcuda's and libcudart's writable data, and points them at a wrapper that calls the real one
and divides. Armed at the first call (the judge's own start-up measurements stay honest). The kernel
is honest plus time.sleep(0.02): an honest measurement is >= 20 ms. Must not report less: either the
compiled part never calls through the rewritten words, or it finds them changed ("timing tampered")."""
import ctypes
import importlib.util
import pathlib
import struct
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

ELAPSED = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p)
_keep = []
_armed = [False]


def _mappings(names):
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) > 5 and any(n in parts[5] for n in names):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                yield lo, hi, parts[1]


def _implementations():
    found = set()
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return found, None
    for name in ("cuEventElapsedTime", "cuEventElapsedTime_v2"):
        try:
            found.add(ctypes.cast(getattr(cuda, name), ctypes.c_void_p).value)
        except AttributeError:
            pass
    try:
        pointer = ctypes.c_void_p()
        get = cuda.cuGetProcAddress_v2
        get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p]
        for version in (12000, 12080, 13000):
            if get(b"cuEventElapsedTime", ctypes.byref(pointer), version, 0, None) == 0 and pointer.value:
                found.add(pointer.value)
    except AttributeError:
        pass
    return found, cuda


def _trampoline_slots(address):
    code = ctypes.string_at(address, 64)
    slots = set()
    for i in range(len(code) - 7):
        if code[i:i + 2] == b"\xff\x25":  # jmp [rip + d32]
            slots.add(address + i + 6 + struct.unpack("<i", code[i + 2:i + 6])[0])
        if code[i:i + 3] in (b"\x48\x8b\x05", b"\x4c\x8b\x1d", b"\x48\x8b\x15"):  # mov reg, [rip + d32]
            slots.add(address + i + 7 + struct.unpack("<i", code[i + 3:i + 7])[0])
    return slots


def _arm():
    targets, _ = _implementations()
    writable = [(lo, hi) for lo, hi, perms in _mappings(("libcuda.so", "libcudart.so")) if "w" in perms]
    slots = {s for t in targets for s in _trampoline_slots(t)}
    for lo, hi in writable:
        words = (ctypes.c_uint64 * ((hi - lo) // 8)).from_address(lo)
        for i, value in enumerate(words):
            if value in targets or lo + 8 * i in slots:
                original = ELAPSED(value)

                def wrapper(ms, start, end, original=original):
                    status = original(ms, start, end)
                    if status == 0 and _armed[0]:
                        ms[0] = ms[0] / 1000.0
                    return status

                callback = ELAPSED(wrapper)
                _keep.extend([original, callback])
                words[i] = ctypes.cast(callback, ctypes.c_void_p).value


if torch.cuda.is_available():
    try:
        _arm()
    except Exception:
        pass


def custom_kernel(data):
    _armed[0] = True
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
