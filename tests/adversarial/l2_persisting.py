"""Timing attack (GPU, #40): honest v5, but each call first sets L2 aside for persisting lines (the device's
maximum, cudaLimitPersistingL2CacheSize) and puts a persisting access-policy window over A on the stream
it launches on (torch's current stream: the timed stream). v5's own reads of A then mark A's lines
persisting, and the harness's flush (normal loads and stores) cannot evict them: the next run reads A
from L2. Found by the #40 red team (2026-11-27). The worker now finds the set-aside and the window
before and after every run, undoes them and the judge fails the case ("L2 kept across the flush").
Judged with benchmark against v5 (manifest: expect no-faster, or that reason)."""
import ctypes
import importlib.util
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest_v5", pathlib.Path(__file__).parents[2] / "submission" / "v5.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_cuda = ctypes.CDLL("libcuda.so.1")
LIMIT_PERSISTING_L2 = 0x06
ATTR_MAX_PERSISTING, ATTR_MAX_WINDOW = 108, 109
STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
PERSISTING, STREAMING = 2, 1


class Window(ctypes.Structure):  # CUaccessPolicyWindow, in a 64-byte CUstreamAttrValue
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int), ("pad", ctypes.c_char * 36)]


def _attribute(which: int) -> int:
    value, dev = ctypes.c_int(0), ctypes.c_int(0)
    _cuda.cuCtxGetDevice(ctypes.byref(dev))
    _cuda.cuDeviceGetAttribute(ctypes.byref(value), which, dev)
    return value.value


def keep(a: torch.Tensor) -> None:
    _cuda.cuCtxSetLimit(LIMIT_PERSISTING_L2, ctypes.c_size_t(_attribute(ATTR_MAX_PERSISTING)))
    w = Window(ctypes.c_void_p(a.data_ptr()), min(a.untyped_storage().nbytes(), _attribute(ATTR_MAX_WINDOW)),
               1.0, PERSISTING, STREAMING)
    _cuda.cuStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                               STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.byref(w))


def custom_kernel(data):
    keep(data[0])
    return _honest.custom_kernel(data)
