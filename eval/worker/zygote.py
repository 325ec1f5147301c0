"""The zygote: a process that imports torch once (never CUDA, never anything of a submission) and forks
each worker from that state, so a worker's start is a fork, its sandbox and its CUDA context, not a
Python start and a 3-4 s `import torch` (H100, 2026-11-27: 4.2 s of a 4.6 s start).

Started by the judge (eval/judge/zygote.py) as `python -I -B -c BOOT SOCKET_FD JUDGE_PID` with the
workers' filtered environment (no secret of the judge's: its memory is every worker's). Requests
come over a unix SOCK_SEQPACKET socket: JSON {"args", "env", "cwd"} with four descriptors (the
worker's log, then its request, reply and key pipes). For each, the zygote forks; the child becomes
exactly what `python -I -B -c BOOT ...args` started by the judge would be (a session of its own, the
log on stdout and stderr, nothing else open, the worker's environment, folder and sys.path), and
runs eval.worker's entry, which puts every sandbox layer on before anything of the submission
exists. Nothing passes from one worker to the next: each is forked from the zygote, which never ran
one. The zygote answers {"pid"} and, when a child ends, {"exit": pid, "code"} (Popen's returncode:
minus the signal that killed it). It exits when the judge's end closes the socket (SIGKILL too).
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import random
import resource
import select
import signal
import socket
import sys
import time

MAX_MESSAGE = 1 << 20
FDS = 4  # log, request, reply, key


def _send(sock: socket.socket, message: dict) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:  # the judge is gone
        os._exit(0)


def _child(request: dict, fds: list[int], base_path: list[str]) -> None:
    """In the forked child: become the worker the judge asked for, then run its entry. Never returns."""
    code = 1
    try:
        os.setsid()
        log, req_r, rep_w, key_r = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        keep = {0, 1, 2, req_r, rep_w, key_r}
        for name in os.listdir("/proc/self/fd"):  # nothing else stays open: the socket, pidfds, log, null
            fd = int(name)
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT
                          else signal.SIG_IGN if sig == signal.SIGPIPE else signal.SIG_DFL)
        for name, value in (request.get("limits") or {}).items():  # before any fork of the worker's:
            if name == "oom_score_adj":  # its children inherit them (the judge sets them again later)
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write(str(int(value)))
            else:
                resource.setrlimit(getattr(resource, name), (int(value), int(value)))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = [*request["env"].get("EVAL_WORKER_PATH", "").split(os.pathsep), *base_path]
        importlib.invalidate_caches()
        import tempfile
        tempfile.tempdir = None  # TMPDIR is the worker's
        random.seed()  # not the zygote's state, shared by every child
        sys.argv = ["-c", str(req_r), str(rep_w), str(key_r), *request["args"]]
        import runpy

        runpy.run_module("eval.worker", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - said in the worker's log, as Python would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def main(sock_fd: int, judge: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no process of its uid reads or traces it
    # No PR_SET_PDEATHSIG here: it fires when the judge's *thread* that started the zygote ends (a
    # thread pool's, through eval.api), which would kill every worker it forked. The judge's end
    # closes the socket instead (also under SIGKILL), and the zygote exits at once; its children die
    # with it (each sets PR_SET_PDEATHSIG against the zygote's only thread).
    if os.getppid() != judge:
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judge ends it (the socket), not a Ctrl-C
    sock = socket.socket(fileno=sock_fd)
    started = time.monotonic()
    prefix = os.environ.get("EVAL_WORKER_PATH", "").split(os.pathsep)
    base_path = sys.path[len(prefix):] if sys.path[:len(prefix)] == prefix else list(sys.path)
    import torch  # noqa: F401 - the point: once, here (it starts no CUDA)

    from eval.worker import driver, sandbox  # noqa: F401 - the worker's own modules, standard library and torch

    _send(sock, {"ready": True, "import_s": round(time.monotonic() - started, 3), "pid": os.getpid()})
    children: dict[int, int] = {}  # pidfd -> pid
    while True:
        ready, _, _ = select.select([sock, *children], [], [])
        for fd in ready:
            if fd is sock:
                try:
                    message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, FDS)
                except OSError:
                    os._exit(0)
                if not message:  # the judge closed it: its workers are its to end
                    os._exit(0)
                request = None
                try:
                    request = json.loads(message)
                    if len(fds) != FDS:
                        raise ValueError(f"{len(fds)} descriptors, not {FDS}")
                except ValueError as exc:
                    for f in fds:
                        os.close(f)
                    _send(sock, {"error": str(exc)[:200], "id": request.get("id") if isinstance(request, dict) else None})
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                try:
                    pid = os.fork()
                except OSError as exc:  # no process to be had (pids, memory): this worker only
                    for f in fds:
                        os.close(f)
                    _send(sock, {"error": f"fork: {exc}", "id": request.get("id")})
                    continue
                if pid == 0:
                    _child(request, fds, base_path)
                for f in fds:
                    os.close(f)
                children[os.pidfd_open(pid)] = pid
                _send(sock, {"pid": pid, "id": request.get("id")})
            else:
                pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
