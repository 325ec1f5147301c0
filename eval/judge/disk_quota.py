"""A worker's disk quota, kept by the judge. Judge side; never reads a file's contents.

A worker writes only below its private folders (Landlock, eval/worker/sandbox.py), and those sit on
the disk every other worker and judge of the machine writes to. What it holds there is watched from
a thread of the judge: the files under its folders (each inode once, allocated blocks, so sparse
files count what they take) and the files its processes deleted but keep open. Past the quota, or
past ENTRY_LIMIT names (an inode flood), the worker is killed and the reason says so. One file past
the quota is refused by the kernel at once: the worker runs under RLIMIT_FSIZE of the quota (SIGXFSZ).

The quota: EVAL_WORKER_DISK (bytes, or with a K/M/G suffix), else DEFAULT_QUOTA, never more than a
quarter of the space free when the worker starts (so one worker cannot take what its neighbours need)
unless that is below MIN_QUOTA.
"""
from __future__ import annotations

import os
import resource
import stat
import threading
from collections.abc import Callable, Iterable

QUOTA_ENV = "EVAL_WORKER_DISK"
DEFAULT_QUOTA = 4 << 30  # a CUTLASS build with its objects takes a few hundred MiB
MIN_QUOTA = 256 << 20
ENTRY_LIMIT = 200_000  # names under its folders
INTERVAL_S = 0.25


class QuotaError(ValueError):
    pass


def parse_size(text: str, variable: str = QUOTA_ENV) -> int:
    """'4G', '512M', '1048576' -> bytes (a QuotaError naming `variable` otherwise)."""
    given, text = text, text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    try:
        value = float(number)
    except ValueError:
        raise QuotaError(f"{variable}={given!r} is not a size: write bytes or a number with K, M or G (e.g. 4G)")
    if value <= 0:
        raise QuotaError(f"{variable}={given!r}: write a size above 0 (e.g. 4G)")
    return int(value * scale)


def quota_for(folder: str) -> int:
    """This worker's quota in bytes (see the module docstring)."""
    wanted = parse_size(os.environ[QUOTA_ENV]) if os.environ.get(QUOTA_ENV) else DEFAULT_QUOTA
    try:
        fs = os.statvfs(folder)
        free = fs.f_bavail * fs.f_frsize
    except OSError:
        return wanted
    return min(wanted, max(MIN_QUOTA, free // 4))


def limit_file_size(pid: int, quota: int) -> str:
    """RLIMIT_FSIZE of the worker (soft and hard: it cannot raise it again); its compilers inherit it."""
    try:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (quota, quota))
    except (OSError, ValueError) as exc:
        return f"unavailable ({exc})"
    return "on"


def held(folders: Iterable[str], pids: Iterable[int]) -> tuple[int, int]:
    """(bytes, names): blocks of every file under `folders` and of every deleted file the processes
    `pids` keep open on the same disk, each inode once. Raises PermissionError for a folder the
    judge cannot read, once it tried to give itself the right back."""
    seen: set[tuple[int, int]] = set()
    total = names = 0
    devices = set()
    stack = []
    for folder in folders:
        try:
            devices.add(os.stat(folder).st_dev)
            stack.append(folder)
        except OSError:
            continue
    while stack:
        folder = stack.pop()
        try:
            entries = _entries(folder)
        except FileNotFoundError:
            continue
        for entry in entries:
            names += 1
            if names > ENTRY_LIMIT:
                return total, names
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    for pid in pids:  # files unlinked while open: no name left, the blocks still taken
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if stat.S_ISREG(st.st_mode) and st.st_dev in devices and key not in seen:
                seen.add(key)
                total += st.st_blocks * 512
    return total, names


def _entries(folder: str) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except PermissionError:  # the judge's own uid (or root): a worker's chmod 000 hides nothing
        os.chmod(folder, 0o700)
        return list(os.scandir(folder))
    except NotADirectoryError:  # replaced by a file since it was listed
        return []


class DiskWatch:
    """A thread that measures what the worker holds every INTERVAL_S and calls `kill` once it is past
    the quota; `reason` then says why (None while within it)."""

    def __init__(self, folders: list[str], pids: Callable[[], Iterable[int]], kill: Callable[[], None],
                 quota: int):
        self.folders, self.pids, self.kill, self.quota = folders, pids, kill, quota
        self.reason: str | None = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="worker-disk", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            try:
                used, names = held(self.folders, self.pids())
            except OSError as exc:
                self._over(f"made a folder under its private folders that the judge cannot read ({exc.strerror})")
                return
            self.peak = max(self.peak, used)
            if names > ENTRY_LIMIT:
                self._over(f"made more than {ENTRY_LIMIT} files and folders under its private folders")
                return
            if used > self.quota:
                self._over(f"wrote {used >> 20} MiB to disk, past the worker's quota of {self.quota >> 20} MiB "
                           f"(raise {QUOTA_ENV} if the build needs more)")
                return

    def _over(self, what: str) -> None:
        if self._stop.is_set():
            return
        self.reason = f"disk quota: the worker {what}; worker killed"
        self.kill()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
