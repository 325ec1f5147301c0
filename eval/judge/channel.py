"""The judge's handle on one worker process: start it sandboxed, send it requests, and accept only
replies that its compiled part signed.

The worker is `python -m eval.worker` with three pipes: requests (judge -> worker, pickled by us),
replies (worker -> judge, a frame of JSON header + bytes + HMAC-SHA256, never unpickled) and a
one-shot pipe that carries the 32-byte key to the compiled part before the submission is imported.
A reply whose MAC, nonce or echoed parameters do not match what we asked is a tampered channel and
fails the run; a reply larger than its request can produce is refused before it is read.

Each worker starts isolated and leaves nothing behind: `python -I -B` (no PYTHONPATH, user site or
bytecode writes; the harness and problem paths are passed explicitly), a private folder (HOME, TMPDIR,
every tool cache) created for it and deleted when it closes, its build caches copied in from the
judge's build cache (eval/judge/build_cache.py), its own session (which no process of it can leave:
the sandbox refuses setsid) killed whole, and, as root, a uid of its own where the tree is readable
by one (every process of that uid is killed at the end too) and a /dev/shm of its own (a private
tmpfs, gone with it). It reads only what a leaderboard run could (_readable_paths: system folders,
Python, CUDA, the harness, the problem's files, its own submission file; never another candidate's
source, a verdict file or results/; EVAL_WORKER_READ adds paths). What the judge believes about
the worker (its sandbox layers, whether CUDA works in it, what is emulated) comes from the signed
`hello` reply the worker sends before any of the submission exists; later words are informational.
"""
from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import functools
import glob
import hashlib
import hmac
import json
import os
import pickle
import re
import resource
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from eval import problem_folder
from eval.cases import ROOT
from eval.judge import build_cache, disk_quota, levels, text, worker_log
from eval.worker import build
from eval.worker.sandbox import UID_LEVELS

DEFAULT_LOAD_TIMEOUT_S = 900.0  # the build limit: an import may take this long while compilers run under it
REPLY_KINDS = {"hello": "hello", "load": "ready", "trial": "trial", "runs": "runs", "baseline": "runs",
               "profile": "text", "configs": "text"}
TEXT_HEADER_LIMIT = 16 << 20  # a reply without measurements (hello, ready, text, error)
COMPILERS = {"nvcc", "cicc", "ptxas", "ninja", "cc1plus", "cc1", "g++", "gcc", "c++", "cc", "ld", "collect2",
             "lto1", "lto-wrapper", "cc1obj", "cc1objplus", "f951", "make",
             "cudafe++", "fatbinary", "nvlink", "as", "clang", "clang++", "nvdisasm", "cuobjdump"}
# past --timeout, an import goes on while compilers were busy (running or runnable) at least
# COMPILER_SHARE of the last COMPILER_WINDOW_S (Deadline._compiling)
COMPILER_WINDOW_S, COMPILER_SHARE = 20.0, 0.2
COMPILER_GAP_S = 5.0  # a look that finds no compiler ends the import only this long after the last that did
WORKER_NPROC = 4096  # processes (and threads) of a worker's own uid
# a CUDA failure that says the GPU is full or taken: a neighbour's doing, never a reason to step down
RESOURCE_ERRORS = ("out of memory", "busy or unavailable", "memoryallocation", "devicesunavailable")
WORKER_UIDS = (1_000_000_000, 100_000_000)  # first uid and how many: a uid of its own for each worker
BOOT = ("import os,sys,runpy;sys.path[:0]=os.environ['EVAL_WORKER_PATH'].split(os.pathsep);"
        "runpy.run_module('eval.worker',run_name='__main__',alter_sys=True)")
SANDBOX_LEVELS = levels.LEVELS  # eval/judge/levels.py: the machine's level, found once and kept
ENV_PASSED = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS",
              "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH")
ENV_PREFIXES = ("CUDA_", "NVIDIA_", "CUTE_DSL_", "CUTLASS_")


class WorkerFailure(Exception):
    """A request did not complete: `reason` is one line naming what went wrong."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclasses.dataclass(frozen=True)
class Reply:
    kind: str  # ready | error | text | runs | trial
    header: dict
    blob: bytes


def make_judge_undumpable() -> None:
    """No process of the same uid without CAP_SYS_PTRACE may open our /proc/<pid>/fd or memory."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


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


def worker_uid(submission: Path | None) -> int | None:
    """As root: a fresh unprivileged uid for one worker (no other process has it: no other worker
    can signal it or read its files), if that uid can read everything the worker needs."""
    if os.geteuid() != 0 or os.environ.get("EVAL_WORKER_UID") == "0":
        return None
    import torch

    needed = [Path(sys.executable), Path(os.__file__).parent, Path(torch.__file__).parent,
              problem_folder.current().root / "reference.py", ROOT / "eval" / "worker" / "driver.py"]
    needed += [Path(p) for p in _user_paths()]
    if submission:
        needed.append(Path(submission))
    if not all(_readable_by_others(p) for p in needed):
        return None
    first, count = WORKER_UIDS
    return first + secrets.randbelow(count)


def _user_paths() -> list[str]:
    """The judge's PYTHONPATH entries (e.g. a staged CuTe DSL), passed to the worker explicitly."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


@dataclasses.dataclass
class Native:
    """The built compiled part, and its digest (checked before each start)."""
    path: Path
    sha256: str


_NATIVE: list[Native] = []


def native() -> Native:
    if not _NATIVE:
        try:
            path = build.build()
        except (RuntimeError, OSError, ImportError) as exc:
            last = [line for line in str(exc).splitlines() if "error" in line.lower()][-1:] or [str(exc)[:200]]
            raise WorkerFailure(f"cannot build the worker's compiled part ({build.SOURCE.name}): {last[0].strip()}; "
                                "it needs a C++ compiler (g++) and ninja")
        _NATIVE.append(Native(path, hashlib.sha256(path.read_bytes()).hexdigest()))
    found = _NATIVE[0]
    if hashlib.sha256(found.path.read_bytes()).hexdigest() != found.sha256:
        raise WorkerFailure(f"the worker library {found.path} changed since it was built; delete it and rerun")
    return found


@dataclasses.dataclass(frozen=True)
class Private:
    """A worker's own folders, created for it and deleted when it closes: `root` (HOME, TMPDIR) and
    `builds` (every tool's build cache: a copy of the judge's entry for this submission, at a path
    that is the same for every worker of the submission, see build_cache.Slot)."""
    root: Path
    slot: build_cache.Slot

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def builds(self) -> Path:
        return self.slot.path


def _worker_env(private: Private, gpu: bool) -> dict:
    problem = problem_folder.current()
    passed = ENV_PASSED + tuple(problem.hook("WORKER_ENV", ()))
    env = {k: v for k, v in os.environ.items() if k in passed or k.startswith(ENV_PREFIXES)}
    home, builds = private.home, private.builds
    env.update(
        # the harness first: a problem folder may hold an eval.py of its own (the leaderboard's
        # problem-specific evaluators), which must not shadow the `eval` package; the worker's
        # problem_folder.use() then puts the folder first for reference.py and task.py
        EVAL_WORKER_PATH=os.pathsep.join([str(ROOT), str(problem.root), *_user_paths()]),
        EVAL_PROBLEM_DIR=str(problem.root),
        PYTHONUNBUFFERED="1",
        HOME=str(home),
        USER="eval-worker", LOGNAME="eval-worker",  # getpass.getuser(): the worker's uid has no passwd entry
        TMPDIR=str(private.tmp),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        TORCH_EXTENSIONS_DIR=str(builds / "torch_extensions"),
        TRITON_CACHE_DIR=str(builds / "triton"),
        CUDA_CACHE_PATH=str(builds / "nv-compute-cache"),
        CUTE_DSL_CACHE_DIR=str(builds / "cute_dsl"),
    )
    arch = build_cache.gpu_arch()
    if arch:
        env.setdefault("TORCH_CUDA_ARCH_LIST", f"{arch[0]}.{arch[1]}+PTX")  # the same build flags with or without a GPU
        env["EVAL_GPU_ARCH"] = f"{arch[0]}{arch[1]}"
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a build-only worker: compilers, no GPU
    _staged_headers(env)
    return env


STAGED_INCLUDES = (".cutlass/include", ".cutlass/tools/util/include")  # .ci/stage-cutlass.sh's CUTLASS


def _staged_headers(env: dict) -> None:
    """CUTLASS's headers, where .ci/stage-cutlass.sh staged them, on every build's include path as the
    contest's B200 image had them: CPLUS_INCLUDE_PATH (g++ reads it, and nvcc's front end, which
    preprocesses with g++: with or without the emulation's nvcc stand-in) and CUTLASS_PATH unless the
    judge's environment names one (files write -I$CUTLASS_PATH/include). Nothing staged, nothing set."""
    found = [str(ROOT / name) for name in STAGED_INCLUDES if (ROOT / name).is_dir()]
    if not found:
        return
    env["CPLUS_INCLUDE_PATH"] = os.pathsep.join(filter(None, (env.get("CPLUS_INCLUDE_PATH"), *found)))
    env.setdefault("CUTLASS_PATH", str(ROOT / ".cutlass"))


def _own_tree(path: Path, uid: int | None) -> None:
    if uid is None:
        return
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)


class WorkerProcess:
    """One worker process holding (at most) one imported submission."""

    def __init__(self, submission: Path | None, log_path: Path, emulate: bool = False, gpu: bool = True,
                 skip: tuple[str, ...] = ()):
        self.submission = Path(submission).resolve() if submission else None
        self.emulate = emulate  # --emulate-blackwell: stand-ins installed before the submission loads
        self.gpu = gpu  # False: a build-only worker (no GPU visible), see build_cache.prebuild
        self.skip = tuple(skip)  # layers left out: python -m eval doctor --skip alone (diagnosis, judges nothing)
        self.level: str | None = None  # the sandbox level it started at
        self.require_full = False  # leaderboard, batch: below full only where the user chose the level
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None
        self.key = b""
        self.request_fd = self.reply_fd = -1
        self.private: Private | None = None
        self.claim: Claim | None = None  # the lock that says this judge still owns the worker's folder
        self.log: worker_log.LogPump | None = None
        self.uid: int | None = None
        self.info: dict = {}  # the signed hello: what the judge believes about this worker
        self.load_info: dict = {}  # the ready reply (informational: sent after the submission ran)
        self.import_s: float | None = None  # the last import's wall time, builds included
        self.build_key: str | None = None
        self.disk: disk_quota.DiskWatch | None = None  # the quota's watch, from start to close
        self.disk_layer = ""
        self._frozen_at: dict[int, int] | None = None  # CPU time of its processes when last stopped
        self._store_builds = False  # set once the import succeeded: its builds are kept at close
        self._built_by = 0  # when the import ended (ns): files changed later are not kept

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, load_timeout: float = DEFAULT_LOAD_TIMEOUT_S, import_timeout: float | None = None) -> dict:
        """Start the process at this machine's sandbox level (eval/judge/levels.py: found once, by the
        first judge that needs it, and kept) and import the submission; returns the hello info. No
        worker steps down on its own: one that cannot use CUDA at the machine's level (or the level
        the user chose, EVAL_SANDBOX) is a failure that says why. import_timeout bounds the import,
        extended while compilers run under the worker up to load_timeout (the build limit)."""
        import torch

        try:
            chosen = levels.chosen_level()
        except ValueError as exc:
            raise WorkerFailure(str(exc)) from None
        needs_cuda = self.gpu and torch.cuda.is_available()
        found = None
        if chosen or not needs_cuda:
            level = chosen or "full"
        else:
            key = levels.machine_key()
            found = levels.known(key)
            if found is None or self.skip:
                with levels.finding():  # a neighbour finding it now: wait, then read its answer
                    found = None if self.skip else levels.known(key)
                    if found is None:
                        return self._find_level(key, import_timeout or load_timeout, load_timeout)
            level = found["level"]
        info = self._hello(level)
        if needs_cuda and not info.get("cuda"):
            why = text.from_worker(info.get("cuda_error") or "no reason given", 300)
            neighbours = _live_workers(self.claim)
            self.close()
            if any(word in why.lower() for word in RESOURCE_ERRORS):
                raise WorkerFailure(f"CUDA failed in the worker for want of GPU resources, not because of its "
                                    f"sandbox: {why} (is another process holding the GPU?)")
            if found is not None and not neighbours:  # the machine changed under the cache: find it again, once
                levels.forget()
                with levels.finding():
                    return self._find_level(levels.machine_key(), import_timeout or load_timeout, load_timeout)
            where = "the level you chose" if chosen else "this machine's level"
            raise WorkerFailure(f"CUDA failed in the worker at sandbox level {level} ({where}"
                                f"{f', {neighbours} other worker(s) running' if neighbours else ''}): {why}; "
                                "python -m eval doctor shows each layer")
        self._label(info, level, found, bool(chosen))
        self._load(import_timeout or load_timeout, load_timeout)
        return info

    def _find_level(self, key: dict, import_timeout: float, load_timeout: float) -> dict:
        """Under levels.finding(): start at each level, best first, until CUDA works; keep the answer
        for every later worker on this machine (not when layers were left out for diagnosis)."""
        failed = []  # (level, why CUDA failed there)
        for level in levels.LEVELS:
            started = time.monotonic()
            info = self._hello(level)
            if info.get("cuda"):
                found = {"level": level, "failed": [{"level": lv, "why": why} for lv, why in failed]}
                if not self.skip:
                    found = levels.remember(level, failed, time.monotonic() - started, key)
                self._label(info, level, found, False)
                self._load(import_timeout, load_timeout)
                return info
            why = text.from_worker(info.get("cuda_error") or "no reason given", 300)
            self.close()
            if any(word in why.lower() for word in RESOURCE_ERRORS):
                raise WorkerFailure(f"CUDA failed in the worker for want of GPU resources, not because of its "
                                    f"sandbox: {why} (is another process holding the GPU?)")
            if self.skip:  # diagnosis: the level asked for, nothing lower
                raise WorkerFailure(f"CUDA failed in the worker at sandbox level {level} with "
                                    f"{', '.join(self.skip)} left out: {why}")
            failed.append((level, why))
        raise WorkerFailure("the worker cannot use CUDA even without its sandbox (see the worker log)")

    def _label(self, info: dict, level: str, found: dict | None, chosen: bool) -> None:
        if self.require_full and level != "full" and not chosen:
            self.close()
            raise WorkerFailure(f"this machine's worker sandbox reaches only level {level}, below full: not judged "
                                f"(python -m eval doctor says why; --sandbox {level} judges there anyway)")
        self.level = level
        if isinstance(info.get("sandbox"), dict):
            info["sandbox"]["sandbox level"] = levels.describe(level, found, chosen)

    def _hello(self, level: str) -> dict:
        """Start the process; its first reply, signed before the submission is imported, is the
        only source of what the judge believes about it."""
        self.close()
        began = time.monotonic()
        make_judge_undumpable()
        lib = native()
        self.uid = uid = worker_uid(self.submission) if level in UID_LEVELS else None  # else its folders stay
        # root's: a worker that keeps root without its capabilities could not enter a uid's 0700 folder
        sweep_dead()  # what the workers of killed judges left: their processes, folders, shared memory
        self.build_key = build_cache.key(self.submission, self.emulate) if self.submission else "harness"
        self.claim = Claim()
        self.private = private = Private(self.claim.folder, build_cache.Slot(self.build_key))
        for folder in (private.home, private.tmp):
            folder.mkdir()
        if self.submission:
            build_cache.seed(self.build_key, private.builds)
        for folder in (private.root, private.builds):
            _own_tree(folder, uid)
        self.key = secrets.token_bytes(32)
        key_r, key_w = os.pipe()
        os.write(key_w, self.key)
        os.close(key_w)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        writable = [str(private.root), str(private.builds), *_device_paths()]
        readable, listable = _readable_paths(self.submission, lib.path)
        paths = json.dumps({"write": writable, "read": readable, "list": listable, "skip": list(self.skip)})
        cmd = [sys.executable, "-I", "-B", "-c", BOOT, str(req_r), str(rep_w), str(key_r), str(lib.path), level,
               str(uid if uid is not None else -1), paths]
        self.log = worker_log.LogPump(self.log_path)
        spawned = time.monotonic()
        self.process = subprocess.Popen(
            cmd, pass_fds=(req_r, rep_w, key_r), stdin=subprocess.DEVNULL, stdout=self.log.write_fd,
            stderr=self.log.write_fd, env=_worker_env(private, self.gpu), cwd=str(private.tmp),
            start_new_session=True,
        )
        self.claim.started(self.process.pid, uid, self.gpu)
        self.log.started()
        self.disk = self._watch_disk(private, uid)
        for fd in (req_r, rep_w, key_r):
            os.close(fd)
        self.request_fd, self.reply_fd = req_w, rep_r
        reply = self.request("hello", {"emulate": self.emulate}, DEFAULT_HELLO_TIMEOUT_S)
        self.info = _parse_info(reply.header.get("text"))
        self.info["start phases"] = _phases(began, spawned, self.info.pop("start stamps", None))
        if isinstance(self.info.get("sandbox"), dict) and self.disk is not None:  # kept by the judge, not the worker
            self.info["sandbox"]["disk quota"] = self.disk_layer
        return self.info

    def _watch_disk(self, private: Private, uid: int | None) -> disk_quota.DiskWatch:
        """The worker's disk quota (eval/judge/disk_quota.py): a file past it is refused by the kernel,
        everything it holds is watched from here."""
        quota = disk_quota.quota_for(str(private.root))
        build_cache.cache_limit()  # a bad EVAL_BUILD_CACHE stops here, in one line, not at the store
        session = self.process.pid
        fsize = disk_quota.limit_file_size(session, quota)
        self.disk_layer = (f"on ({quota >> 20} MiB on its folders' disk, watched by the judge; one file past it: "
                           f"{'SIGXFSZ' if fsize == 'on' else fsize})")

        def pids():
            return [pid for pid, _, sid, owner in _processes() if sid == session or (uid is not None and owner == uid)]

        try:  # descriptors: a flood of them makes each look slow (red team round 7)
            resource.prlimit(session, resource.RLIMIT_NOFILE, (4096, 4096))
        except (OSError, ValueError):
            pass
        try:  # processes of its uid (root is exempt): no exhausting the machine's pids (round 9)
            resource.prlimit(session, resource.RLIMIT_NPROC, (WORKER_NPROC, WORKER_NPROC))
        except (OSError, ValueError):
            pass
        try:  # the OOM killer's first choice, before any judge or neighbour (its children inherit it)
            Path(f"/proc/{session}/oom_score_adj").write_text("1000")
        except OSError:
            pass
        return disk_quota.DiskWatch([str(private.root), str(private.builds)], pids,
                                    lambda: _kill_rest(session, uid), quota, self.freeze)

    def _load(self, import_timeout: float, build_limit: float) -> None:
        started = time.monotonic()
        try:
            reply = self.request("load", {"submission": str(self.submission) if self.submission else None},
                                 import_timeout, build_limit=build_limit)
        finally:  # how long the import took (its builds included), also when it failed
            self.import_s = round(time.monotonic() - started, 2)
        self.load_info = _parse_info(reply.header.get("text"))
        self.load_info["load_s"] = self.import_s
        self._store_builds = bool(self.submission and self.private)  # at close, once the worker is dead
        self._built_by = time.time_ns()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def freeze(self, frozen: bool) -> int:
        """Stop (True) or continue (False) every process of the worker: its session and, where it
        has one, its own uid. compare freezes the side that is not being timed, so that side's
        threads cannot take the CPU from the other's measurement. A stop is only a signal, and a
        process can continue itself (a timer that sends it SIGCONT: red team round 11), so on
        continuing it returns how long its processes ran on a CPU while they were to be stopped."""
        if not self.alive():
            return 0
        session = self.process.pid
        ran = 0
        if not frozen and self._frozen_at is not None:
            ran = sum(max(0, ns - self._frozen_at.get(pid, 0)) for pid, ns in _cpu_ns(session, self.uid).items())
            self._frozen_at = None
        reaper = _reaper(session)
        if reaper is not None:  # kill(-1) inside its PID namespace: every process there at once
            os.kill(reaper, signal.SIGUSR1 if frozen else signal.SIGUSR2)
            pids = [pid for pid, _, sid, _ in _processes() if sid == session and pid not in (reaper, session)]
        else:
            pids = _signal_worker(session, self.uid, signal.SIGSTOP if frozen else signal.SIGCONT)
        deadline = time.monotonic() + 2.0  # a stop is delivered asynchronously: wait until it holds
        while frozen and time.monotonic() < deadline and any(_running(pid) for pid in pids):
            time.sleep(0.001)
        if frozen:
            self._frozen_at = _cpu_ns(session, self.uid)
        return ran

    def close(self) -> None:
        """Kill the worker's whole process group (and every process of its own uid), then delete its
        private folders. Each step runs whatever the one before met (the folders are the worker's
        own: anything can be in them), so one that fails never keeps the next from running."""
        process, private, store = self.process, self.private, self._store_builds
        self.process, self.private, self._store_builds = None, None, False
        steps = []
        disk, self.disk = self.disk, None
        if disk is not None:  # before the folders go: a walk of what is being deleted is no measure
            steps.append(disk.stop)
        if process is not None:
            steps += [lambda: _kill_worker(process, self.uid), lambda: _sweep_shared_memory(self.uid)]
            steps += [lambda fd=fd: os.close(fd) for fd in (self.request_fd, self.reply_fd) if fd >= 0]
        if self.log is not None:
            steps.append(self.log.close)
        if private is not None:
            # a worker that kept root: whose files are whose cannot be told, and its processes may
            # outlive the kill; its builds are not kept
            if store and self.uid is not None:
                steps.append(lambda: build_cache.store(self.build_key, private.builds, self.uid, self._built_by))
            steps.append(private.slot.release)
        if self.claim is not None:  # its folder is the private root: deleted, then the lock let go
            steps += [lambda claim=self.claim: build_cache.remove_tree(claim.folder), self.claim.release]
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the next step runs; the judge carries on
                print(f"worker clean-up: {type(exc).__name__}: {text.one_line(str(exc), 200)}", file=sys.stderr)
        self.request_fd = self.reply_fd = -1
        self.claim = None

    # -- requests -------------------------------------------------------------------------------
    def request(self, op: str, payload: dict, timeout: float, blob_limit: int = 0,
                build_limit: float | None = None) -> Reply:
        """Run one request in the worker and return its verified reply. Raises WorkerFailure (the
        worker is closed when it died, hung, tampered with the channel or sent more than the request
        can produce: blob_limit bytes of data, a header sized to match)."""
        if not self.alive():
            raise WorkerFailure("worker is not running")
        nonce = secrets.token_hex(16)
        body = pickle.dumps({"op": op, "nonce": nonce, **payload})
        try:
            os.write(self.request_fd, struct.pack(">Q", len(body)) + body)
        except OSError:
            raise self._died()
        clock = Deadline(timeout, build_limit, self.process.pid)
        try:
            reply = self._read_reply(clock, blob_limit)
        except WorkerFailure:
            self.close()
            raise
        if reply.header.get("nonce") != nonce:
            self.close()
            raise WorkerFailure("reply failed authentication: it answers another request (replayed or forged)")
        if reply.kind == "error":
            raise WorkerFailure(text.from_worker(reply.header.get("text", "error")), self._log_tail())
        if reply.kind != REPLY_KINDS.get(op):
            self.close()
            raise WorkerFailure(f"reply failed authentication: a {text.one_line(reply.kind, 40)!r} reply to a "
                                f"'{op}' request (forged)")
        if reply.kind in ("runs", "trial") and not _echo_matches(payload.get("params", {}), reply.header.get("params", {})):
            self.close()
            raise WorkerFailure("reply failed authentication: its parameters are not the ones requested")
        return reply

    def _read_reply(self, clock: "Deadline", blob_limit: int) -> Reply:
        head = self._read(16, clock)
        magic, header_len, blob_len = head[:4], *struct.unpack("<IQ", head[4:])
        if magic != b"NVF1":
            raise WorkerFailure("reply failed authentication: not a frame of the worker's compiled part (forged?)")
        header_limit = TEXT_HEADER_LIMIT + blob_limit // 64
        if header_len > header_limit or blob_len > blob_limit:
            raise WorkerFailure(f"reply failed authentication: {header_len} + {blob_len} bytes, more than the request "
                                f"can produce ({header_limit} + {blob_limit})")
        header = self._read(header_len, clock)
        blob = self._read(blob_len, clock)
        mac = self._read(32, clock)
        expected = hmac.new(self.key, hashlib.sha256(header + blob).digest(), hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise WorkerFailure("reply failed authentication: bad signature (forged or tampered result channel)")
        try:
            parsed = json.loads(header)
        except ValueError:
            raise WorkerFailure("reply failed authentication: unreadable header")
        if not isinstance(parsed, dict):
            raise WorkerFailure("reply failed authentication: unreadable header")
        return Reply(kind=str(parsed.get("kind")), header=parsed, blob=blob)

    def _read(self, n: int, clock: "Deadline") -> bytes:
        chunks, got = [], 0
        while got < n:
            ready, _, _ = select.select([self.reply_fd], [], [], min(1.0, clock.left()))
            if not ready:
                if clock.expired():
                    raise WorkerFailure(clock.reason())
                continue
            chunk = os.read(self.reply_fd, min(n - got, 1 << 24))
            if not chunk:
                raise self._died()
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _died(self) -> WorkerFailure:
        code = self.process.wait(timeout=30) if self.process else None
        if self.disk is not None and self.disk.reason:
            return WorkerFailure(self.disk.reason, self._log_tail())
        return WorkerFailure(_death_reason(code), self._log_tail())

    def _log_tail(self, lines: int = 15) -> str:
        return self.log.tail(lines) if self.log else ""


DEFAULT_HELLO_TIMEOUT_S = 300.0  # python, torch and CUDA start (seconds on a cold machine)


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


def _kill_worker(process: subprocess.Popen, uid: int | None) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _kill_rest(process.pid, uid)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    _kill_rest(process.pid, uid, settle=True)


class Claim:
    """A worker's private folder `<cache>/workers/w-XXXXXXXX` and its lock file beside it (the
    judge's, out of the worker's reach), locked for as long as this judge lives. The lock file names
    the worker's session and uid once it has started, so that a judge killed before it could clean
    up (SIGKILL, the OOM killer, `batch --limit`) leaves nothing for long: the next worker start on
    this machine (sweep_dead) finds the lock free and kills what is left of that worker, then
    deletes its folder and shared memory."""

    def __init__(self):
        workers = build.cache_root() / "workers"
        workers.mkdir(parents=True, exist_ok=True)
        os.chmod(workers, 0o711)
        # the lock first, then the folder: a folder without a lock is a leftover. The lock file is
        # locked before it has its name (made under a name sweep_dead never looks at, then linked):
        # a neighbour's sweep that opened it between its creation and its flock took it for a dead
        # judge's, unlinked it, and a later sweep deleted the live worker's folder
        hidden = workers / f".new-{secrets.token_hex(8)}"
        fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else holds it
        try:
            while True:
                name = f"w-{secrets.token_hex(6)}"
                try:
                    os.link(hidden, workers / f"{name}.lock")
                except FileExistsError:
                    continue
                break
        finally:
            os.unlink(hidden)
        self.fd, self.folder = fd, workers / name
        self.folder.mkdir(mode=0o700)

    def started(self, session: int, uid: int | None, gpu: bool = True) -> None:
        """Record the worker's session (its pid, with the start time that tells it from a later
        process of the same number), uid, and whether it sees the GPU."""
        record = {"session": session, "started": _start_time(session), "uid": uid, "gpu": gpu}
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(record).encode(), 0)

    def release(self) -> None:
        try:
            os.unlink(f"{self.folder}.lock")
        finally:
            os.close(self.fd)


def _live_workers(own: "Claim | None") -> int:
    """How many other workers on this machine that see the GPU have a judge alive (their lock files
    are held; a build-only worker, or one not started yet, is no neighbour on the GPU)."""
    workers = build.cache_root() / "workers"
    count = 0
    for lock in workers.glob("w-*.lock") if workers.is_dir() else ():
        if own is not None and lock == Path(f"{own.folder}.lock"):
            continue
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free: its judge is gone (sweep_dead's)
        except OSError:
            try:
                count += bool(json.loads(os.pread(fd, 4096, 0) or b"{}").get("gpu"))
            except (OSError, ValueError, AttributeError):
                pass
        finally:
            os.close(fd)
    return count


def sweep_dead() -> list[str]:
    """Clean up after every worker whose judge is gone: a lock file that nobody holds. Kills what
    is left of the worker (its session, where that number still belongs to it, and its own uid),
    deletes its shared memory, its folder and the lock. Returns the folders swept."""
    workers = build.cache_root() / "workers"
    if not workers.is_dir():
        return []
    swept = []
    for folder in workers.glob("w-*"):
        if folder.is_dir() and not folder.is_symlink() and not Path(f"{folder}.lock").exists():
            build_cache.remove_tree(folder)  # its lock is gone (a judge of an older harness, or a failed clean-up)
            swept.append(str(folder))
    for hidden in workers.glob(".new-*"):  # a lock file whose judge died before it had its name
        try:
            if time.time() - hidden.lstat().st_mtime < 60:  # (one being made now is locked at once)
                continue
            fd = os.open(hidden, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(hidden)
        except OSError:
            pass
        finally:
            os.close(fd)
    for lock in sorted(workers.glob("w-*.lock")):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino != os.stat(lock).st_ino:
                raise OSError("released while we looked")
        except OSError:
            os.close(fd)  # its judge lives (or has just cleaned up itself)
            continue
        try:
            try:
                record = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                record = {}
            session, uid = record.get("session"), record.get("uid")
            if isinstance(session, int) and _start_time(session) not in (None, record.get("started")):
                session = None  # the number is another process's now (the worker's session has no one left)
            if isinstance(session, int) or isinstance(uid, int):
                _kill_rest(session if isinstance(session, int) else -1, uid if isinstance(uid, int) else None,
                           settle=True)
                _sweep_shared_memory(uid if isinstance(uid, int) else None)
            folder = lock.with_suffix("")
            build_cache.remove_tree(folder)
            os.unlink(lock)
            swept.append(str(folder))
        except Exception as exc:  # noqa: BLE001 - a leftover that cannot be swept must not stop a judge
            print(f"sweeping {lock.name}: {type(exc).__name__}: {text.one_line(str(exc), 200)}", file=sys.stderr)
        finally:
            os.close(fd)
    return swept


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


def _reaper(pid: int) -> int | None:
    """The first process of the worker's PID namespace: the only child of the judge's child `pid`
    (eval/worker/sandbox.py own_pid_namespace)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) == 1 and os.readlink(f"/proc/{children[0]}/ns/pid") != os.readlink(f"/proc/{pid}/ns/pid"):
            return int(children[0])
    except OSError:
        pass
    return None  # no namespace (not root, or EVAL_SANDBOX=none): the judge's child is the worker


def _running(pid: int) -> bool:
    """The process exists and is not stopped."""
    try:
        return _stat(pid)[0] not in "TtZX"
    except OSError:
        return False


def _processes():
    """(pid, command name, session id, uid) of every process."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if len(rest) > 3:
            yield int(pid), comm, int(rest[3]), uid


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


def _sweep_shared_memory(uid: int | None) -> None:
    """Delete what the worker's own uid left in /dev/shm (it outlives processes)."""
    if uid is None:
        return
    try:
        entries = list(os.scandir(SHARED_MEMORY))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid == uid:
                if entry.is_dir(follow_symlinks=False):
                    build_cache.remove_tree(Path(entry.path))
                else:
                    os.unlink(entry.path)
        except OSError:
            pass


def _signal_uid(uid: int, sig: int) -> None:
    """Signal every process of uid at once: a child that becomes uid and calls kill(-1, sig),
    which the kernel applies to all of them atomically (a chain of forks cannot outrun it)."""
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, sig)
        finally:
            os._exit(0)
    os.waitpid(child, 0)


def _signal_worker(session: int, uid: int | None, sig: int) -> list[int]:
    """Send sig to everything the worker started: every process of its own uid at once (where it
    has one), then each process found in its session or of its uid; returns those found."""
    if uid is not None and os.geteuid() == 0:
        _signal_uid(uid, sig)
    found = [pid for pid, _, sid, owner in _processes() if sid == session or (uid is not None and owner == uid)]
    for pid in found:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return found


def _kill_rest(session: int, uid: int | None, settle: bool = False) -> None:
    """SIGKILL everything the worker started: its session (which no process of it can leave) and,
    where it has a uid of its own, every process of that uid. settle: again and again until a
    pass finds none (a chain of forks outruns one pass over /proc), for at most 5 s."""
    deadline = time.monotonic() + 5
    while True:
        found = _signal_worker(session, uid, signal.SIGKILL)
        if not settle or not found or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _phases(began: float, spawned: float, stamps) -> dict:
    """Seconds of each step of a worker's start (informational: the worker's own clock readings,
    CLOCK_MONOTONIC as the judge's): the judge's preparation, then each phase the worker names."""
    phases = {"judge": round(spawned - began, 3)}
    if isinstance(stamps, dict) and all(isinstance(v, (int, float)) for v in stamps.values()):
        last = spawned
        for name, at in stamps.items():
            phases[str(name)[:40]] = round(float(at) - last, 3)
            last = float(at)
    return phases


def _parse_info(raw) -> dict:
    """A reply's JSON text as a dict of plain values, or {} (never an exception)."""
    try:
        info = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _echo_matches(asked, echoed) -> bool:
    """Every parameter we sent comes back unchanged (numbers compared as floats)."""
    if isinstance(asked, dict):
        return isinstance(echoed, dict) and all(k in echoed and _echo_matches(v, echoed[k]) for k, v in asked.items()
                                                if k not in ("steps",)) and (
            "steps" not in asked or _steps_match(asked["steps"], echoed.get("steps")))
    if isinstance(asked, (list, tuple)):
        return isinstance(echoed, list) and len(asked) == len(echoed) and all(map(_echo_matches, asked, echoed))
    if isinstance(asked, bool) or isinstance(echoed, bool):
        return asked == echoed
    if isinstance(asked, (int, float)):
        return isinstance(echoed, (int, float)) and float(asked) == float(echoed)
    return True  # strings and other values are not echoed


def _steps_match(asked, echoed) -> bool:
    keys = ("seed", "reuse", "hash_args", "canary")
    return isinstance(echoed, list) and len(echoed) <= len(asked) and all(
        _echo_matches({k: a[k] for k in keys}, e) for a, e in zip(asked, echoed))


def _death_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = {"SIGSEGV": " (segfault)", "SIGKILL": " (killed: out of host memory?)", "SIGABRT": " (abort)",
                "SIGXFSZ": f" (a file past the worker's disk quota: raise {disk_quota.QUOTA_ENV} if a build needs more)"}
        return f"crashed: worker killed by {name}{hint.get(name, '')}"
    return f"crashed: worker process exited with code {exitcode} (os._exit or sys.exit in the submission?)"
