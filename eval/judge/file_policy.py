"""What a worker may read and write: the path lists the judge hands the worker's sandbox
(eval/worker/sandbox.py applies them with Landlock). Readable: what a leaderboard run could read
(_readable_paths: system folders, Python, CUDA, the harness, the problem's files, its own submission
file; never another candidate's source, a verdict file or results/; EVAL_WORKER_READ adds paths).
Writable: the worker's own folders (given by the caller) and the device files of _device_paths.

Owns: the lists and the rules that make them (SYSTEM_FOLDERS, HARNESS_FOLDERS, SECRET_FILES,
PROBLEM_FILES, _around, _beneath). Judge side, pure: it reads the file system and the environment
and starts no process but `git ls-files`; it may not start, signal or talk to a worker
(eval/judge/worker_start.py, lifecycle.py, wire.py do) and imports nothing of eval/judge.
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from eval import problem_folder
from eval.cases import ROOT


def _readable_by_others(path: Path) -> bool:
    path = Path(path).resolve()
    for parent in [*reversed(path.parents), path]:
        try:
            mode = parent.stat().st_mode
        except OSError:
            return False
        if parent.is_dir() and not mode & 0o001:
            return False
    return bool(path.stat().st_mode & 0o004) if path.is_file() else True


def _user_paths() -> list[str]:
    """The judge's PYTHONPATH entries (e.g. a staged CuTe DSL), passed to the worker explicitly."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
SHARED_MEMORY = "/dev/shm"


def _device_paths() -> list[str]:
    """What of /dev a worker may write (and read): the GPU's device files and the usual character
    devices (opened for writing, never renamed or replaced: Landlock grants files, not the /dev
    folder), and /dev/shm (POSIX semaphores and shared memory: a private tmpfs where the worker
    started as root, see sandbox._private_shm; else what its uid leaves there is deleted at close)."""
    found = [p for p in (*DEVICE_FILES, *sorted(glob.glob("/dev/nvidia*")), *sorted(glob.glob("/dev/dri/*")))
             if os.path.exists(p) and not os.path.isdir(p)]
    return found + ([SHARED_MEMORY] if os.path.isdir(SHARED_MEMORY) else [])


# /dev is not among them: a worker that keeps root could read a disk's raw blocks (/dev/vda, an NVMe
# namespace's /dev/ng*) or a terminal; of /dev it reads what it may write (_device_paths) and these
SYSTEM_FOLDERS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys",
                  "/run", "/snap", "/nix", "/dev/nvidia-caps", "/dev/dri")
HARNESS_FOLDERS = ("eval", ".device", ".whl", ".cutlass")  # of the repository: its code, its own
# submissions, what the GPU machine lacks (.cutlass: CUTLASS's headers, see _staged_headers)
TOOLS = ("nvcc", "ptxas", "ninja", "c++", "g++", "gcc", "cc")  # what builds run: their folders are readable
TOOLKITS = ("nvcc", "ptxas")  # <toolkit>/bin/nvcc: the toolkit around it is readable too
# in /etc, what root may read and a worker that keeps root must not: password hashes, keys, sudo rules
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh", "/etc/ssl/private",
                "/etc/sudoers", "/etc/sudoers.d", "/etc/security/opasswd")
PROBLEM_FILES = ("task.yml", "task.py", "reference.py", "problem.py", "shapes.yaml")
READ_ENV = "EVAL_WORKER_READ"  # more paths a worker may read (os.pathsep-separated), for unusual layouts


def _readable_paths(submission: Path | None, native_path: Path) -> tuple[list[str], list[str]]:
    """What a worker may read and run besides its own folders, as (readable, listable): what a
    leaderboard run could read, and nothing of other runs (candidates' sources, verdict files, the
    repository's results/ and tests/, another worker's folders or shared memory).
    Readable: the system folders (not /dev), the Python installation (prefixes, the interpreter's
    folder, every sys.path entry of the judge's but its working folder), the CUDA toolkit and the
    build tools' folders, LD_LIBRARY_PATH, the harness (eval/, .device/, .whl/, .cutlass/ of the
    repository, and the submissions it ships: _shipped_submissions), the judge's PYTHONPATH entries, the problem's files (_problem_files), the
    submission file (just the file), the compiled part, and EVAL_WORKER_READ (as given).
    Listable only: the problem folder (Python's import lists a sys.path folder to find task and
    reference in it; with Landlock a listing right holds beneath, so its subfolders' names are seen,
    not their files). A folder that holds the repository (PYTHONPATH=<repository>, a prefix above
    it) or /dev/shm is replaced by its entries that do not lead there (see _around)."""
    problem = problem_folder.current().root
    prefixes = [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                              os.path.dirname(os.path.realpath(sys.executable)))]
    own = [*prefixes, *(str(ROOT / name) for name in HARNESS_FOLDERS), *_shipped_submissions(), *_user_paths(),
           *_problem_files(problem),
           str(native_path), *([str(submission)] if submission else [])]
    own = [os.path.realpath(p) for p in own if os.path.isabs(p) and os.path.exists(p)]
    wide = [p for p in own if _beneath(str(ROOT), p)]  # the repository itself or a folder above it
    own = [p for p in own if p not in wide]
    shared = [*wide, *SYSTEM_FOLDERS, *_python_paths(prefixes), *_toolkit_paths(),
              *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)]
    readable = own + [found for path in shared if os.path.isabs(path) for found in _around(path, own)]
    readable += [os.path.realpath(p) for p in os.environ.get(READ_ENV, "").split(os.pathsep)
                 if os.path.isabs(p) and os.path.exists(p)]
    return list(dict.fromkeys(readable)), [str(problem)]


@functools.lru_cache(maxsize=1)
def _shipped_submissions() -> tuple[str, ...]:
    """The repository's own submissions (the files of submission/ that git tracks: torch_ref.py and
    the others shipped), file by file: submission/ is also where users keep candidates and where
    `rank` takes them from, and one candidate must not read another's source (red team round 6)."""
    try:
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--", "submission"], capture_output=True,
                                timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(str(ROOT / name) for name in listed.decode(errors="replace").split("\0") if name.endswith(".py"))


def _problem_files(root: Path) -> list[str]:
    """The problem's files: the contract's (PROBLEM_FILES) and what task.yml's `files` stages, by its
    name in the folder and from its source (the series' ../utils.py, the evaluator); not the
    submission it stages, nor anything else in the folder (the leaderboard's runner stages only
    these; a candidate or a verdict file kept there stays unread)."""
    staged = problem_folder.staging(root)
    files = [root / name for name in PROBLEM_FILES]
    for name, source in staged.files if staged else ():
        if source and not source.startswith("@"):
            files += [root / name, root / source]
    return [str(path) for path in files if path.is_file()]


def _python_paths(prefixes: list[str]) -> list[str]:
    """The judge's sys.path entries that exist (site-packages, the user site, .pth additions), less
    its working folder (`python -m` puts it first; candidates may lie there) unless that lies inside
    the Python installation."""
    cwd = os.path.realpath(os.getcwd())
    found = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.exists(entry):
            continue
        real = os.path.realpath(entry)
        if real != cwd or any(_beneath(real, prefix) for prefix in prefixes):
            found.append(real)
    return found


def _toolkit_paths() -> list[str]:
    """The CUDA toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda*, the toolkit nvcc and ptxas sit in)
    and the folders of the build tools found on PATH (and of CC / CXX)."""
    found = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), *sorted(glob.glob("/usr/local/cuda*"))]
    for tool in (*TOOLS, os.environ.get("CC", ""), os.environ.get("CXX", "")):
        where = shutil.which(tool) if tool else None
        if not where:
            continue
        real = Path(where).resolve()
        found += [os.path.dirname(os.path.abspath(where)), str(real.parent)]
        if tool in TOOLKITS and real.parent.name == "bin":
            found.append(str(real.parent.parent))
    return found


def _beneath(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _around(path: str, own: list[str]) -> list[str]:
    """path as readable entries that reveal nothing of the repository beyond `own` and nothing of
    the host's /dev/shm: the repository's root, or a path inside it that is not inside one of
    `own`, gives none; a folder above the repository or /dev/shm gives its folders and regular files
    that do not lead there, recursively (not its links: a link's target is readable where its own
    path is; nor device files). SECRET_FILES are left out the same way."""
    real = os.path.realpath(path)
    hidden = [str(ROOT), os.path.realpath(SHARED_MEMORY), *SECRET_FILES]
    if not os.path.exists(real):
        return []
    if any(_beneath(real, folder) for folder in hidden):
        return [real] if real != hidden[0] and any(_beneath(real, folder) for folder in own) else []
    if not any(_beneath(folder, real) for folder in hidden):
        return [real]
    try:
        entries = [entry for entry in os.scandir(real)
                   if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return [found for entry in entries for found in _around(entry.path, own)]
