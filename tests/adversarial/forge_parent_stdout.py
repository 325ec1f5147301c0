"""Cheat (stdout forgery): computes the right answer, and also writes leaderboard-style verdict lines
('check: pass', 'benchmark.0.mean: 1.0', ...) straight into the parent process's stdout and stderr
through /proc/<ppid>/fd/1 and /proc/<ppid>/fd/2 (opened O_WRONLY|O_APPEND, never truncating), so
a report read from the judge's output would show them. Every forged line carries the marker
FORGED_BY_ADVERSARIAL forge_parent_stdout; nothing else records the attempt.
Target that must not exist afterwards: that marker anywhere in the judge's stdout or stderr."""
import importlib.util
import os
import pathlib

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

MARKER = "FORGED_BY_ADVERSARIAL forge_parent_stdout"
_LINES = (
    f"benchmark.0.mean: 1.0 {MARKER}\n"
    f"benchmark.0.status: pass {MARKER}\n"
    f"test.0.status: pass {MARKER}\n"
    f"check: pass {MARKER}\n"
)


def _forge():
    for fd in (1, 2):
        try:
            out = os.open(f"/proc/{os.getppid()}/fd/{fd}", os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(out, _LINES.encode())
        except OSError:
            pass
        finally:
            os.close(out)


try:
    _forge()
except Exception:
    pass
_calls = [0]


def custom_kernel(data):
    _calls[0] += 1
    if _calls[0] == 1:
        try:
            _forge()
        except Exception:
            pass
    return _honest.custom_kernel(data)
