"""The isolated worker process that runs one submission, and the parent's handle on it.

The parent spawns the worker (multiprocessing "spawn": a fresh interpreter, no inherited CUDA
state), sends it one request at a time over a pipe and waits with a timeout. A worker that hangs is
killed; one that dies (os._exit, segfault, CUDA fault, out of memory) is reported with its exit
status, and the next request starts a fresh one. The worker's stdout and stderr go to a log file, so
nothing a submission prints can reach the report; the parent writes every result itself. The secret
seed is removed from the environment before the worker starts.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import traceback
import uuid
from pathlib import Path

from eval.cases import ROOT, SECRET_SEED_ENV

DEFAULT_LOAD_TIMEOUT_S = 900.0  # first import of a submission may compile (load_inline ~70 s, CuTe)


class WorkerFailure(Exception):
    """A request did not complete: `reason` is one line naming what went wrong."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class Worker:
    """One spawned process holding one imported submission."""

    def __init__(self, submission: Path | None, log_path: Path, env: dict | None = None):
        self.submission = Path(submission) if submission else None
        self.log_path = Path(log_path)
        self.env = dict(env or {})
        self.process = None
        self.conn = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, load_timeout: float = DEFAULT_LOAD_TIMEOUT_S) -> dict:
        """Start the process and import the submission; returns the device description."""
        self.close()
        os.environ.pop(SECRET_SEED_ENV, None)  # never inherited, whatever the caller did
        ctx = multiprocessing.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = ctx.Process(
            target=_worker_main,
            args=(child_conn, str(self.submission) if self.submission else None, str(self.log_path), self.env),
            daemon=True,
        )
        self.process.start()
        child_conn.close()
        self.conn = parent_conn
        return self.call("load", {}, timeout=load_timeout)

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def close(self) -> None:
        if self.process is None:
            return
        try:
            if self.process.is_alive():
                self.conn.send(None)
                self.process.join(timeout=10)
        except (OSError, EOFError, BrokenPipeError):
            pass
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=10)
        self.conn.close()
        self.process = None
        self.conn = None

    # -- requests -------------------------------------------------------------------------------
    def call(self, op: str, payload: dict, timeout: float) -> dict:
        """Run one request in the worker. Raises WorkerFailure (and leaves the worker closed when
        it died or hung)."""
        if not self.alive():
            raise WorkerFailure("worker is not running")
        token = uuid.uuid4().hex
        self.conn.send({"op": op, "payload": payload, "token": token})
        if not self.conn.poll(timeout):
            self.process.kill()
            self.process.join(timeout=10)
            self.close()
            raise WorkerFailure(f"timed out after {timeout:g} s (worker killed; raise --timeout if this is expected)")
        try:
            reply = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(timeout=10)
            reason = _death_reason(self.process.exitcode)
            self.close()
            raise WorkerFailure(reason, self._log_tail())
        if not isinstance(reply, dict) or reply.get("token") != token:
            self.close()
            raise WorkerFailure("worker sent a reply that does not answer the request (tampered channel?)")
        if not reply["ok"]:
            raise WorkerFailure(reply["error"], reply.get("detail", ""))
        return reply["result"]

    def _log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


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


# ------------------------------------------------------------------------------------------------
# Child side


def _worker_main(conn, submission: str | None, log_path: str, env: dict) -> None:
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.environ.update(env)
    os.environ.pop(SECRET_SEED_ENV, None)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from eval import ops  # imports torch; only in the child

    state = ops.WorkerState(submission)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        reply = {"token": request.get("token")}
        try:
            reply["result"] = ops.dispatch(state, request["op"], request["payload"])
            reply["ok"] = True
        except BaseException as exc:  # report everything, including SystemExit from the submission
            reply["ok"] = False
            reply["error"] = ops.describe_error(exc)
            reply["detail"] = traceback.format_exc(limit=8)
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send(reply)
