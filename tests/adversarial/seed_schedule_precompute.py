"""Cheat (timing): predicts every future input. On the first call for a case it reads the harness's
input maker and seed from the caller frames (a callable local named make_input/make/make_data/gen
and an int local named seed); without them it falls back to reference.generate_input with the
shape of the data and task.yml's public seed. It then assumes the leaderboard's schedule (seed +=
13 per timed run; this harness's +1_000_003 / +2_000_003 re-calls; +42 per batched input),
makes each of those inputs itself, solves them all (untimed, inside the first call) and caches the
results under a cheap fingerprint (shape + first 64 bytes of a). Later calls only copy the cached
result; on a miss the kernel is honest plus time.sleep(0.02) (>= 20 ms)."""
import importlib.util
import pathlib
import sys
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_cache = {}
_planned = set()
_PUBLIC_SEED = 1111
_AHEAD = 1000  # the leaderboard mode's most timed runs per case


def _fingerprint(data):
    a = data[0].view(torch.uint8)
    return tuple(a.shape), str(a.device), tuple(a[0, :64, 0].tolist())


def _maker_and_seed():
    depth = 1
    while True:
        try:
            frame = sys._getframe(depth)
        except ValueError:
            return None, None
        local = frame.f_locals
        maker = next((local[n] for n in ("make_input", "make", "make_data", "gen") if callable(local.get(n))), None)
        seed = local.get("seed")
        if maker is not None and isinstance(seed, int):
            return maker, seed
        depth += 1


def _schedule(seed):
    seeds = [seed + 13 * i for i in range(_AHEAD + 1)]
    seeds += [seed + 1_000_003, seed + 2_000_003]
    seeds += [seed + 42 * i for i in range(1, 51)]
    return seeds


def _plan(data):
    maker, seed = _maker_and_seed()
    a = data[0]
    m, k, l = a.shape[0], a.shape[1] * 2, a.shape[2]
    if maker is None:
        import reference

        def maker(s, _m=m, _k=k, _l=l):
            return reference.generate_input(m=_m, k=_k, l=_l, seed=s)

        seed = _PUBLIC_SEED
    key = (m, k, l, seed)
    if key in _planned:
        return
    _planned.add(key)
    for s in _schedule(seed):
        try:
            future = maker(s)
            c = future[-1]
            _cache[_fingerprint(future)] = _honest.custom_kernel(tuple(future[:-1]) + (torch.empty_like(c),))
        except Exception:
            break


def custom_kernel(data):
    c = data[-1]
    cached = _cache.get(_fingerprint(data))
    if cached is not None:
        c.copy_(cached)
        return c
    try:
        _plan(data)
    except Exception:
        pass
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
