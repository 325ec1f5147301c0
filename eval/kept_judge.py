"""A judge kept across candidates (`batch`, its Ray actors): one process per GPU slot judges candidate
after candidate, each exactly as `python -m eval MODE FILE ...` judges it (the same command line, run
in this process: eval/cli.py), so that Python, torch, the CUDA context and the worker zygote start
once per slot instead of once per candidate. Each candidate still gets its own fresh sandboxed
workers (forked from the zygote, which never holds candidate code); nothing of a candidate runs in
this process. What a command sets up (the secret seed, the problem folder, the environment,
SIGTERM's handler, POPCORN_FD, the progress clock, cached GPU memory) is put back after each.

The kept process is eval/judge_server.py (`python -m eval.judge_server`, started here; not a command
for people). Protocol: a JSON line per request on stdin, {"argv": [...], "stderr": PATH}; a JSON line per reply on
stdout, {"exit": CODE}. The command's own stdout goes to /dev/null (batch asks for -o), its stderr
to PATH, a file the caller reads for the candidate's last error. A caller that stops waiting (the
candidate's limit) ends the whole process group, as it ends a judge of one candidate (batch.stop_judge),
and starts a new one for the next candidate.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STOP_GRACE_S = 30.0  # a judge past its limit gets this long to close its workers before SIGKILL
KEPT_ENV = "EVAL_BATCH_KEPT"  # 0: one judge process per candidate (as before #39), for comparison
# a kept process leaves (eval/judge_server.py) after an exit the commands do not make by design (pass,
# usage or input error, no GPU, a failed verdict, cannot run here), and after MAX_COMMANDS candidates
EXPECTED_EXITS = {0, 2, 3, 112, 113}
MAX_COMMANDS = 100


def enabled() -> bool:
    return os.environ.get(KEPT_ENV, "1") != "0"


# -- the caller's side ------------------------------------------------------------------------------

class KeptJudge:
    """One kept judge process for one slot (a GPU's CUDA_VISIBLE_DEVICES, or a CPU slot): started at
    the first candidate, started again after one that ended it (a limit, a crash)."""

    def __init__(self, env: dict, cwd: str | os.PathLike):
        self.env, self.cwd = env, str(cwd)
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.NamedTemporaryFile(prefix="kept-judge-", suffix=".log", delete=False)  # noqa: SIM115
        self.buffer = b""
        self.started = 0
        self.pid: int | None = None  # the process that judged (or is judging) the last candidate
        self.served_by_this = 0  # candidates sent to the current process

    def _start(self) -> None:
        self.buffer = b""
        self.log.seek(0)  # what an earlier process said is no later candidate's reason
        self.log.truncate()
        self.proc = subprocess.Popen([sys.executable, "-m", "eval.judge_server"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=self.env, cwd=self.cwd,
                                     start_new_session=True)
        self.started += 1
        self.served_by_this = 0

    def judge(self, argv: list[str], stderr_path: Path, limit: float | None) -> tuple[int | None, str, str | None]:
        """(exit code, stderr, error): the exit code of the command line (None: the process died, or
        was stopped at the limit, and `error` says so when it was the limit)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        proc = self.proc
        self.pid = proc.pid
        self.served_by_this += 1
        deadline = None if limit is None else time.monotonic() + limit
        try:
            proc.stdin.write((json.dumps({"argv": argv, "stderr": str(stderr_path)}) + "\n").encode())
            proc.stdin.flush()
        except OSError:
            return self._dead(stderr_path)
        while b"\n" not in self.buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None, self._stop(stderr_path), f"the judge did not finish within {limit:.0f} s (killed)"
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                return self._dead(stderr_path)
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        code = int(json.loads(line)["exit"])
        if code not in EXPECTED_EXITS or self.served_by_this >= MAX_COMMANDS:  # it leaves after such a one (serve)
            self._reap()
        return code, _read(stderr_path), None

    def _dead(self, stderr_path: Path) -> tuple[int | None, str, None]:
        """The process ended under a candidate (a harness bug, a signal from outside): as a judge that
        died, its exit code (negative: the signal) and what it said."""
        proc, self.proc = self.proc, None
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        from eval.judge import lifecycle

        lifecycle.sweep_dead()
        return code, (_read(stderr_path) + "\n" + self._log_tail()).strip(), None

    def _stop(self, stderr_path: Path) -> str:
        """Past the limit: SIGTERM to the process group (the command closes its workers), SIGKILL after
        STOP_GRACE_S, the leftovers swept, as batch.stop_judge does for a judge of one candidate."""
        from eval.judge import lifecycle

        proc, self.proc = self.proc, None
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            proc.wait()
        lifecycle.sweep_dead()
        return _read(stderr_path)

    def _reap(self) -> None:
        proc, self.proc = self.proc, None
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def _log_tail(self) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def close(self) -> None:
        """End the process (stdin closed: it leaves after its current candidate; killed if it lingers)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""
