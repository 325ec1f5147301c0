"""Cheat (the submission's code posing as a compiler, red team round 8): a library of its own,
loaded into the system's gcc with LD_PRELOAD, whose constructor never lets gcc start: it sleeps,
then spins a moment, forever. /proc/<pid>/exe is the real gcc, so by program the process is a
compiler. Expected: a process with code mapped from outside the tool folders is no compiler, so
the import ends soon after --timeout (15 s here) with the timeout reason."""
import os
import subprocess

_tmp = os.environ.get("TMPDIR", "/tmp")
_src, _lib = os.path.join(_tmp, "stall.c"), os.path.join(_tmp, "libstall.so")
with open(_src, "w") as _f:
    _f.write("#include <unistd.h>\n#include <time.h>\n"
             "__attribute__((constructor)) static void stall(void) {\n"
             "  for (;;) { sleep(8); clock_t t = clock(); while (clock() - t < CLOCKS_PER_SEC / 20) {} }\n}\n")
subprocess.run(["gcc", "-shared", "-fPIC", "-o", _lib, _src], check=True)
subprocess.run(["gcc", "--version"], env={**os.environ, "LD_PRELOAD": _lib}, stdout=subprocess.DEVNULL)


def custom_kernel(data):
    return data[-1]
