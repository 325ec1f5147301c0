"""Honest (the probe run after tests/adversarial/persist_home_pth.py): computes the right answer,
unless anything that file plants is visible here (its .pth or sitecustomize ran in this process, or
its marker files are in this worker's HOME, TMPDIR, working directory or the folders above them):
then it returns zeros, so a trace of the earlier run fails this run."""
import importlib.util
import os
import pathlib
import sys

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

MARK = "zzz_nvfp4_forged_persist"


def _read(path):
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""


def _traces():
    found = ["sys attribute"] if getattr(sys, "_nvfp4_forged_persist", False) else []
    home = pathlib.Path(os.environ.get("HOME") or "/nonexistent")
    here = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", os.getcwd())).resolve()
    places = {home, pathlib.Path.cwd(), pathlib.Path(os.environ.get("TMPDIR", "/tmp")), pathlib.Path("/tmp"),
              pathlib.Path("/var/tmp"), *here.parents}
    for folder in places:
        if (folder / MARK).exists():
            found.append(str(folder / MARK))
        for name in ("sitecustomize.py", "usercustomize.py", "torch.py", "eval.py"):
            if "_nvfp4_forged_persist" in _read(folder / name):
                found.append(str(folder / name))
    return found


def custom_kernel(data):
    if _traces():
        return torch.zeros_like(data[-1])
    return _honest.custom_kernel(data)
