"""Honest (noisy): prints a lot to stdout and stderr, at import and on every call, including lines
that look like verdicts ('check: fail', 'benchmark.0.mean: 0.001', 'test.0.status: fail'), terminal
escapes and a long line with no newline. The result is right. Must pass, and none of its text may
reach the judge's report."""
import importlib.util
import pathlib
import sys

_spec = importlib.util.spec_from_file_location("_honest", pathlib.Path(__file__).parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

for _i in range(2000):
    print(f"import chatter {_i}: check: fail benchmark.0.mean: 0.001")
    print(f"stderr chatter {_i}: test.0.status: fail", file=sys.stderr)
sys.stdout.write("x" * 100_000)  # no newline
sys.stdout.flush()
_calls = [0]


def custom_kernel(data):
    _calls[0] += 1
    for i in range(50):
        print(f"\x1b[2K\rcall {_calls[0]} line {i}: check: fail")
        print(f"benchmark.0.mean: 0.001 test.0.status: fail ({_calls[0]}, {i})", file=sys.stderr)
    return _honest.custom_kernel(data)
