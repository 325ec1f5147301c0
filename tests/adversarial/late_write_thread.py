"""Cheat (work after return): returns c at once and lets a background thread write the right answer
into it 5 ms later. A timer stopped when custom_kernel returns sees almost nothing; a check made a
while later (after other work, a sync, a sleep) sees the right values."""
import importlib.util
import pathlib
import threading
import time

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _finish_later(data):
    time.sleep(0.005)
    _honest.custom_kernel(data)  # writes c in place


def custom_kernel(data):
    threading.Thread(target=_finish_later, args=(tuple(data),), daemon=True).start()
    return data[-1]
