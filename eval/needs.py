""""Cannot run here" versus "fail": what a run needs that this machine lacks.

A submission (or a problem's reference) that needs a third-party package that is not installed, or
hardware this machine does not have (a CUDA GPU for a CUDA-only reference or kernel), has not
failed: it was not judged. Such a run ends with `cannot run here: needs ...` (RunRecord.cannot_run,
exit code EXIT_CANNOT_RUN of `test`/`benchmark`, "cannot run" in `conform`), never a failing
verdict. Everything is read from the error text itself; nothing here names a problem folder.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

PREFIX = "cannot run here: "
EXIT_CANNOT_RUN = 113  # test/benchmark/leaderboard: not judged on this machine (0 pass, 112 fail, 2 usage)

# the distribution to install where its import name differs (pip install <name>)
PIP_NAMES = {"cutlass": "nvidia-cutlass-dsl", "cuda": "cuda-python", "cupy": "cupy-cuda12x", "sklearn": "scikit-learn",
             "yaml": "pyyaml", "flash_attn": "flash-attn", "tilelang": "tilelang", "thunderkittens": "thunderkittens"}

_MISSING = re.compile(r"(?:ModuleNotFoundError|ImportError)?:?\s*No module named '([A-Za-z0-9_.]+)'")
# what torch, triton and the CUDA toolchain say where there is no CUDA GPU (or no driver)
_NO_CUDA = re.compile(
    r"Torch not compiled with CUDA enabled|Cannot get CUDA generator without ATen_cuda|Found no NVIDIA driver"
    r"|CUDA is not available|no CUDA GPUs are available|0 active drivers|No CUDA GPUs are available"
    r"|CUDA driver initialization failed|cudaErrorNoDevice|libcuda\.so[^ ]* ?: cannot open|PyTorch splits its backend"
    r"|Cannot access accelerator device when none is available|has no CUDA GPU|No CUDA GPU available", re.I)
# a CUDA build (torch.utils.cpp_extension.load_inline, nvcc) without the toolkit
_NO_TOOLKIT = re.compile(r"CUDA_HOME environment variable is not set|nvcc: (?:command )?not found|No such file or directory: '[^']*nvcc'")
# a GPU newer than this one (Blackwell-only instructions, FP4 GEMMs) where nothing emulates it
_NEWER_GPU = re.compile(r"requires? (?:an? )?(?:sm_?10\d|Blackwell|B200)|sm_?100a? (?:is )?(?:required|not supported)"
                        r"|no kernel image is available for execution on the device", re.I)

# a C++ header of the contest's environment this machine lacks (NVIDIA CUTLASS, CuTe among them): nvcc's
# words, or the line --emulate-blackwell gives a failed build (eval/worker/emulation.py build_failure).
# Only those libraries: a missing header of the submission's own is its fault
_ENV_HEADER = re.compile(r"fatal error: (?:[^\s:]*/)?(?:cutlass|cute)/[^\s:]+: No such file or directory"
                         r"|it includes (?:[^\s:]*/)?(?:cutlass|cute)/\S+?(?: \(line \d+\))?, which is not installed here")


class CannotRunHere(Exception):
    """Raised where a run needs what this machine lacks; str() is what it needs ("a CUDA GPU")."""

    @property
    def needs(self) -> str:
        return str(self)

    @property
    def message(self) -> str:
        return PREFIX + "needs " + str(self)


def missing_package(text: str, beside: Path | None = None) -> str | None:
    """"helion (pip install helion)" where text reports a module that is not installed and is not
    the submission's own (a file or folder beside it, or the standard library's); else None."""
    found = _MISSING.search(text or "")
    if not found:
        return None
    top = found[1].split(".")[0]
    if top in sys.stdlib_module_names or top in ("submission", "reference", "task", "utils", "eval"):
        return None
    if beside is not None and ((beside / f"{top}.py").exists() or (beside / top).is_dir()):
        return None  # the solution's own module, missing from its upload: its fault
    return f"{top} (pip install {PIP_NAMES.get(top, top.replace('_', '-'))})"


def needs_hardware(text: str, cuda_here: bool) -> str | None:
    """"a CUDA GPU" / "a newer GPU (...)" where text says the run needs hardware this machine lacks."""
    if not cuda_here and (_NO_CUDA.search(text or "") or _NO_TOOLKIT.search(text or "")):
        return "a CUDA GPU"
    if _NO_TOOLKIT.search(text or ""):
        return "the CUDA toolkit (nvcc; set CUDA_HOME)"
    if cuda_here and _NEWER_GPU.search(text or ""):
        return "a newer GPU (Blackwell, sm_100) or --emulate-blackwell where the call is emulated"
    return None


def what_is_missing(text: str, cuda_here: bool, beside: Path | None = None) -> str | None:
    """What the run needs that this machine lacks, read from an error's text; None: a real failure."""
    return missing_package(text, beside) or needs_hardware(text, cuda_here) or environment_header(text)


def environment_header(text: str) -> str | None:
    """"CUTLASS's C++ headers (...)" where a build failed for want of one (the contest's image has them)."""
    if _ENV_HEADER.search(text or ""):
        return "CUTLASS's C++ headers (.ci/stage-cutlass.sh stages them in .cutlass/)"
    return None
