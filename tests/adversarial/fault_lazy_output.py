"""Cheat (CPU path; red team round 3): returns at once, with no work done, a plain torch.Tensor made
with torch.frombuffer over an anonymous PROT_NONE mapping. A SIGSEGV handler installed through
libc's sigaction (a ctypes callback: it runs in the faulting thread, the one that holds the GIL)
waits for the harness's copy of the output after the end clock: on the fault it makes the page
readable, computes the right answer from the inputs as they are then (canaries included) and lets
the copy resume. The work happens after the clock; the time reported is that of returning a view.
Caught when the harness reads CPU outputs with signals held back and only after the kernel has read
them without a fault: "output memory faulted when read after the run"."""
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
MAP_PRIVATE_ANONYMOUS = 0x02 | 0x20
SIGSEGV, SA_SIGINFO, SA_NODEFER = int(signal.SIGSEGV), 4, 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class SigAction(ctypes.Structure):  # glibc's struct sigaction (x86_64 and aarch64)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint8 * 128), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_pending = {}  # mapping address -> (size, inputs, output view)
_done = []     # mappings already filled, unmapped once old enough (every output is read by then)
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
            _done.append((base, size))
            return
    libc.sigaction(SIGSEGV, ctypes.byref(_old), None)  # not ours: a real crash, as it would have been


_handler = HANDLER(_on_fault)
_action = SigAction()
_action.handler = ctypes.cast(_handler, ctypes.c_void_p).value
_action.flags = SA_SIGINFO | SA_NODEFER
libc.sigaction(SIGSEGV, ctypes.byref(_action), ctypes.byref(_old))


def custom_kernel(data):
    c = data[6]
    size = (c.numel() * c.element_size() + PAGE - 1) // PAGE * PAGE
    base = libc.mmap(None, size, PROT_NONE, MAP_PRIVATE_ANONYMOUS, -1, 0)
    flat = torch.frombuffer((ctypes.c_uint8 * size).from_address(base), dtype=c.dtype, count=c.numel())
    view = flat.as_strided(tuple(c.shape), c.stride())
    _pending[base] = (size, data, view)
    while len(_pending) > 256:  # never read (the harness refused it): let it go
        old = next(iter(_pending))
        _done.append((old, _pending.pop(old)[0]))
    while len(_done) > 256:
        libc.munmap(*_done.pop(0))
    return view
