"""Cheat (a slot held past --timeout, red team round 6): the judge lets an import run past --timeout
(up to the 900 s build limit) while a real compiler, installed where the worker cannot write, runs
in its session. `gcc -E -` reading a pipe that nobody writes is such a compiler, forever; a fresh one
started every few seconds looks like a build moving on. Expected: compilers that use no CPU buy no
build time, so the import ends at --timeout (plus the idle allowance) with the timeout reason."""
import shutil
import subprocess
import time

_gcc = shutil.which("gcc") or shutil.which("cc")
_held = []
for _ in range(60):
    _held.append(subprocess.Popen([_gcc, "-E", "-x", "c", "-"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(5)


def custom_kernel(data):
    return data[-1]
