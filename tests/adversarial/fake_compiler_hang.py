"""Cheat (a slot held past --timeout, red team round 4): the judge lets an import run past --timeout
(up to the 900 s build limit) while a compiler runs in the worker's session, judged by the program
in /proc/<pid>/exe. A copy of /bin/sleep named cc1plus in the worker's own TMPDIR is such a program
by name; then the import hangs. Expected: the import ends at --timeout (a compiler counts only where
the worker cannot write), with the timeout reason."""
import os
import shutil
import subprocess
import time

_fake = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cc1plus")
shutil.copy("/bin/sleep", _fake)
os.chmod(_fake, 0o755)
subprocess.Popen([_fake, "300"])
time.sleep(300)


def custom_kernel(data):
    return data[-1]
