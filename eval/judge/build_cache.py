"""What submissions built (torch extensions, Triton kernels, CuTe DSL and CUDA caches), kept per
submission by the judge. Judge side; never imports submission code.

A worker never sees another run's files: it starts with a private copy of its own submission's entry
(`seed`), builds whatever is missing in its private folder, and after its import succeeded the judge
copies that folder back as the entry if there is none yet (`store`). Only the judge writes entries,
and an entry is keyed by everything its contents depend on (`key`: the source, --emulate-blackwell,
this GPU, torch, python and the harness files that take part in a build), so a submission can only
ever reach its own builds. `prebuild` builds a submission in a worker that sees no GPU (compilers
only), so that building one candidate overlaps with timing another (issue 26's batch); it starts a
worker, so it lives with WorkerProcess in eval/judge/worker_start.py (this module imports no worker).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from eval.judge import disk_quota
from eval.worker import build

MAX_ENTRY_BYTES = 1 << 30  # a larger build folder is not kept (a CUTLASS build takes a few hundred MiB)
CACHE_ENV = "EVAL_BUILD_CACHE"  # the whole cache's size (e.g. 8G): least recently used entries go first
DEFAULT_CACHE_BYTES = 8 << 30
MAX_DEPTH = 32  # nor one with folders nested deeper (a build's are a few levels)
HARNESS_FILES = ("eval/worker/emulation.py", "eval/worker/nvcc_emulate.py", "eval/worker/driver.py")
_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def root() -> Path:
    return build.cache_root() / "builds"


@functools.lru_cache(maxsize=1)
def gpu_arch() -> tuple[int, int] | None:
    """This GPU's compute capability, as the judge sees it (None without CUDA)."""
    import torch

    return tuple(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None


def key(submission: Path, emulate: bool) -> str:
    import torch

    digest = hashlib.sha256(Path(submission).read_bytes())
    here = Path(__file__).resolve().parents[2]
    for name in HARNESS_FILES:
        digest.update((here / name).read_bytes())
    staged = here / ".cutlass" / "VERSION"  # the CUTLASS headers builds see (channel._staged_headers)
    digest.update(repr((emulate, gpu_arch(), torch.__version__, torch.version.cuda, platform.python_version(),
                        os.environ.get("TORCH_CUDA_ARCH_LIST"), os.environ.get("CUTLASS_PATH"),
                        staged.read_text() if staged.is_file() else None)).encode())
    return digest.hexdigest()[:32]


def _lock(name: str) -> threading.Lock:
    with _GUARD:
        return _LOCKS.setdefault(name, threading.Lock())


def seed(name: str, dest: Path) -> bool:
    """Copy the stored entry (if any) into a worker's private build folder; True when there was one."""
    entry = root() / name
    if not entry.is_dir():
        return False
    try:
        os.utime(entry)  # used now: the last to be evicted (prune)
        _copy_tree(entry, dest, MAX_ENTRY_BYTES)
    except OSError:  # evicted by another judge meanwhile: whatever is missing gets built
        return False
    return True


def cache_limit() -> int:
    text = os.environ.get(CACHE_ENV)
    return disk_quota.parse_size(text, CACHE_ENV) if text else DEFAULT_CACHE_BYTES


def prune(keep: str | None = None) -> list[str]:
    """Delete least recently used entries (stored or seeded last) until the cache holds at most
    cache_limit() bytes; never `keep`. A search loop judges thousands of candidates, each with builds
    of its own: without this the cache, not any one worker, fills the disk. Returns the names deleted."""
    limit, folder = cache_limit(), root()
    if not folder.is_dir():
        return []
    with open(folder / ".prune.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # one pruning judge at a time on this machine
        entries = []
        for item in os.scandir(folder):
            if item.name.startswith(".") or not item.is_dir(follow_symlinks=False):
                continue
            try:
                size = int((folder / f".{item.name}.size").read_text())
            except (OSError, ValueError):
                size = _size(Path(item.path))
            entries.append((item.stat(follow_symlinks=False).st_mtime_ns, item.name, size))
        total, gone = sum(size for *_, size in entries), []
        for _, name, size in sorted(entries):
            if total <= limit:
                break
            if name == keep:
                continue
            remove_tree(folder / name)
            (folder / f".{name}.size").unlink(missing_ok=True)
            total -= size
            gone.append(name)
    return gone


def _size(folder: Path) -> int:
    total = 0
    for path, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(path, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _copy_tree(src: Path, dest: Path, budget: int, owner: int | None = None, before: int | None = None,
               depth: int = 0) -> int:
    """Copy regular files and folders (mtimes kept: ninja sees no change), never following or
    copying a link (a worker's folder may hold links aimed anywhere), at most `budget` bytes and
    MAX_DEPTH levels of folders; returns the bytes left (negative: over budget or too deep, the
    copy stopped)."""
    if depth > MAX_DEPTH:
        return -1
    dest.mkdir(parents=True, exist_ok=True)
    with os.scandir(src) as items:
        for item in items:
            target = dest / item.name
            if item.is_dir(follow_symlinks=False):
                budget = _copy_tree(Path(item.path), target, budget, owner, before, depth + 1)
            elif item.is_file(follow_symlinks=False):
                budget = _copy_file(item.path, target, budget, owner, before)
            if budget < 0:
                return budget
    return budget


def _copy_file(path: str, target: Path, budget: int, owner: int | None = None, before: int | None = None) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return budget
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or (owner is not None and info.st_uid != owner):
            return budget  # only files the worker itself wrote: no hard link to someone else's file
        if before is not None and info.st_ctime_ns > before:
            return budget  # changed after the import (while custom_kernel ran): not a build product
        budget -= info.st_size
        if budget < 0:
            return budget
        with open(target, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        os.chmod(target, 0o755 if info.st_mode & 0o111 else 0o644)
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    return budget


def store(name: str, src: Path, owner: int | None = None, before: int | None = None) -> bool:
    """Keep a worker's build folder as the entry `name` when there is none yet (atomically: a
    rename). Returns True when stored. Files are the judge's, readable by workers, writable by none.
    Called once the worker and everything it started are dead (nothing can swap a folder for a link
    while the judge walks it); owner: the worker's own uid, whose files alone are kept; before: only
    files whose inode last changed before this time (ns; the end of the import) are kept."""
    entry = root() / name
    if entry.exists() or not src.is_dir() or not any(src.iterdir()):
        return False
    root().mkdir(parents=True, exist_ok=True)
    os.chmod(root(), 0o755)
    with _lock(name), open(root() / f".{name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # other judges on this machine
        if entry.exists():
            return False
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root()))
        try:
            left = _copy_tree(src, staging, MAX_ENTRY_BYTES, owner, before)
            if left < 0:
                raise OSError("build folder too large to keep")
            for folder, _, _ in os.walk(staging):
                os.chmod(folder, 0o755)
            (root() / f".{name}.size").write_text(str(_size(staging)))
            os.rename(staging, entry)
        except OSError:
            remove_tree(staging)
            return False
    prune(keep=name)
    return True


def remove_tree(path: Path) -> None:
    """Delete a folder a worker wrote into, whatever it made there: shutil.rmtree (which never
    follows a link), and where that stops short (Python before 3.12 recurses once per level: a
    chain of thousands of folders raises RecursionError) `rm -rf`, which walks any depth."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except (RecursionError, MemoryError):
        pass
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600)


class Slot:
    """A build folder at a path that stays the same for every worker of one entry (torch writes
    absolute paths into its ninja file: a new path would rebuild everything), held by one worker at
    a time (a second worker of the same submission at the same moment gets the next slot), emptied
    when released."""

    def __init__(self, name: str):
        base = build.cache_root() / "slots"
        base.mkdir(parents=True, exist_ok=True)
        os.chmod(base, 0o711)
        for n in range(64):
            path = base / f"{name}-{n}"
            held = open(base / f".{name}-{n}.lock", "w")
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                held.close()
                continue
            remove_tree(path)  # what a killed judge left
            path.mkdir()
            self.path, self._held = path, held
            return
        raise OSError(f"no free build slot for {name}")

    def release(self) -> None:
        try:
            remove_tree(self.path)
        finally:
            self._held.close()

