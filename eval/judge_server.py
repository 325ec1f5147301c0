"""The kept judge's process (eval/kept_judge.py starts it: `python -m eval.judge_server`): command
lines read from stdin, each run as `python -m eval` runs it (eval/cli.py), in this one process, with
what each command set up put back after it; a JSON reply line per command on stdout. Protocol and
purpose: eval/kept_judge.py. Never loads candidate code: that runs in the workers, as always.
"""
from __future__ import annotations

import json
import os
import signal
import sys

from eval.kept_judge import EXPECTED_EXITS, MAX_COMMANDS


def _one(argv: list[str], stderr_path: str) -> int:
    """One command line, as `python -m eval` would run it; its exit code. Everything it set up is put
    back afterwards."""
    import gc

    from eval import cases, cli, problem_folder, progress
    from eval.judge import zygote

    environ, term = dict(os.environ), signal.getsignal(signal.SIGTERM)
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    code = 1
    try:
        cases._SECRET.clear()  # a secret seed of its own for every candidate, as a fresh judge draws
        cli.cli(argv)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - a harness bug: said on this candidate's stderr, exit 1 as python would
        import traceback

        traceback.print_exc()
    finally:
        gc.collect()  # while fd 2 is still this candidate's: what they print is its
        _release_gpu_memory()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        signal.signal(signal.SIGTERM, term)
        cases._SECRET.clear()
        for fdopen in cli._POPCORN_FD:
            try:
                fdopen.close()
            except OSError:
                pass
        cli._POPCORN_FD.clear()
        os.environ.clear()
        os.environ.update(environ)
        progress._STATE.update({"on": False, "start": None, "bar": None})
        problem_folder._CURRENT.clear()
        zygote._FAILED.clear()  # a zygote that could not start is tried again for the next candidate
    return code


def _release_gpu_memory() -> None:
    """The caching allocator's free blocks back to the GPU: the next candidate's workers share it."""
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def serve() -> None:
    """Requests on stdin until it closes (or a SIGTERM during a candidate), replies on stdout."""
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # the commands' own prints: batch reads the -o record instead
    os.close(null)
    served = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        code = _one(list(request["argv"]), str(request["stderr"]))
        served += 1
        replies.write(json.dumps({"exit": code}) + "\n")
        replies.flush()
        # leave (the slot starts a new process) when asked to stop (batch's limit: its workers are
        # closed), after an exit the commands do not make by design (a harness bug: state unknown),
        # and after MAX_COMMANDS (whatever drifts in a long-lived process stays bounded)
        if code not in EXPECTED_EXITS or served >= MAX_COMMANDS:
            break


if __name__ == "__main__":
    from eval.judge import zygote

    if zygote.enabled():
        zygote.warm(zygote.environment())  # its import of torch beside this process's own
    serve()
