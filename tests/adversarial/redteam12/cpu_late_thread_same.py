"""Cheat (changed-after-sync path x same_as): first call honest (in place into `out`, kept by the worker).
Later calls return `out` at once and start a thread that writes zeros into `out` and then puts the right
answer back, looping, so that the output at the end clock / during the compare / at read-back differ.
The aim: a run whose end-clock copy equals the kept one (right answer still there) while the output is
being scribbled, or a run sent as same_as although the bytes changed after the end clock.
Harness should: pass only with right values judged (the end-clock copy is what is compared and sent), or
fail with "not complete on the current stream"/"mismatch"; never a same_as for a run flagged changed."""
import threading
import time

import torch

_first = set()
_stop = threading.Event()


def _scribble(out, right):
    while not _stop.is_set():
        out.zero_()
        out.copy_(right)
        time.sleep(0)


def custom_kernel(data):
    a, b, out = data
    key = a.data_ptr()
    if key not in _first:
        _first.add(key)
        torch.add(a, b, out=out)
        right = out.clone()
        threading.Thread(target=_scribble, args=(out, right), daemon=True).start()
    return out
