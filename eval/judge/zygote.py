"""The judge's zygote (eval/worker/zygote.py): one process per judge that has imported torch once and
forks each worker from there, so starting a worker costs its fork, sandbox and CUDA context, not a
Python start and `import torch`. Started as soon as the judge knows it will start workers
(`warm()`), so its import runs while the judge imports and prepares its own.

`spawn()` returns a handle with Popen's part that the judge uses (pid, poll, wait, returncode): the
worker is the zygote's child, and the zygote says when it ended and how. Where no zygote can start
(or EVAL_ZYGOTE=0), `spawn()` returns None and the judge starts `python` as before.

Owns: the zygote process, its socket and the exit codes it reports. It never loads submission code.
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from eval.cases import ROOT
from eval.judge.accounting import _stat

ENV_PASSED = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "CC", "CXX", "MAX_JOBS", "OMP_NUM_THREADS",
              "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "EVAL_FLUSH_L2X")  # of the judge's environment, what workers get
ENV_PREFIXES = ("CUDA_", "NVIDIA_", "CUTE_DSL_", "CUTLASS_")
# the commands whose judge starts workers: `python -m eval CMD` starts the zygote before anything else
WORKER_COMMANDS = {"run", "test", "benchmark", "leaderboard", "profile", "compare", "rank", "accuracy", "tune",
                   "doctor", "batch"}
BOOT = ("import os,sys;sys.path[:0]=os.environ['EVAL_WORKER_PATH'].split(os.pathsep);"
        "from eval.worker import zygote;zygote.main(int(sys.argv[1]),int(sys.argv[2]))")
READY_TIMEOUT_S = 300.0  # a cold machine's first `import torch`
SPAWN_TIMEOUT_S = 30.0


class Unanswered(Exception):
    """A spawn request went out and no worker came of it."""


class ZygoteProcess:
    """A worker forked by the zygote: what the judge uses of subprocess.Popen."""

    def __init__(self, pid: int, zygote: "Zygote"):
        self.pid, self.zygote, self.returncode = pid, zygote, None
        self.args = ["zygote", str(pid)]

    def poll(self):
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None):
        if self.returncode is None:
            code = self.zygote.exit_code(self.pid, timeout)
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = code
        return self.returncode


FOLDER_PREFIX = "eval-zygote-"


def sweep_folders() -> None:
    """The folders of zygotes whose judge was killed (SIGKILL: no atexit), this user's only: each
    names its zygote's pid in `pid`; one without, or whose process is gone, older than a minute, goes."""
    for folder in Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*"):
        try:
            info = folder.lstat()
            if not folder.is_dir() or folder.is_symlink() or info.st_uid != os.geteuid():
                continue
            try:
                pid = int((folder / "pid").read_text())
            except (OSError, ValueError):
                pid = None
            if pid is not None and _exists(pid) or time.time() - info.st_mtime < 60:
                continue
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue


class Zygote:
    def __init__(self, env: dict):
        self.folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        os.chmod(self.folder, 0o700)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**env, "HOME": str(self.folder), "TMPDIR": str(self.folder), "PYTHONUNBUFFERED": "1",
               "EVAL_WORKER_PATH": str(ROOT)}
        self.log_path = self.folder / "zygote.log"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", BOOT, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                cwd=str(self.folder), start_new_session=True)
        theirs.close()
        (self.folder / "pid").write_text(str(self.process.pid))
        self.sock, self.lock = ours, threading.Lock()
        self.replies: queue.Queue = queue.Queue()
        self.exits: dict[int, int] = {}
        self.changed = threading.Condition()
        self.dead = False
        self.info: dict | None = None
        self.failure = ""  # why it could not start (its log's last line)
        self.ready_event = threading.Event()  # its first message, apart from the spawns' replies
        self.next_id = 0
        threading.Thread(target=self._read, name="eval-zygote", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self.sock.recv(1 << 16)
            except OSError:
                message = b""
            if not message:
                with self.changed:
                    self.dead = True
                    self.changed.notify_all()
                self.replies.put(None)
                self.ready_event.set()
                return
            try:
                data = json.loads(message)
            except ValueError:
                continue
            if "exit" in data:
                with self.changed:
                    self.exits[int(data["exit"])] = int(data["code"])
                    self.changed.notify_all()
            elif data.get("ready"):
                self.info = data
                self.ready_event.set()
            else:
                self.replies.put(data)

    def ready(self, timeout: float = READY_TIMEOUT_S) -> bool:
        """Wait (at most timeout) for its import of torch; False if it cannot serve."""
        if not self.ready_event.wait(timeout) or self.dead or not self.info:
            if not self.dead:
                self.failure = self._log_tail() or f"not ready within {timeout:.0f} s"
                self.close()
            elif not self.info and not self.failure:
                self.failure = self._log_tail() or "it ended before it was ready"
            return False
        return True

    def spawn(self, args: list[str], env: dict, cwd: str, fds: list[int], limits: dict) -> ZygoteProcess | None:
        """Fork a worker; None where the zygote cannot serve. A request that went out and got no
        answer raises Unanswered: its descriptors may have reached a child (the caller starts anew
        with new ones) and the zygote is closed."""
        if not self.ready():
            return None
        with self.lock:
            self.next_id += 1
            ident = self.next_id
            try:
                socket.send_fds(self.sock, [json.dumps({"args": args, "env": env, "cwd": cwd, "limits": limits,
                                                         "id": ident}).encode()], fds)
            except OSError as exc:
                self.close()
                raise Unanswered(f"the worker zygote took no request ({exc})") from None
            deadline = time.monotonic() + SPAWN_TIMEOUT_S
            while True:
                try:
                    reply = self.replies.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    reply = None
                if reply is None or reply.get("id") == ident:
                    break
            if not reply or "pid" not in reply:
                self.close()
                raise Unanswered("the worker zygote did not fork the worker"
                                 + (f" ({reply['error']})" if reply and reply.get("error") else ""))
            return ZygoteProcess(int(reply["pid"]), self)

    def _log_tail(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return lines[-1].strip()[:200] if lines else ""

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The worker's Popen-style returncode once the zygote reported its end; None if it has not
        ended within timeout. Without a zygote to say (it died), a worker gone counts as killed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.changed:
            while True:
                if pid in self.exits:
                    return self.exits.pop(pid)
                if self.dead and not _exists(pid):
                    return -9
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self.changed.wait(min(left if left is not None else 1.0, 0.2 if self.dead else 1.0))

    def close(self) -> None:
        with self.changed:
            self.dead = True
            self.changed.notify_all()
        try:
            self.sock.close()
        except OSError:
            pass
        self.process.kill()  # nothing of its own to save; its workers die with it (each set PR_SET_PDEATHSIG)
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _exists(pid: int) -> bool:
    """pid names a live process (not a zombie waiting to be reaped)."""
    try:
        return _stat(pid)[0] not in "ZX"
    except (OSError, ValueError, IndexError):
        return False


_ZYGOTE: list[Zygote] = []
_GUARD = threading.Lock()
_STARTED: list[bool] = []
_FAILED: list[str] = []


def enabled() -> bool:
    return os.environ.get("EVAL_ZYGOTE", "1") != "0" and hasattr(socket, "send_fds") and hasattr(os, "pidfd_open")


def warm(env: dict) -> Zygote | None:
    """The judge's zygote, started now if it is not running (its import then runs beside the judge's).
    One that never became ready is not tried again in this judge: its workers start Python anew."""
    if not enabled():
        return None
    with _GUARD:
        if _ZYGOTE and _ZYGOTE[0].dead:
            gone = _ZYGOTE.pop()
            if gone.failure:
                _FAILED.append(gone.failure)
                print(f"warning: the worker zygote could not start ({gone.failure}); each worker starts Python "
                      "and torch anew", file=sys.stderr)
        if _FAILED:
            return None
        if not _ZYGOTE:
            sweep_folders()
            try:
                _ZYGOTE.append(Zygote(env))
            except OSError:
                return None
            if not _STARTED:
                _STARTED.append(True)
                atexit.register(shutdown)
        return _ZYGOTE[0]


def environment() -> dict:
    """The part of the judge's environment every worker gets (worker_start adds each worker's own)."""
    return {k: v for k, v in os.environ.items() if k in ENV_PASSED or k.startswith(ENV_PREFIXES)}


def warm_early(argv: list[str]) -> None:
    """`python -m eval`'s first step: for a command that starts workers, the zygote now, so that its
    `import torch` runs while the judge imports its own. Global options with a value are skipped."""
    args = iter(argv)
    for arg in args:
        if arg in ("--problem", "--sandbox"):
            next(args, None)
        elif not arg.startswith("-"):
            if arg in WORKER_COMMANDS:
                warm(environment())
            return


def shutdown() -> None:
    with _GUARD:
        while _ZYGOTE:
            _ZYGOTE.pop().close()
