"""Cheat (slowing a rival, red team round 8): where workers keep root (a Python the workers' own
uids cannot read), every worker and every judge is root, and the kernel lets one root process
renice another, change its scheduling class or CPUs, or move its pages without any capability.
A rival's threads at nice 19 / SCHED_IDLE on one CPU ran at half speed. Here the probe is harmless:
it sets the parent's (the judge's) own priority and CPU set to what they already are; the kernel
checks permission first (TARGET: a neighbour's pid, set by tests/test_isolation.py, which starts a
root process without capabilities as a worker that keeps root is; the judge keeps its capabilities,
and a process without them cannot reschedule one that has them). Expected: refused (seccomp where root is kept, the kernel where the uid is
dropped), so the honest result comes back; had any call been allowed, the output is zeros."""
import importlib.util
import os
import pathlib

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
TARGET = None  # None: the judge


def _reached(target: int) -> list[str]:
    got = []
    for name, call in (("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, target, os.getpriority(os.PRIO_PROCESS, target))),
                       ("sched_setaffinity", lambda: os.sched_setaffinity(target, os.sched_getaffinity(target))),
                       ("sched_setscheduler", lambda: os.sched_setscheduler(target, os.sched_getscheduler(target),
                                                                             os.sched_param(0)))):
        try:
            call()
            got.append(name)
        except OSError:
            pass
    return got


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    reached = _reached(TARGET or os.getppid())
    if reached:
        print("reached the judge with", reached)
        out.zero_()
    return out
