"""Cheat (variant of fault_lazy_output over memory torch allocated): the output is a view into a
tensor made by torch's own CPU allocator (so a check of the storage's allocator or deleter would
pass it), placed on whole pages inside that allocation, which are then made PROT_NONE with
mprotect. A SIGSEGV handler (a ctypes callback in the faulting thread) makes them readable again,
computes the right answer from the inputs as they are then (canaries included) and lets the
harness's copy resume: all the work after the end clock. Caught like fault_lazy_output, by the
kernel's read test before the copy, whoever allocated the pages."""
import ctypes
import importlib.util
import pathlib
import signal

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

PAGE = 4096
PROT_NONE, PROT_RW = 0, 3
SIGSEGV, SA_SIGINFO, SA_NODEFER = int(signal.SIGSEGV), 4, 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


class SigAction(ctypes.Structure):  # glibc's struct sigaction (x86_64 and aarch64)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint8 * 128), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_pending = {}  # first protected page -> (bytes protected, inputs, output view)
_keep = []     # every allocation stays alive: torch never frees (or reuses) a protected page
_old = SigAction()


def _fill(view, data):
    a, b, sfa, sfb = data[:4]
    for li in range(view.shape[2]):
        mat = _honest._dequant(a[:, :, li], sfa[:, :, li])
        vec = _honest._dequant(b[0:1, :, li], sfb[0:1, :, li])[0]
        view[:, 0, li] = (mat @ vec).to(torch.float16)


def _on_fault(sig, info, context):
    address = ctypes.c_void_p.from_address(info + 16).value or 0  # siginfo_t.si_addr
    for base, (size, data, view) in list(_pending.items()):
        if base <= address < base + size:
            libc.mprotect(base, size, PROT_RW)
            _fill(view, data)
            del _pending[base]
            return
    libc.sigaction(SIGSEGV, ctypes.byref(_old), None)


_handler = HANDLER(_on_fault)
_action = SigAction()
_action.handler = ctypes.cast(_handler, ctypes.c_void_p).value
_action.flags = SA_SIGINFO | SA_NODEFER
libc.sigaction(SIGSEGV, ctypes.byref(_action), ctypes.byref(_old))


def custom_kernel(data):
    c = data[6]
    nbytes = c.numel() * c.element_size()
    size = (nbytes + PAGE - 1) // PAGE * PAGE
    block = torch.empty(size + 3 * PAGE, dtype=torch.uint8)  # torch's CPU allocator
    start = (block.data_ptr() + 64 + PAGE - 1) // PAGE * PAGE  # whole pages, clear of malloc's bookkeeping
    offset = start - block.data_ptr()
    flat = block[offset:offset + nbytes].view(c.dtype)
    view = flat.as_strided(tuple(c.shape), c.stride())
    libc.mprotect(start, size, PROT_NONE)
    _pending[start] = (size, data, view)
    _keep.append(block)
    while len(_pending) > 256:  # never read (the harness refused it): forget the inputs
        _pending.pop(next(iter(_pending)))
    return view
