"""Cheat (a slot held past --timeout at almost no cost, red team round 8): the system's gcc compiles
many one-line files through `-wrapper`, a shell that sleeps 10 s before each step it then runs. The
gcc driver lives the whole time and its CPU count grows a little each time it reaps a step, so a
rule of "a compiler used some CPU lately" keeps granting build time, to the 900 s build limit.
Expected: the compilers are busy far less than a quarter of the time, so the import ends soon after
--timeout (15 s here) with the timeout reason."""
import os
import subprocess

_tmp = os.environ.get("TMPDIR", "/tmp")
_sources = []
for _n in range(90):
    _path = os.path.join(_tmp, f"part{_n}.c")
    with open(_path, "w") as _f:
        _f.write(f"int part{_n}(void) {{ return {_n}; }}\n")
    _sources.append(_path)
subprocess.run(["gcc", "-wrapper", '/bin/sh,-c,sleep 10; exec "$0" "$@"', "-c", *_sources], cwd=_tmp,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def custom_kernel(data):
    return data[-1]
