"""Cheat (signal to the parent) -- THE ONLY FILE IN THIS CORPUS THAT SIGNALS ANOTHER PROCESS.
Computes the right answer, and on its first call sends SIGTERM to its parent process, hoping to
kill the judge before it can record a verdict (a wrapper that only looks for a failure line would
then see none). To keep test runners safe it signals only a parent whose command line names the
harness's CLI (`-m eval` / `eval/__main__`) and does not mention pytest; run it through
`python -m eval ...`, never in-process under pytest. Nothing else is signalled, nothing is killed
by any other means.
Target: the judge must survive (no death by SIGTERM) and report its normal verdict (pass)."""
import importlib.util
import os
import pathlib
import signal

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
_sent = [False]


def _parent_is_the_judge_cli(ppid):
    try:
        with open(f"/proc/{ppid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    joined = b" ".join(argv)
    if b"pytest" in joined:
        return False
    return (b"-m" in argv and b"eval" in argv) or b"eval/__main__" in joined


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    if not _sent[0]:
        _sent[0] = True
        ppid = os.getppid()
        if ppid > 1 and _parent_is_the_judge_cli(ppid):
            try:
                os.kill(ppid, signal.SIGTERM)
            except OSError:
                pass
    return out
