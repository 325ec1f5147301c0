"""Cheat (variant of fault_lazy_output, SIGBUS instead of SIGSEGV): the output is a plain
torch.Tensor over a MAP_SHARED mapping of a memfd that is truncated to 0 bytes right after mapping,
so every read of it raises SIGBUS (a page past the end of its file; the protection says readable).
The SIGBUS handler (a ctypes callback in the faulting thread) gives the file its size back, computes
the right answer from the inputs as they are then (canaries included) and lets the harness's copy
of the output resume: all the work after the end clock. Caught like fault_lazy_output: the kernel's
read test before the copy answers EFAULT for such a page, no signal."""
import ctypes
import importlib.util
import os
import pathlib
import signal

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

PAGE = 4096
PROT_RW, MAP_SHARED = 3, 0x01
SIGBUS = int(signal.SIGBUS)
SA_SIGINFO, SA_NODEFER = 4, 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class SigAction(ctypes.Structure):  # glibc's struct sigaction (x86_64 and aarch64)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint8 * 128), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_pending = {}  # mapping address -> (size, memfd, inputs, output view)
_done = []     # (address, size, memfd) filled or given up, released once old enough
_old = SigAction()


def _fill(view, data):
    a, b, sfa, sfb = data[:4]
    for li in range(view.shape[2]):
        mat = _honest._dequant(a[:, :, li], sfa[:, :, li])
        vec = _honest._dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
        view[:, 0, li] = (mat @ vec).to(torch.float16)


def _on_bus(sig, info, context):
    address = ctypes.c_void_p.from_address(info + 16).value or 0  # siginfo_t.si_addr
    for base, (size, fd, data, view) in list(_pending.items()):
        if base <= address < base + size:
            os.ftruncate(fd, size)  # the page is back (zeros), writable through the shared mapping
            _fill(view, data)
            del _pending[base]
            _done.append((base, size, fd))
            return
    libc.sigaction(SIGBUS, ctypes.byref(_old), None)


_handler = HANDLER(_on_bus)
_action = SigAction()
_action.handler = ctypes.cast(_handler, ctypes.c_void_p).value
_action.flags = SA_SIGINFO | SA_NODEFER
libc.sigaction(SIGBUS, ctypes.byref(_action), ctypes.byref(_old))


def _release(base, size, fd):
    libc.munmap(base, size)
    os.close(fd)


def custom_kernel(data):
    c = data[6]
    size = (c.numel() * c.element_size() + PAGE - 1) // PAGE * PAGE
    fd = os.memfd_create("out")
    os.ftruncate(fd, size)
    base = libc.mmap(None, size, PROT_RW, MAP_SHARED, fd, 0)
    os.ftruncate(fd, 0)  # every page of the mapping is now past the end of the file: SIGBUS when read
    flat = torch.frombuffer((ctypes.c_uint8 * size).from_address(base), dtype=c.dtype, count=c.numel())
    view = flat.as_strided(tuple(c.shape), c.stride())
    _pending[base] = (size, fd, data, view)
    while len(_pending) > 64:  # never read (the harness refused it)
        old = next(iter(_pending))
        _done.append((old, _pending[old][0], _pending.pop(old)[1]))
    while len(_done) > 64:
        _release(*_done.pop(0))
    return view
