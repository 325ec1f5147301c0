"""Honest (a build longer than --timeout): the import compiles with the system's g++ for about 25 s
of wall time, one short compile after another (each a constexpr loop g++ evaluates, ~1 s of one
core), as a load_inline build of several files would. Expected: pass, because past --timeout the
import goes on while real compilers keep busy (--timeout is 5 s here); the same file must not pass
for the slot-holding attacks (idle_compiler_hang, drip_compiler_hang, preload_compiler_hang)."""
import importlib.util
import os
import pathlib
import subprocess
import time

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)

_src = os.path.join(os.environ.get("TMPDIR", "/tmp"), "step.cpp")
with open(_src, "w") as _f:
    _f.write("constexpr unsigned long mix(unsigned long n) {\n  unsigned long h = 1469598103934665603UL;\n"
             "  for (unsigned long i = 0; i < n; ++i) h = (h ^ i) * 1099511628211UL;\n  return h;\n}\n"
             "static_assert(mix(STEPS) != 0, \"\");\n")
_steps, _began = 1 << 20, time.monotonic()
while time.monotonic() - _began < 25:
    _t = time.monotonic()
    subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-DSTEPS={_steps}UL", "-fconstexpr-ops-limit=4294967296",
                    "-fconstexpr-loop-limit=2147483647", _src], check=True)
    if time.monotonic() - _t < 0.5:
        _steps *= 2  # each compile at least half a second, whatever the machine


def custom_kernel(data):
    return _honest.custom_kernel(data)
