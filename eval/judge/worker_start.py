"""The judge's handle on one worker process, and how it starts: sandboxed (a level of
SANDBOX_LEVELS, the one this machine reaches: eval/judge/levels.py), with its environment, its private
folders and its compiled part; then the signed `hello` and the submission's import.

The worker is `python -m eval.worker` with three pipes: requests (judge -> worker, pickled by us),
replies (worker -> judge, see eval/judge/wire.py) and a one-shot pipe that carries the 32-byte key
to the compiled part before the submission is imported.

Each worker starts isolated: `python -I -B` (no PYTHONPATH, user site or bytecode writes; the
harness and problem paths are passed explicitly), a private folder (HOME, TMPDIR, every tool cache)
created for it, its build caches copied in from the judge's build cache (eval/judge/build_cache.py),
and, as root, a uid of its own where the tree is readable by one. What the judge believes about the
worker (its sandbox layers, whether CUDA works in it, what is emulated) comes from the signed
`hello` reply the worker sends before any of the submission exists; later words are informational.

Owns: WorkerProcess (its request half is wire.Requests, its stop and end lifecycle.Control), the
sandbox level's use (eval/judge/levels.py finds and keeps it), the worker's environment and uid, the compiled part's digest, and
prebuild. It may not parse frames (wire.py), parse /proc's process files (accounting.py; it only
sets the worker's limits and oom_score_adj), signal or remove a worker's processes and folders
itself (lifecycle.py) or make the path lists (file_policy.py).
"""
from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import hashlib
import json
import os
import resource
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from eval import problem_folder
from eval.cases import ROOT
from eval.judge import build_cache, disk_quota, levels, text, worker_log, zygote
from eval.judge.accounting import _processes
from eval.judge.file_policy import _device_paths, _readable_by_others, _readable_paths, _user_paths
from eval.judge.lifecycle import Claim, Control, _kill_rest, _live_workers, sweep_dead
from eval.judge.wire import Requests, WorkerFailure, _parse_info
from eval.worker import build
from eval.worker.sandbox import UID_LEVELS

DEFAULT_LOAD_TIMEOUT_S = 900.0  # the build limit: an import may take this long while compilers run under it
WORKER_NPROC = 4096  # processes (and threads) of a worker's own uid
WORKER_NOFILE = 4096  # descriptors: a flood of them makes each look slow (red team round 7)
WORKER_OOM_SCORE_ADJ = 1000  # the OOM killer's first choice, before any judge or neighbour
# a CUDA failure that says the GPU is full or taken: a neighbour's doing, never a reason to step down
RESOURCE_ERRORS = ("out of memory", "busy or unavailable", "memoryallocation", "devicesunavailable")
WORKER_UIDS = (1_000_000_000, 100_000_000)  # first uid and how many: a uid of its own for each worker
BOOT = ("import os,sys,runpy;sys.path[:0]=os.environ['EVAL_WORKER_PATH'].split(os.pathsep);"
        "runpy.run_module('eval.worker',run_name='__main__',alter_sys=True)")
SANDBOX_LEVELS = levels.LEVELS  # eval/judge/levels.py: the machine's level, found once and kept
ENV_PASSED, ENV_PREFIXES = zygote.ENV_PASSED, zygote.ENV_PREFIXES  # the judge's environment workers get


def make_judge_undumpable() -> None:
    """No process of the same uid without CAP_SYS_PTRACE may open our /proc/<pid>/fd or memory."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def warm_zygote() -> zygote.Zygote | None:
    """The judge's zygote (eval/judge/zygote.py), started if it is not: call it early, so that its
    `import torch` runs beside the judge's own work. Its environment is the workers' filtered one
    (ENV_PASSED and ENV_PREFIXES): nothing else of the judge's is in its memory, which every worker
    inherits."""
    return zygote.warm(zygote.environment())


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
        if arch:
            env["EVAL_BUILD_ONLY"] = "1"  # it answers the file's questions about the GPU as this one (driver.py)
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

class WorkerProcess(Requests, Control):
    """One worker process holding (at most) one imported submission."""

    def __init__(self, submission: Path | None, log_path: Path, emulate: bool = False, gpu: bool = True,
                 skip: tuple[str, ...] = ()):
        self.submission = Path(submission).resolve() if submission else None
        self.emulate = emulate  # --emulate-blackwell: stand-ins installed before the submission loads
        self.gpu = gpu  # False: a build-only worker (no GPU visible), see prebuild
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
        self._frozen_at: dict[int, int] | None = None  # CPU time of its processes when first stopped
        self._freezes = 0  # stops not yet let go (Control.freeze: compare's and the disk watch's nest)
        self._freeze_lock = threading.Lock()
        self._store_builds = False  # set once the import succeeded: its builds are kept at close
        self._built_by = 0  # when the import ended (ns): files changed later are not kept
        self.started_by = ""  # "zygote ..." (forked from the judge's zygote, eval/judge/zygote.py) or "python"
        self.defer_import = False  # a folder of its own contract: its evaluator imports the file (own_contract.py)

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

    def _hello(self, level: str, fresh_python: bool = False) -> dict:
        """Start the process; its first reply, signed before the submission is imported, is the
        only source of what the judge believes about it. fresh_python: not from the zygote (after
        a request to it went unanswered: that start's pipes and key are not reused)."""
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
        try:  # a larger pipe: a reply of GBs of outputs in fewer reads (the system's limit may refuse it)
            fcntl.fcntl(rep_r, fcntl.F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        writable = [str(private.root), str(private.builds), *_device_paths()]
        readable, listable = _readable_paths(self.submission, lib.path)
        paths = json.dumps({"write": writable, "read": readable, "list": listable, "skip": list(self.skip)})
        args = [str(lib.path), level, str(uid if uid is not None else -1), paths]
        self.log = worker_log.LogPump(self.log_path)
        env = _worker_env(private, self.gpu)
        forks = None if fresh_python else warm_zygote()
        waiting_since = time.monotonic()
        if forks is not None and not forks.ready():  # its import of torch, once per judge
            forks = None
        spawned = time.monotonic()
        waited = spawned - waiting_since
        # set in the child before its first fork, so its PID namespace's processes have them too
        quota = disk_quota.quota_for(str(private.root))
        limits = {"RLIMIT_NOFILE": WORKER_NOFILE, "RLIMIT_NPROC": WORKER_NPROC,
                  "oom_score_adj": WORKER_OOM_SCORE_ADJ, "RLIMIT_FSIZE": quota}
        try:
            self.process = forks.spawn(args, env, str(private.tmp), [self.log.write_fd, req_r, rep_w, key_r],
                                       limits) if forks else None
        except zygote.Unanswered as exc:
            print(f"warning: {exc}; this worker starts Python anew", file=sys.stderr)
            for fd in (req_r, rep_w, key_r, req_w, rep_r):
                os.close(fd)
            return self._hello(level, fresh_python=True)
        self.started_by = "zygote (torch imported once per judge)" if self.process else "python"
        if self.process is None:  # no zygote here (EVAL_ZYGOTE=0, or it could not start): Python and torch anew
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", BOOT, str(req_r), str(rep_w), str(key_r), *args],
                pass_fds=(req_r, rep_w, key_r), stdin=subprocess.DEVNULL, stdout=self.log.write_fd,
                stderr=self.log.write_fd, env=env, cwd=str(private.tmp), start_new_session=True,
            )
        self.claim.started(self.process.pid, uid, self.gpu)
        self.log.started()
        self.disk = self._watch_disk(private, uid, quota)
        for fd in (req_r, rep_w, key_r):
            os.close(fd)
        self.request_fd, self.reply_fd = req_w, rep_r
        reply = self.request("hello", {"emulate": self.emulate}, DEFAULT_HELLO_TIMEOUT_S)
        self.info = _parse_info(reply.header.get("text"))
        self.info["start phases"] = _phases(began + waited, spawned, self.info.pop("start stamps", None))
        if forks is not None:  # the zygote's start, where this worker waited for it (once per judge)
            self.info["start phases"] = {ZYGOTE_PHASE: round(waited, 3), **self.info["start phases"]}
        self.info["started by"] = self.started_by
        if isinstance(self.info.get("sandbox"), dict) and self.disk is not None:  # kept by the judge, not the worker
            self.info["sandbox"]["disk quota"] = self.disk_layer
        return self.info

    def _watch_disk(self, private: Private, uid: int | None, quota: int) -> disk_quota.DiskWatch:
        """The worker's disk quota (eval/judge/disk_quota.py): a file past it is refused by the kernel,
        everything it holds is watched from here."""
        build_cache.cache_limit()  # a bad EVAL_BUILD_CACHE stops here, in one line, not at the store
        session = self.process.pid
        fsize = disk_quota.limit_file_size(session, quota)
        self.disk_layer = (f"on ({quota >> 20} MiB on its folders' disk, watched by the judge; one file past it: "
                           f"{'SIGXFSZ' if fsize == 'on' else fsize})")

        def pids():
            return [pid for pid, _, sid, owner in _processes() if sid == session or (uid is not None and owner == uid)]

        try:  # descriptors: a flood of them makes each look slow (red team round 7)
            resource.prlimit(session, resource.RLIMIT_NOFILE, (WORKER_NOFILE, WORKER_NOFILE))
        except (OSError, ValueError):
            pass
        try:  # processes of its uid (root is exempt): no exhausting the machine's pids (round 9)
            resource.prlimit(session, resource.RLIMIT_NPROC, (WORKER_NPROC, WORKER_NPROC))
        except (OSError, ValueError):
            pass
        try:  # the OOM killer's first choice, before any judge or neighbour (its children inherit it)
            Path(f"/proc/{session}/oom_score_adj").write_text(str(WORKER_OOM_SCORE_ADJ))
        except OSError:
            pass
        return disk_quota.DiskWatch([str(private.root), str(private.builds)], pids,
                                    lambda: _kill_rest(session, uid), quota, self.freeze)

    def _load(self, import_timeout: float, build_limit: float) -> None:
        started = time.monotonic()
        try:
            reply = self.request("load", {"submission": str(self.submission) if self.submission else None,
                                          **({"defer": True} if self.defer_import else {})},
                                 import_timeout, build_limit=build_limit)
        finally:  # how long the import took (its builds included), also when it failed
            self.import_s = round(time.monotonic() - started, 2)
        self.load_info = _parse_info(reply.header.get("text"))
        self.load_info["load_s"] = self.import_s
        self._store_builds = bool(self.submission and self.private)  # at close, once the worker is dead
        self._built_by = time.time_ns()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


ZYGOTE_PHASE = "zygote (import torch, once)"  # the start phase where a worker waited for the zygote
DEFAULT_HELLO_TIMEOUT_S = 300.0  # python, torch and CUDA start (seconds on a cold machine)


@dataclasses.dataclass(frozen=True)
class Prebuilt:
    ok: bool
    seconds: float
    reason: str = ""


def prebuild(submission: Path, emulate: bool, timeout: float, log_path: Path | None = None,
             import_timeout: float | None = None) -> Prebuilt:
    """Import the submission in a sandboxed worker that sees no GPU, so its builds are stored
    under its key. Best effort: a submission whose import needs the GPU fails here and simply
    builds in its GPU worker later. Bounded as the judge's own import is: import_timeout (its
    --timeout), extended while compilers run under the worker up to timeout (the build limit)."""
    name = build_cache.key(submission, emulate)
    started = time.monotonic()
    if (build_cache.root() / name).is_dir():
        return Prebuilt(True, 0.0, "already built")
    log = log_path or Path(tempfile.gettempdir()) / f"prebuild-{name}.log"
    worker = WorkerProcess(submission, log, emulate=emulate, gpu=False)
    try:
        worker.start(load_timeout=timeout, import_timeout=import_timeout or timeout)
        return Prebuilt(True, time.monotonic() - started)
    except WorkerFailure as failure:
        return Prebuilt(False, time.monotonic() - started, failure.reason)
    finally:
        worker.close()


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
