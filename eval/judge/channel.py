"""The judge's handle on one worker process: start it sandboxed, send it requests, and accept only
replies that its compiled part signed.

The worker is `python -m eval.worker` with three pipes: requests (judge -> worker, pickled by us),
replies (worker -> judge, a frame of JSON header + bytes + HMAC-SHA256, never unpickled) and a
one-shot pipe that carries the 32-byte key to the compiled part before the submission is imported.
A reply whose MAC, nonce or echoed parameters do not match what we asked is a tampered channel and
fails the run. The worker runs in its own process group (killed whole), with a scrubbed environment,
its stdout/stderr in a log file, and (as root) an unprivileged uid where the tree is readable by it.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import hmac
import json
import os
import pickle
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval import problem_folder
from eval.cases import ROOT
from eval.worker import build

DEFAULT_LOAD_TIMEOUT_S = 900.0  # first import of a submission may compile (load_inline ~70 s, CuTe)
REPLY_KINDS = {"load": "ready", "trial": "trial", "runs": "runs", "baseline": "runs", "profile": "text",
               "configs": "text"}
MAX_HEADER = 256 << 20
MAX_BLOB = 4 << 30
NOBODY = 65534
SANDBOX_LEVELS = ("full", "no-uid", "none")  # tried in order while CUDA does not work inside the worker
_LEVEL: list[str] = []  # the level that worked in this process
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
    """As root: the unprivileged uid the worker runs as, if it can read everything it needs."""
    if os.geteuid() != 0 or os.environ.get("EVAL_WORKER_UID") == "0":
        return None
    import torch

    needed = [Path(sys.executable), Path(os.__file__).parent, Path(torch.__file__).parent,
              problem_folder.current().root / "reference.py", ROOT / "eval" / "worker" / "driver.py"]
    needed += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if submission:
        needed.append(Path(submission))
    return NOBODY if all(_readable_by_others(p) for p in needed) else None


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


def _worker_env(home: Path, scratch: Path) -> dict:
    problem = problem_folder.current()
    passed = ENV_PASSED + tuple(problem.hook("WORKER_ENV", ()))
    env = {k: v for k, v in os.environ.items() if k in passed or k.startswith(ENV_PREFIXES)}
    extra = os.environ.get("PYTHONPATH", "")
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(problem.root), str(ROOT), extra])),  # the problem's files first
        EVAL_PROBLEM_DIR=str(problem.root),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        HOME=str(home),
        TMPDIR=str(scratch),
        XDG_CACHE_HOME=str(home / ".cache"),
        TORCH_EXTENSIONS_DIR=str(home / "torch_extensions"),
        TRITON_CACHE_DIR=str(home / "triton"),
    )
    return env


def _own(path: Path, uid: int | None) -> None:
    if uid is not None:
        os.chown(path, uid, uid)


class WorkerProcess:
    """One worker process holding (at most) one imported submission."""

    def __init__(self, submission: Path | None, log_path: Path, emulate: bool = False):
        self.submission = Path(submission).resolve() if submission else None
        self.emulate = emulate  # --emulate-blackwell: stand-ins installed before the submission loads
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None
        self.key = b""
        self.request_fd = self.reply_fd = -1
        self.scratch: Path | None = None
        self.info: dict = {}

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, load_timeout: float = DEFAULT_LOAD_TIMEOUT_S) -> dict:
        """Start the process and import the submission; returns the worker's ready info. Where the
        judge has CUDA and the sandboxed worker has not, the worker is started again with less
        sandbox (the report names what was left out)."""
        import torch

        first = os.environ.get("EVAL_SANDBOX") or (_LEVEL[0] if _LEVEL else "full")  # the user's choice first
        if first not in SANDBOX_LEVELS:
            raise WorkerFailure(f"EVAL_SANDBOX={first} is not one of {', '.join(SANDBOX_LEVELS)}")
        levels = SANDBOX_LEVELS[SANDBOX_LEVELS.index(first):]
        for level in levels:
            info = self._start(load_timeout, level)
            if info.get("cuda") or not torch.cuda.is_available():
                _LEVEL[:] = [level]
                return info
            self.close()
        raise WorkerFailure("the worker cannot use CUDA even without its sandbox (see the worker log)")

    def _start(self, load_timeout: float, level: str) -> dict:
        self.close()
        make_judge_undumpable()
        lib = native()
        uid = worker_uid(self.submission)
        root = build.cache_root()
        home = root / f"worker-{uid if uid is not None else os.geteuid()}"
        home.mkdir(parents=True, exist_ok=True)
        _own(home, uid)
        (root / "scratch").mkdir(exist_ok=True)
        self.scratch = Path(tempfile.mkdtemp(prefix="w-", dir=root / "scratch"))
        _own(self.scratch, uid)
        self.key = secrets.token_bytes(32)
        key_r, key_w = os.pipe()
        os.write(key_w, self.key)
        os.close(key_w)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        writable = [str(self.scratch), str(home), "/dev"]
        cmd = [sys.executable, "-m", "eval.worker", str(req_r), str(rep_w), str(key_r), str(lib.path), level,
               str(uid if uid is not None else -1), *writable]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                cmd, pass_fds=(req_r, rep_w, key_r), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=_worker_env(home, self.scratch), cwd=str(self.scratch), start_new_session=True,
            )
        for fd in (req_r, rep_w, key_r):
            os.close(fd)
        self.request_fd, self.reply_fd = req_w, rep_r
        reply = self.request("load", {"submission": str(self.submission) if self.submission else None,
                                      "emulate": self.emulate}, load_timeout)
        self.info = json.loads(reply.header.get("text") or "{}")
        return self.info

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait(timeout=30)
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.process, self.scratch, self.request_fd, self.reply_fd = None, None, -1, -1

    # -- requests -------------------------------------------------------------------------------
    def request(self, op: str, payload: dict, timeout: float) -> Reply:
        """Run one request in the worker and return its verified reply. Raises WorkerFailure (the
        worker is closed when it died, hung or tampered with the channel)."""
        if not self.alive():
            raise WorkerFailure("worker is not running")
        nonce = secrets.token_hex(16)
        body = pickle.dumps({"op": op, "nonce": nonce, **payload})
        try:
            os.write(self.request_fd, struct.pack(">Q", len(body)) + body)
        except OSError:
            raise self._died()
        deadline = time.monotonic() + timeout
        try:
            reply = self._read_reply(deadline, timeout)
        except WorkerFailure:
            self.close()
            raise
        if reply.header.get("nonce") != nonce:
            self.close()
            raise WorkerFailure("reply failed authentication: it answers another request (replayed or forged)")
        if reply.kind == "error":
            raise WorkerFailure(str(reply.header.get("text", "error")), self._log_tail())
        if reply.kind != REPLY_KINDS.get(op):
            self.close()
            raise WorkerFailure(f"reply failed authentication: a '{reply.kind}' reply to a '{op}' request (forged)")
        if reply.kind in ("runs", "trial") and not _echo_matches(payload.get("params", {}), reply.header.get("params", {})):
            self.close()
            raise WorkerFailure("reply failed authentication: its parameters are not the ones requested")
        return reply

    def _read_reply(self, deadline: float, timeout: float) -> Reply:
        head = self._read(16, deadline, timeout)
        magic, header_len, blob_len = head[:4], *struct.unpack("<IQ", head[4:])
        if magic != b"NVF1" or header_len > MAX_HEADER or blob_len > MAX_BLOB:
            raise WorkerFailure("reply failed authentication: not a frame of the worker's compiled part (forged?)")
        header = self._read(header_len, deadline, timeout)
        blob = self._read(blob_len, deadline, timeout)
        mac = self._read(32, deadline, timeout)
        expected = hmac.new(self.key, header + blob, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise WorkerFailure("reply failed authentication: bad signature (forged or tampered result channel)")
        try:
            parsed = json.loads(header)
        except ValueError:
            raise WorkerFailure("reply failed authentication: unreadable header")
        return Reply(kind=str(parsed.get("kind")), header=parsed, blob=blob)

    def _read(self, n: int, deadline: float, timeout: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.reply_fd], [], [], max(0.0, left))
            if not ready:
                raise WorkerFailure(f"timed out after {timeout:g} s (worker killed; raise --timeout if this is expected)")
            chunk = os.read(self.reply_fd, min(n - got, 1 << 24))
            if not chunk:
                raise self._died()
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _died(self) -> WorkerFailure:
        code = self.process.wait(timeout=30) if self.process else None
        return WorkerFailure(_death_reason(code), self._log_tail())

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


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
        hint = {"SIGSEGV": " (segfault)", "SIGKILL": " (killed: out of host memory?)", "SIGABRT": " (abort)"}
        return f"crashed: worker killed by {name}{hint.get(name, '')}"
    return f"crashed: worker process exited with code {exitcode} (os._exit or sys.exit in the submission?)"
