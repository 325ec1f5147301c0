"""Probe (variant of fault_lazy_output with no signal at all; must stay refused): a userfaultfd
would let the harness's read of an output over a registered range wait, page after page, until a
thread or process of the submission's fills each page in (UFFDIO_COPY) - after the end clock. Tries
both ways to get one: the system call (with UFFD_USER_MODE_ONLY, all an unprivileged process gets;
without it as well) and /dev/userfaultfd's USERFAULTFD_IOC_NEW ioctl (root can open the device).
Should either hand it a userfaultfd, it returns zeros, so the case fails: the refusal no longer
holds. Refused both ways, it returns the honest result and must pass."""
import ctypes
import fcntl
import importlib.util
import os
import pathlib
import platform

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

SYS_USERFAULTFD = {"x86_64": 323, "aarch64": 282}.get(platform.machine())
USERFAULTFD_IOC_NEW, UFFD_USER_MODE_ONLY = 0xAA00, 1
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def _got_one() -> list[str]:
    got = []
    if SYS_USERFAULTFD is not None:
        for flags in (os.O_CLOEXEC | UFFD_USER_MODE_ONLY, os.O_CLOEXEC):
            fd = libc.syscall(SYS_USERFAULTFD, ctypes.c_int(flags))
            if fd >= 0:
                os.close(fd)
                got.append(f"userfaultfd({flags:#x})")
    try:
        dev = os.open("/dev/userfaultfd", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return got  # no device, or not ours to open: nothing to refuse there
    try:
        fd = fcntl.ioctl(dev, USERFAULTFD_IOC_NEW, os.O_CLOEXEC)
        os.close(fd)
        got.append("USERFAULTFD_IOC_NEW")
    except OSError:
        pass  # refused
    finally:
        os.close(dev)
    return got


_LANDED = _got_one()  # imported after the worker's memory filter is on
if _LANDED:
    print("userfaultfd_output: got", _LANDED)


def custom_kernel(data):
    if _LANDED:
        return torch.zeros_like(data[6])
    return _honest.custom_kernel(data)
