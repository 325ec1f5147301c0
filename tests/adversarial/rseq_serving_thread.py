"""Probe (must stay shut): with an rseq area registered for the thread that serves the harness's
requests (glibc registers one for every thread it starts), native code of the submission's could
write into it a critical-section descriptor laid over the harness's snapshot code; preempted there,
that thread would be sent to the submission's abort handler: its code running after the end clock,
no signal needed (a sibling of fault_lazy_output). Asks the kernel, from custom_kernel (the serving
thread), to register an area: EPERM (refused) or ENOSYS (no rseq here) and it returns the honest
result; a registration, or EINVAL / EBUSY (this thread still has an area), and it returns zeros, so
the case fails."""
import ctypes
import importlib.util
import pathlib
import platform

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

SYS_RSEQ, RSEQ_SIG = {"x86_64": (334, 0x53053053), "aarch64": (293, 0xD428BC00)}.get(platform.machine(), (None, 0))
EPERM, ENOSYS = 1, 38
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
_area = ctypes.create_string_buffer(64)  # struct rseq: 32 bytes, 32-byte aligned
_address = (ctypes.addressof(_area) + 31) // 32 * 32
_verdict = []


def _thread_has_or_takes_an_area() -> bool:
    if SYS_RSEQ is None:
        return False
    r = libc.syscall(ctypes.c_long(SYS_RSEQ), ctypes.c_void_p(_address), ctypes.c_uint32(32), ctypes.c_int(0),
                     ctypes.c_uint32(RSEQ_SIG))
    if r == 0:
        libc.syscall(ctypes.c_long(SYS_RSEQ), ctypes.c_void_p(_address), ctypes.c_uint32(32), ctypes.c_int(1),
                     ctypes.c_uint32(RSEQ_SIG))
        return True
    return ctypes.get_errno() not in (EPERM, ENOSYS)


def custom_kernel(data):
    if not _verdict:
        _verdict.append(_thread_has_or_takes_an_area())
        if _verdict[0]:
            print("rseq_serving_thread: the serving thread has or took an rseq area")
    if _verdict[0]:
        return torch.zeros_like(data[6])
    return _honest.custom_kernel(data)
