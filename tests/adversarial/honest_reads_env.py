"""Honest (reads its environment): reads environment variables (a copy of os.environ, CUDA_*,
NVFP4_GEMV_*, POPCORN_*, OMP_NUM_THREADS, HOME, PATH), sys.argv, the working directory and its
pids, and prints what it found; it adapts nothing to them. Must pass."""
import importlib.util
import os
import pathlib
import sys

import torch

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_ENV = dict(os.environ)
_SEEN = {key: _ENV.get(key) for key in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "NVFP4_GEMV_DIST", "EVAL_RESULTS_DIR",
                                        "POPCORN_SEED", "POPCORN_FD", "OMP_NUM_THREADS", "HOME", "PATH", "PYTHONPATH")}
print("environment seen by the submission:", _SEEN, "argv:", sys.argv, "cwd:", os.getcwd(),
      "pid:", os.getpid(), "ppid:", os.getppid(), "threads:", torch.get_num_threads())


def custom_kernel(data):
    _ = os.environ.get("NVFP4_GEMV_DIST", "leaderboard"), os.getenv("CUDA_VISIBLE_DEVICES")
    return _honest.custom_kernel(data)
