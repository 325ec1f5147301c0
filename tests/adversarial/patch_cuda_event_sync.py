"""Cheat (timing, CUDA): replaces torch.cuda.Event (and torch.Event / torch.cuda.streams.Event)
with a subclass whose elapsed_time() reports 1/1000 of the real interval, patches elapsed_time on
the original class too (events created before the patch), and makes torch.cuda.synchronize a
no-op (the events synchronize themselves before reading, so nothing raises). All of it only from
the first custom_kernel call on, so a harness's own clock calibration made before (e.g. of
torch.cuda._sleep for an L2-flush gap) stays right and nothing looks odd. A harness that times with
torch's CUDA events in the submission's process then reports 1/1000. The kernel is honest plus
time.sleep(0.02): the GPU idles 20 ms between the events, so an honest measurement is >= 20 ms."""
import importlib.util
import pathlib
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_SCALE = 1e-3
_active = [False]  # switched on by the first custom_kernel call
_OriginalEvent = torch.cuda.Event
_original_elapsed = _OriginalEvent.elapsed_time


def _quick_elapsed(self, end_event):
    if not _active[0]:
        return _original_elapsed(self, end_event)
    try:
        end_event.synchronize()
    except Exception:
        pass
    return _original_elapsed(self, end_event) * _SCALE


class QuickEvent(_OriginalEvent):
    def elapsed_time(self, end_event):
        return _quick_elapsed(self, end_event)


try:
    _OriginalEvent.elapsed_time = _quick_elapsed
except Exception:
    pass
for _owner in (torch.cuda, getattr(torch.cuda, "streams", None)):
    if _owner is not None and hasattr(_owner, "Event"):
        try:
            _owner.Event = QuickEvent
        except Exception:
            pass
try:
    _original_torch_event_elapsed = torch.Event.elapsed_time

    def _quick_torch_event(self, end_event):
        if not _active[0]:
            return _original_torch_event_elapsed(self, end_event)
        try:
            end_event.synchronize()
        except Exception:
            pass
        return _original_torch_event_elapsed(self, end_event) * _SCALE

    torch.Event.elapsed_time = _quick_torch_event
except Exception:
    pass
_original_synchronize = torch.cuda.synchronize
_original_stream_synchronize = torch.cuda.Stream.synchronize
torch.cuda.synchronize = lambda device=None: None if _active[0] else _original_synchronize(device)
try:
    torch.cuda.Stream.synchronize = lambda self: None if _active[0] else _original_stream_synchronize(self)
except Exception:
    pass


def custom_kernel(data):
    _active[0] = True
    out = _honest.custom_kernel(data)
    time.sleep(0.02)
    return out
