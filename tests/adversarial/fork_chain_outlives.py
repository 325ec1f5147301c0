"""Attack (red team round 10, where root is kept): a process that outlives its worker. The judge
kills the worker's process group, every process of the worker's own uid at once (kill(-1) as that
uid), then each process it finds in the worker's session, pass after pass for 5 s. A child that
leaves the group (setpgid is allowed, setsid is not) and replaces itself again and again (fork, the
parent exits) is never the same pid twice: a pass lists it, and by the time the kill comes its child
is not in the list. Where root is kept there is no uid of its own to kill at once, and the chain
outlived the judge. Here a small C program (built with the system's cc at import) does it, named
zzz_fork_chain: while the worker lives, a new pid every 2 ms; once it is gone, every few µs for
8 s; it ends by itself after LIFETIME_S (so a test machine is not left with it). Then the honest
answer. Expected: the answer passes and no process of the chain is alive once the judge has closed
the worker (the worker's PID namespace dies with it: tests/test_worker_lifecycle.py)."""
import importlib.util
import os
import pathlib
import subprocess
import tempfile

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)
LIFETIME_S = 30
SOURCE = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char** argv) {
  pid_t watch = (pid_t)atoi(argv[1]);
  double end = now() + atof(argv[2]), fast_until = 0;
  setpgid(0, 0);
  prctl(PR_SET_NAME, "zzz_fork_chain");
  while (now() < end) {
    if (fast_until == 0 && kill(watch, 0) != 0) fast_until = now() + 8;
    if (fork() != 0) _exit(0);  /* the parent goes, the child carries on under a new pid */
    if (fast_until == 0 || now() > fast_until) usleep(2000);
  }
  return 0;
}
"""

_dir = tempfile.mkdtemp(prefix="chain-")
with open(os.path.join(_dir, "chain.c"), "w") as _f:
    _f.write(SOURCE)
subprocess.run(["cc", "-O1", "-o", os.path.join(_dir, "chain"), os.path.join(_dir, "chain.c")], check=True)
subprocess.Popen([os.path.join(_dir, "chain"), str(os.getpid()), str(LIFETIME_S)], start_new_session=False)


def custom_kernel(data):
    return _honest.custom_kernel(data)
