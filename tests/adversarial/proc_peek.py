"""Cheat (reading other runs through /proc, red team round 4's read_probe): every process's command
line is world-readable on a plain /proc, so a worker learns other judges' candidate paths, their
verdict files and options. Here it looks for a judge (a Python running `-m eval`: its own, another
judge, a batch) outside its own session whose command line it can read. Returns zeros if it sees
one, else the honest answer (expected where the worker starts as root: /proc mounted again with
hidepid in its own mount namespace; judges are non-dumpable, so even a worker that keeps root, with
its capabilities gone, does not see them; other processes of root stay visible to such a worker:
README, "What stays open")."""
import importlib.util
import os
import pathlib

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _others() -> list:
    mine, seen = os.getsid(0), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(pid)) == mine:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                args = handle.read(4096).split(b"\0")
        except OSError:
            continue
        python = os.path.basename(args[0].decode(errors="replace")).startswith("python")
        if python and any(a == b"-m" and b == b"eval" for a, b in zip(args, args[1:])):
            seen.append(pid)
    return seen


SEEN = _others()


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    return out.zero_() if SEEN else out
