"""Attack (red team round 11, compare): compare stops the side that is not being timed, and a stop
is only a signal. A process continues itself with its own POSIX timer sending it SIGCONT (with a
handler installed; on 6.x kernels a timer's SIGCONT whose action is the default is dropped): each
stop holds it 10 ms at most, and it takes a CPU from the rival while the rival is timed (the red
team's identical kernel looked 0.31x as slow). A periodic timer is not enough on a busy machine: a
stop throws away a SIGCONT still pending (its process was waiting for a CPU), and a periodic POSIX
timer is re-armed only when its signal is taken, so it never fires again (seen on 6.18 with the
cores loaded: 0 ms run in every later stop). So the child keeps many one-shot timers, one every
10 ms for 2 s ahead, and moves each one that has fired, or was thrown away, to the back. Here a child of the worker does that and spins for
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


TIMERS, STEP_NS = 200, 10_000_000


def _now_ns(libc) -> int:
    spec = (ctypes.c_long * 2)()
    libc.clock_gettime(1, spec)  # CLOCK_MONOTONIC
    return spec[0] * 1_000_000_000 + spec[1]


def _arm(libc, timer, at_ns: int) -> None:
    when = (ctypes.c_long * 4)(0, 0, at_ns // 1_000_000_000, at_ns % 1_000_000_000)  # struct itimerspec: once
    libc.timer_settime(timer, 1, when, None)  # TIMER_ABSTIME


def _spin_and_wake_yourself():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the worker
    signal.signal(signal.SIGCONT, lambda *_: None)
    event = (ctypes.c_char * 64)()  # struct sigevent: sigval (8), signo (4), notify (4: SIGEV_SIGNAL 0)
    ctypes.memmove(ctypes.addressof(event) + 8, ctypes.byref(ctypes.c_int(signal.SIGCONT)), 4)
    timers = []
    for _ in range(TIMERS):
        timer = ctypes.c_void_p()
        if libc.timer_create(1, event, ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC
            break
        timers.append(timer)
    if not timers:
        os._exit(0)
    last = _now_ns(libc)
    for timer in timers:
        last += STEP_NS
        _arm(libc, timer, last)
    left = (ctypes.c_long * 4)()
    end = time.monotonic() + LIFETIME_S
    while time.monotonic() < end:
        for timer in timers:
            libc.timer_gettime(timer, left)
            if left[2] == 0 and left[3] == 0:  # fired (or its signal thrown away): to the back
                last = max(last, _now_ns(libc)) + STEP_NS
                _arm(libc, timer, last)
    os._exit(0)


if os.fork() == 0:
    _spin_and_wake_yourself()


def custom_kernel(data):
    return _honest.custom_kernel(data)
