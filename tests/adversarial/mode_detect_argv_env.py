"""Cheat (mode detection by process context): reads sys.argv, os.environ and the parent's (and
grandparent's) /proc/<pid>/cmdline for words that say timing (benchmark, leaderboard, bench,
timed). When it believes it is being timed, it returns zeros without any work whenever it is handed
an input tuple it has already seen (a timing loop reuses one input; the correctness call gets a
fresh copy); every other call is honest plus time.sleep(0.02) (>= 20 ms)."""
import importlib.util
import os
import pathlib
import re
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_WORDS = (b"benchmark", b"leaderboard", b"bench", b"timed", b"ranked")


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _context():
    blobs = [" ".join(sys.argv).encode(), "\0".join(f"{k}={v}" for k, v in os.environ.items()).encode()]
    pid = os.getpid()
    for _ in range(3):
        status = _read(f"/proc/{pid}/status").decode(errors="replace")
        found = re.search(r"PPid:\s*(\d+)", status)
        if not found or int(found.group(1)) <= 1:
            break
        pid = int(found.group(1))
        blobs.append(_read(f"/proc/{pid}/cmdline").replace(b"\0", b" "))
    return b" ".join(blobs).lower()


_TIMED = any(word in _context() for word in _WORDS)
_seen = {}


def custom_kernel(data):
    identity = (id(data), data[0].data_ptr())
    repeated = _seen.get(id(data)) == identity
    _seen[id(data)] = identity
    if len(_seen) > 4096:
        _seen.pop(next(iter(_seen)))
    if _TIMED and repeated:
        return torch.zeros_like(data[-1])
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
