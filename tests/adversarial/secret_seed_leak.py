"""Cheat (timing + secret): recovers the secret seed and predicts every input. The harness removes
POPCORN_SEED from its own os.environ before starting the worker, but /proc/<ppid>/environ still
shows the environment the parent was started with (and /proc/<ppid>/cmdline its arguments). With
it, the public case seeds from task.yml / shapes.yaml (read next to the submission) and the
leaderboard's Cantor pairing, the kernel precomputes, on the first call for a shape, the inputs of
the whole schedule (seed, seed + 13*i, this harness's +1_000_003/+2_000_003, +42*i batched) through
reference.generate_input and caches their results under a cheap fingerprint. Later calls copy the
cached result; on a miss the kernel is honest plus time.sleep(0.02) (>= 20 ms)."""
import importlib.util
import os
import pathlib
import re
import time

import torch

_ROOT = pathlib.Path(__file__).parents[2]
_spec = importlib.util.spec_from_file_location("_honest", _ROOT / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_cache = {}
_planned = set()
_AHEAD = 1000  # the leaderboard mode's most timed runs per case


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _secret():
    sources = [_read(f"/proc/{os.getppid()}/environ"), _read("/proc/self/environ"),
               _read(f"/proc/{os.getppid()}/cmdline")]
    for pid in (os.getppid(),):
        try:
            status = _read(f"/proc/{pid}/status").decode()
            grandparent = int(re.search(r"PPid:\s*(\d+)", status).group(1))
            sources.append(_read(f"/proc/{grandparent}/environ"))
        except Exception:
            pass
    for blob in sources:
        found = re.search(rb"POPCORN_SEED=(-?\d+)", blob)
        if found:
            return int(found.group(1))
    return None


_CASE = re.compile(r'"?m"?:\s*(\d+),\s*"?k"?:\s*(\d+),\s*"?l"?:\s*(\d+),\s*"?seed"?:\s*(-?\d+)')


def _public_seeds(m, k, l):
    """The seeds of the published cases with this shape (task.yml's tests/benchmarks, shapes.yaml)."""
    seeds = set()
    for name in ("task.yml", "shapes.yaml"):
        text = _read(_ROOT / name).decode(errors="replace")
        seeds.update(int(s) for cm, ck, cl, s in _CASE.findall(text) if (int(cm), int(ck), int(cl)) == (m, k, l))
    return seeds or {1111}


def _combine(a, b):
    return int(a + (a + b) * (a + b + 1) // 2)


def _fingerprint(data):
    a = data[0].view(torch.uint8)
    return tuple(a.shape), str(a.device), tuple(a[0, :64, 0].tolist())


def _plan(m, k, l):
    if (m, k, l) in _planned:
        return
    _planned.add((m, k, l))
    import reference

    secret = _secret()
    bases = {_combine(s, secret) if secret is not None else s for s in _public_seeds(m, k, l)}
    for base in bases:
        schedule = [base + 13 * i for i in range(_AHEAD + 1)] + [base + 1_000_003, base + 2_000_003]
        schedule += [base + 42 * i for i in range(1, 51)]
        for seed in schedule:
            try:
                data = reference.generate_input(m=m, k=k, l=l, seed=seed)
                c = data[-1]
                _cache[_fingerprint(data)] = _honest.custom_kernel(tuple(data[:-1]) + (torch.empty_like(c),))
            except Exception:
                break


def custom_kernel(data):
    c = data[-1]
    cached = _cache.get(_fingerprint(data))
    if cached is not None:
        c.copy_(cached)
        return c
    a = data[0]
    try:
        _plan(a.shape[0], a.shape[1] * 2, a.shape[2])
    except Exception:
        pass
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
