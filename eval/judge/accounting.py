"""Process accounting for the judge: what /proc says about a worker's processes (_stat, _schedstat,
_processes, _cpu_ns), which of them are real compilers (_compilers, _build_tool, _only_tool_code,
_tool_folders), and a request's time limit that grows while those compilers run (Deadline: the
build-time rule, tests/test_build_time.py).

Owns: reading /proc and the build-time arithmetic. Reads only: it sends no signal, starts, stops or
kills nothing (eval/judge/lifecycle.py does) and never reads a reply (eval/judge/wire.py does).
"""
from __future__ import annotations

import functools
import os
import re
import sys
import time
from pathlib import Path

from eval.judge.file_policy import _beneath, _toolkit_paths
from eval.worker import build

COMPILERS = {"nvcc", "cicc", "ptxas", "ninja", "cc1plus", "cc1", "g++", "gcc", "c++", "cc", "ld", "collect2",
             "lto1", "lto-wrapper", "cc1obj", "cc1objplus", "f951", "make",
             "cudafe++", "fatbinary", "nvlink", "as", "clang", "clang++", "nvdisasm", "cuobjdump"}
# past --timeout, an import goes on while compilers were busy (running or runnable) at least
# COMPILER_SHARE of the last COMPILER_WINDOW_S (Deadline._compiling)
COMPILER_WINDOW_S, COMPILER_SHARE = 20.0, 0.2
COMPILER_GAP_S = 5.0  # a look that finds no compiler ends the import only this long after the last that did


class Deadline:
    """A request's time limit. With a build limit (the import), the limit is extended while compiler
    processes run in the worker's session, up to the build limit."""

    def __init__(self, timeout: float, build_limit: float | None, session: int):
        self.timeout, self.build_limit, self.session = timeout, build_limit, session
        self.started = time.monotonic()
        self.end = self.started + timeout
        self.compiled = False
        self.seen: dict[tuple[int, int], int] = {}  # (pid, start time) of a compiler -> its busy ns at the last look
        self.foreign: set[tuple[int, int]] = set()  # processes that were no compiler once: never one again
        self.looks: list[tuple[float, int]] = []  # (when, busy ns added since the look before)
        self.last_seen = 0.0  # when a look last found a compiler (the deadline, at the first look)

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        now = time.monotonic()
        if now < self.end:
            return False
        if self.build_limit and now < self.started + self.build_limit and self._compiling(now):
            self.compiled = True
            self.end = now + 1.0  # look again in a second
            return False
        return True

    def _compiling(self, now: float) -> bool:
        """Past --timeout, compilers run in the worker's session and keep busy: over the last
        COMPILER_WINDOW_S (or since the first look, if sooner) they ran at least COMPILER_SHARE of
        the time (on a CPU, or waiting for one no longer than they ran; a new compiler brings what
        it did before the look), and a look found one within COMPILER_GAP_S (the Python between two
        builds). A real compiler left waiting on a pipe (`gcc -E -`), one that sleeps between short
        steps (a `-wrapper` shell), idle ones made to wait in a run queue, or the submission's own
        code in a compiler's process (a library mapped from outside the tool folders, anonymous
        executable memory) buy no build time; burning a core to look busy buys what a real build
        of that length would, up to the build limit."""
        if not self.looks:
            self.last_seen = now
        busy, foreign = _compilers(self.session)
        self.foreign |= foreign
        added = 0
        for key, ns in busy.items():
            if key in self.foreign:
                continue
            added += max(0, ns - self.seen.get(key, 0))
            self.seen[key] = max(ns, self.seen.get(key, 0))
            self.last_seen = now
        self.looks.append((now, added))
        start = max(self.looks[0][0], now - COMPILER_WINDOW_S)
        self.looks = [(t, ns) for t, ns in self.looks if t >= start]
        span = now - start
        if now - self.last_seen > COMPILER_GAP_S:
            return False
        return span < 1.0 or sum(ns for _, ns in self.looks) >= COMPILER_SHARE * span * 1e9

    def reason(self) -> str:
        if self.compiled and time.monotonic() >= self.started + self.build_limit:
            return f"build timed out after {self.build_limit:g} s (worker killed; compilers were still running)"
        return f"timed out after {self.timeout:g} s (worker killed; raise --timeout if this is expected)"


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name: [0] state (field 3), [1] ppid, [3] session,
    [11] utime, [12] stime, [13] cutime, [14] cstime, [19] start time. Raises OSError."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()


def _schedstat(pid: int) -> tuple[int, int]:
    """(ns on a CPU, ns waiting for one), summed over every thread of the process
    (/proc/<pid>/task/*/schedstat). Raises OSError or ValueError."""
    on_cpu = waiting = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        run, wait = (int(x) for x in Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[:2])
        on_cpu, waiting = on_cpu + run, waiting + wait
    return on_cpu, waiting


def _start_time(pid: int) -> int | None:
    """When a process started (clock ticks since boot), or None when there is none of that pid."""
    try:
        return int(_stat(pid)[19])
    except OSError:
        return None


def _running(pid: int) -> bool:
    """The process exists and is not stopped."""
    try:
        return _stat(pid)[0] not in "TtZX"
    except OSError:
        return False


def _processes(live: bool = False):
    """(pid, command name, session id, uid) of every process; live: not the dead ones (a zombie, state
    Z, runs no code: only its parent's wait takes it off the list). One open, fstat and read per
    process: a GPU host runs a thousand or more, and the judge passes over them many times a candidate.
    The uid is the stat file's owner, which is the process directory's (both follow the process's
    effective uid, root when it is not dumpable)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                uid = os.fstat(fd).st_uid
                stat = os.read(fd, 4096)
            finally:
                os.close(fd)
        except OSError:
            continue
        left, right = stat.find(b"("), stat.rfind(b")")
        rest = stat[right + 2:].split(None, 4)
        if left < 0 or right < left or len(rest) < 4:
            continue
        if live and rest[0] in (b"Z", b"X"):
            continue
        try:
            yield int(name), stat[left + 1:right].decode(errors="replace"), int(rest[3]), uid
        except ValueError:
            continue


def _compilers(session: int) -> tuple[dict[tuple[int, int], int], set[tuple[int, int]]]:
    """The compilers, linkers and build tools running in the worker's session (ninja puts each job
    in a process group of its own; the session stays the worker's: setsid is refused), by (pid,
    start time), each with how long it has run (ns: on a CPU, plus time waiting for one up to as
    long again, /proc/<pid>/schedstat, plus the CPU time of its children it has reaped); and the
    processes that run a build tool's program with foreign code in them. A build tool by the program
    it runs (/proc/<pid>/exe), not by the name it gives itself, installed where the worker cannot
    write (_tool_folders), with no code mapped from anywhere else (an LD_PRELOAD library, a plugin,
    anonymous executable memory): a copy of /bin/sleep named cc1plus in its own folders, or the
    submission's code loaded into a real gcc, is none."""
    folders = _tool_folders()
    found, foreign = {}, set()
    tick = 1e9 / os.sysconf("SC_CLK_TCK")
    tools: dict[int, list[str]] = {}  # pid -> its stat fields from field 3
    parents: dict[int, int] = {}
    for pid, _, sid, _ in _processes():
        if sid != session:
            continue
        try:
            fields = _stat(pid)
            parents[pid] = int(fields[1])
            exe = os.path.realpath(os.readlink(f"/proc/{pid}/exe"))
        except (OSError, ValueError, IndexError):
            continue
        if _build_tool(Path(exe).name) and _beneath_any(exe, folders):
            tools[pid] = fields
    for pid, fields in tools.items():
        try:
            key = (pid, int(fields[19]))
            if not _only_tool_code(pid, folders):
                foreign.add(key)
                continue
            own = _run_ns(pid, fields, tick)
        except (OSError, ValueError, IndexError):
            continue
        # the CPU of reaped children, counted by the topmost tool only: a parent's count holds its
        # children's, so counting it at every level of a chain would count one leaf many times
        ancestor, topmost = parents[pid], True
        for _ in range(64):
            if ancestor in tools:
                topmost = False
                break
            if ancestor not in parents:
                break
            ancestor = parents[ancestor]
        children = int((int(fields[13]) + int(fields[14])) * tick) if topmost else 0
        found[key] = own + children
    return found, foreign


def _cpu_ns(session: int, uid: int | None) -> dict[int, int]:
    """Time on a CPU of every process of the worker (its session, its own uid), every thread, and
    of the children each has reaped (a process that ran and was reaped is not lost)."""
    tick = 1e9 / os.sysconf("SC_CLK_TCK")
    found = {}
    for pid, _, sid, owner in _processes():
        if sid != session and (uid is None or owner != uid):
            continue
        try:
            fields = _stat(pid)
            found[pid] = _schedstat(pid)[0] + int((int(fields[13]) + int(fields[14])) * tick)
        except (OSError, ValueError, IndexError):
            continue
    return found


def _run_ns(pid: int, fields: list[str], tick: float) -> int:
    """How long the process has run, every thread of it: time on a CPU plus time waiting for one,
    the wait counted up to as long as it ran (/proc/<pid>/task/*/schedstat; else utime + stime)."""
    try:
        on_cpu, waiting = _schedstat(pid)
    except (OSError, ValueError):
        return int((int(fields[11]) + int(fields[12])) * tick)
    return on_cpu + min(waiting, on_cpu)


def _build_tool(program: str) -> bool:
    """A compiler, linker or build tool by its program's file name, as installed: cc1plus, nvcc,
    x86_64-linux-gnu-g++-12, ld.bfd, ld.gold."""
    name = re.sub(r"^(x86_64|aarch64)-linux-gnu-", "", program)
    name = re.sub(r"-\d+(\.\d+)*$", "", name)
    if name.startswith("ld."):
        name = "ld"
    return name in COMPILERS


def _beneath_any(path: str, folders) -> bool:
    return any(_beneath(path, folder) for folder in folders)


def _only_tool_code(pid: int, folders) -> bool:
    """Every executable mapping of the process is a file in the tool folders (or the kernel's
    vDSO): no anonymous executable memory, no file from elsewhere, none deleted."""
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) < 5 or "x" not in parts[1]:
                continue
            path = parts[5].rstrip("\n") if len(parts) == 6 else ""
            if path in ("[vdso]", "[vsyscall]", "[uprobes]"):
                continue
            # the kernel's path of the mapped file, compared as it is: resolving it again would follow
            # a link the worker could plant in its own folders since
            if not path.startswith("/") or path.endswith(" (deleted)") or not _beneath_any(path, folders):
                return False
    return True


@functools.lru_cache(maxsize=1)
def _tool_folders() -> tuple[str, ...]:
    """Where a real compiler lives: the system's program and library folders, the CUDA toolkit and
    the build tools' folders (_toolkit_paths), the Python installation (Triton's bundled ptxas);
    never the cache root, where workers' private folders are."""
    folders = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/opt", *_toolkit_paths(),
               sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), *sys.path]
    cache = os.path.realpath(str(build.cache_root()))
    found = [os.path.realpath(f) for f in folders if f and os.path.isabs(f) and os.path.isdir(f)]
    return tuple(f for f in dict.fromkeys(found) if f != "/" and not _beneath(cache, f))
