"""A worker's disk quota, kept by the judge. Judge side; never reads a file's contents.

A worker writes only below its private folders (Landlock, eval/worker/sandbox.py), and those sit on
the disk every other worker and judge of the machine writes to. What it holds there is watched from
a thread of the judge: the files under its folders (each inode once, allocated blocks, so sparse
files count what they take), the files its processes deleted but keep open or mapped (memory
files, memfd_create, among them: the whole file behind a mapping), and what its private /dev/shm
holds. Past the quota, or
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
import time
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


MAX_DEPTH = 256  # folders nested deeper cannot be measured (a build's are a few levels)


class Unmeasurable(OSError):
    pass


def held(folders: Iterable[str], pids: Iterable[int]) -> tuple[int, int]:
    """(bytes, names): blocks of every file under `folders` and of every deleted file the processes
    `pids` keep open or mapped on the same disk, each inode once. The walk goes by folder descriptors
    (no path is ever longer than one name, so a chain of long names hides nothing); a folder hidden
    by chmod is opened again after giving the judge the right back. Raises Unmeasurable for what it
    cannot look at (the worker is then killed: what cannot be measured is not allowed)."""
    seen: set[tuple[int, int]] = set()
    devices: set[int] = set()
    total = names = 0
    for folder in folders:
        try:
            top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        devices.add(os.fstat(top).st_dev)
        stack = [(top, iter(os.listdir(top)))]  # one open folder per level, as os.fwalk keeps
        try:
            while stack:
                fd, pending = stack[-1]
                name = next(pending, None)
                if name is None:
                    os.close(stack.pop()[0])
                    continue
                names += 1
                if names > ENTRY_LIMIT:
                    return total, names
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise Unmeasurable(exc.errno, f"a name under its folders cannot be looked at ({exc.strerror})")
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    if len(stack) > MAX_DEPTH:
                        raise Unmeasurable(0, f"folders nested more than {MAX_DEPTH} deep")
                    child = _open_folder(name, fd)
                    if child is not None:
                        try:
                            stack.append((child, iter(os.listdir(child))))
                        except OSError:
                            os.close(child)
                            raise
        finally:
            for fd, _ in stack:
                os.close(fd)
    pids = list(pids)
    for pid in pids:  # files unlinked while open or mapped: no name left, the blocks still taken
        total += _unlinked(pid, devices, seen)
    return total + _private_shm(pids), names  # files kept by name in its own /dev/shm (round 11)


def _open_folder(name: str, parent: int) -> int | None:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        return None
    except PermissionError:  # the judge's own uid (or root): a worker's chmod 000 hides nothing
        try:
            os.chmod(name, 0o700, dir_fd=parent)
            return os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Unmeasurable(exc.errno, f"a folder the judge cannot open ({exc.strerror})")
    except NotADirectoryError:  # replaced by a file since it was looked at: seen next time
        return None
    except OSError as exc:
        raise Unmeasurable(exc.errno, f"a folder the judge cannot open ({exc.strerror})")


def _unlinked(pid: int, devices: set[int], seen: set[tuple[int, int]]) -> int:
    """Blocks of the deleted files on `devices` (and of memory files, memfd, anywhere) that process
    `pid` keeps open (its descriptors) or mapped (/proc/<pid>/maps: a mapping outlives the
    descriptor it was made from; counted by its length, what it can write, or by the file behind
    it where that holds more)."""
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        # on its folders' disks; or anywhere once deleted: a memfd (memory no process is charged for
        # once unmapped, so the OOM killer would pick a neighbour: red team round 10)
        if stat.S_ISREG(st.st_mode) and (st.st_dev in devices or st.st_nlink == 0) and key not in seen:
            seen.add(key)
            total += st.st_blocks * 512
    try:
        with open(f"/proc/{pid}/maps") as handle:
            maps = handle.read().splitlines()
    except OSError:
        return total
    for line in maps:
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].endswith("(deleted)") or parts[4] == "0":
            continue
        major, minor = (int(x, 16) for x in parts[3].split(":"))
        key = (os.makedev(major, minor), int(parts[4]))
        if (key[0] in devices or parts[5].startswith("/memfd:")) and key not in seen:
            seen.add(key)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            try:  # the whole file behind it: a page mapped of 64 MiB written holds 64 MiB (round 11)
                blocks = os.stat(f"/proc/{pid}/map_files/{parts[0]}").st_blocks * 512
            except OSError:
                blocks = 0
            total += max(end - start, blocks)
    return total


def _private_shm(pids: Iterable[int]) -> int:
    """What the worker's own /dev/shm holds (a private tmpfs in its mount namespace, where the judge
    is root: eval/worker/sandbox.py), seen through /proc/<pid>/root; each such mount once."""
    try:
        host = os.stat("/dev/shm").st_dev
    except OSError:
        host = None
    seen, total = set(), 0
    for pid in pids:
        try:
            path = f"/proc/{pid}/root/dev/shm"
            device = os.stat(path).st_dev
            if device == host or device in seen:
                continue
            fs = os.statvfs(path)
        except OSError:
            continue
        seen.add(device)
        total += (fs.f_blocks - fs.f_bfree) * fs.f_frsize
    return total


PASS_LIMIT_S = 5.0  # a look that takes longer leaves the worker unwatched for that long: killed
FROZEN_EVERY_S = 5.0  # at most one look with the worker stopped per this many seconds


def _disk_used(folder: str) -> int:
    fs = os.statvfs(folder)
    return (fs.f_blocks - fs.f_bfree) * fs.f_frsize


class DiskWatch:
    """A thread that measures what the worker holds every INTERVAL_S and calls `kill` once it is past
    the quota; `reason` then says why (None while within it). A worker can move its files between
    folders while a look walks them (red team round 7: renames timed by inotify); so when the disk as
    a whole has filled by more than the quota since the worker started while the look found less,
    the next look is taken with the worker stopped (`freeze`), where nothing moves."""

    def __init__(self, folders: list[str], pids: Callable[[], Iterable[int]], kill: Callable[[], None],
                 quota: int, freeze: Callable[[bool], None] | None = None):
        self.folders, self.pids, self.kill, self.quota, self.freeze = folders, pids, kill, quota, freeze
        self.reason: str | None = None
        self.peak = 0
        self.frozen_looks = 0
        self._start_used = _disk_used(folders[0])
        self._last_frozen = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="worker-disk", daemon=True)
        self._thread.start()

    def _look(self, frozen: bool) -> tuple[int, int]:
        if frozen and self.freeze is not None:
            self.frozen_looks += 1
            self._last_frozen = time.monotonic()
            self.freeze(True)
            try:
                return held(self.folders, self.pids())
            finally:
                self.freeze(False)
        return held(self.folders, self.pids())

    def _watch(self) -> None:
        frozen = False
        while not self._stop.wait(INTERVAL_S):
            started = time.monotonic()
            try:
                used, names = self._look(frozen)
            except OSError as exc:
                self._over(f"cannot be measured: {exc.strerror or exc}")
                return
            if time.monotonic() - started > PASS_LIMIT_S:
                self._over(f"took more than {PASS_LIMIT_S:g} s to measure (its folders, descriptors and mappings)")
                return
            self.peak = max(self.peak, used)
            if names > ENTRY_LIMIT:
                self._over(f"made more than {ENTRY_LIMIT} files and folders under its private folders")
                return
            if used > self.quota:
                self._over(f"held {used >> 20} MiB of files (its folders, deleted and memory files, its /dev/shm), "
                           f"past the worker's quota of {self.quota >> 20} MiB (raise {QUOTA_ENV} if the build needs more)")
                return
            try:
                grown = _disk_used(self.folders[0]) - self._start_used
            except OSError:
                grown = 0
            frozen = grown > self.quota and time.monotonic() - self._last_frozen > FROZEN_EVERY_S

    def _over(self, what: str) -> None:
        if self._stop.is_set():
            return
        self.reason = f"disk quota: the worker {what}; worker killed"
        self.kill()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
