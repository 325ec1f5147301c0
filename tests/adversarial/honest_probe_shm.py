"""Honest (the probe run after tests/adversarial/shm_plant.py): computes the right answer, unless a
file that shm_plant.py leaves in /dev/shm is visible here: then it returns zeros, so a trace of the
earlier run fails this run."""
import importlib.util
import os
import pathlib

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

NAMES = ("zzz_nvfp4_shm_plant", "zzz_nvfp4_shm_plant_ballast", "sem.zzz_nvfp4_shm_plant")
SEEN = [name for name in NAMES if os.path.exists(os.path.join("/dev/shm", name))]


def custom_kernel(data):
    if SEEN:
        return torch.zeros_like(data[-1])
    return _honest.custom_kernel(data)
