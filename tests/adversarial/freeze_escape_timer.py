"""Attack (red team round 11, compare): compare stops the side that is not being timed, and a stop
is only a signal. A process continues itself with its own POSIX timer sending it SIGCONT (with a
handler installed; on 6.x kernels a timer's SIGCONT whose action is the default is dropped): each
stop holds it 20 ms at most, and it takes a CPU from the rival while the rival is timed (the red
team's identical kernel looked 0.31x as slow). Here a child of the worker does that and spins for
LIFETIME_S at most (it dies with the worker too), and the answer is the honest one. Expected in
compare: the judge sees the stopped side's processes ran on a CPU while stopped and voids the
comparison with that reason (tests/test_isolation.py); in test, a pass."""
import ctypes
import importlib.util
import os
import pathlib
import signal
import time

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
LIFETIME_S = 120


def _spin_and_wake_yourself():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the worker
    signal.signal(signal.SIGCONT, lambda *_: None)
    event = (ctypes.c_char * 64)()  # struct sigevent: sigval (8), signo (4), notify (4: SIGEV_SIGNAL 0)
    ctypes.memmove(ctypes.addressof(event) + 8, ctypes.byref(ctypes.c_int(signal.SIGCONT)), 4)
    timer = ctypes.c_void_p()
    if libc.timer_create(1, event, ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC
        os._exit(0)
    every = (ctypes.c_long * 4)(0, 20_000_000, 0, 20_000_000)  # struct itimerspec: 20 ms, again and again
    libc.timer_settime(timer, 0, every, None)
    end = time.monotonic() + LIFETIME_S
    while time.monotonic() < end:
        pass
    os._exit(0)


if os.fork() == 0:
    _spin_and_wake_yourself()


def custom_kernel(data):
    return _honest.custom_kernel(data)
