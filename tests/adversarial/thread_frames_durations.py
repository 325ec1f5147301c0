"""Cheat (timing): honest result, but a daemon thread started at import keeps walking every other
thread's stack through sys._current_frames() and divides by 10,000 every float in lists named
durations/samples/times/timings in any frame it finds (the harness's timing loop), so the
reported mean collapses. The kernel is honest plus time.sleep(0.02) (>= 20 ms if untouched);
the sleep also hands the thread the GIL while the harness's frames are live."""
import importlib.util
import pathlib
import sys
import threading
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_NAMES = ("durations", "samples", "times", "timings")


def _scrub_forever():
    me = threading.get_ident()
    while True:
        try:
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                while frame is not None:
                    local = frame.f_locals
                    for name in _NAMES:
                        seq = local.get(name)
                        if isinstance(seq, list):
                            for i, v in enumerate(seq):
                                if isinstance(v, float) and v > 5_000.0:
                                    seq[i] = v / 10_000.0
                    frame = frame.f_back
        except Exception:
            pass
        time.sleep(0.0005)


threading.Thread(target=_scrub_forever, name="telemetry", daemon=True).start()


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
