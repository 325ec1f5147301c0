"""The CUDA driver against single sandbox mechanisms, outside the harness (GPU machine, as root).

Each scenario runs in a fresh `python3 -c` (one thread, nothing started): cuInit's CUresult, the
threads then, their names, and whether a torch kernel runs after. Prints one line per scenario.
Usage: python3 docs/experiments/sandbox_probe.py
"""
import subprocess
import sys
import time

COMMON = r"""
import ctypes, os, sys, glob
sys.path.insert(0, os.getcwd())
libc = ctypes.CDLL(None, use_errno=True)
def names():
    out = []
    for t in sorted(glob.glob('/proc/self/task/*/comm')):
        try: out.append(open(t).read().strip())
        except OSError as e: out.append('?')
    return ','.join(out)
def cuinit():
    rc = ctypes.CDLL('libcuda.so.1').cuInit(0)
    return f"cuInit={rc} threads={len(os.listdir('/proc/self/task'))} names={names()}"
def landlock_proc_readonly():
    from eval.worker import sandbox
    dev = [p for p in glob.glob('/dev/nvidia*')] + ['/dev/null', '/dev/zero', '/dev/urandom', '/dev/shm', '/tmp']
    libc.prctl(38, 1, 0, 0, 0)
    return sandbox._landlock(os.uname().machine, dev, None, [])
def landlock_leave(path, truncate):
    # Landlock as the worker's first domain: writes below dev/tmp, and file writes below `path` (and truncation)
    from eval.worker import sandbox
    dev = [p for p in glob.glob('/dev/nvidia*')] + ['/dev/null', '/dev/zero', '/dev/urandom', '/dev/shm', '/tmp']
    libc.prctl(38, 1, 0, 0, 0)
    nr = sandbox.SYS[os.uname().machine]
    real = sandbox._add_rule
    def add(nr_, ruleset, p, rights):
        real(nr_, ruleset, p, rights)
        if p == dev[-1]:
            real(nr_, ruleset, path, sandbox._LL_WRITE_FILE | ((1 << 14) if truncate else 0))
    sandbox._add_rule = add
    try:
        return sandbox._landlock(os.uname().machine, dev, None, [])
    finally:
        sandbox._add_rule = real
def torch_kernel():
    import torch
    try:
        ok = int(torch.ones(1, device='cuda').add_(1).item()) == 2
        return f"torch kernel ok={ok} threads={len(os.listdir('/proc/self/task'))} names={names()}"
    except Exception as e:
        return f"torch kernel FAILED {type(e).__name__}: {str(e)[:150]}"
def pidns(own_proc):
    assert libc.unshare(0x20000000) == 0, 'unshare pid'
    pid = os.fork()
    if pid:
        _, st = os.waitpid(pid, 0); sys.exit(os.WEXITSTATUS(st))
    if own_proc:
        assert libc.unshare(0x00020000) == 0
        assert libc.mount(None, b'/', None, ctypes.c_ulong(0x4000 | 0x40000), None) == 0
        assert libc.mount(b'proc', b'/proc', b'proc', ctypes.c_ulong(0x2 | 0x4 | 0x8), None) == 0
    return f"pid={os.getpid()}"
"""

SCENARIOS = {
    "plain: cuInit, torch": "print(cuinit(), '|', torch_kernel())",
    "pid namespace, host /proc: cuInit": "p = pidns(False); print(p, cuinit())",
    "pid namespace, own /proc: cuInit, torch": "p = pidns(True); print(p, cuinit(), '|', torch_kernel())",
    "Landlock (/proc read-only), then cuInit": "print(landlock_proc_readonly(), '|', cuinit())",
    "cuInit, Landlock (/proc read-only), torch": "c = cuinit(); print(c, '|', landlock_proc_readonly(), '|', torch_kernel())",
    "pid ns own /proc, cuInit, Landlock, torch": "p = pidns(True); c = cuinit(); print(p, c, '|', landlock_proc_readonly(), '|', torch_kernel())",
}

# a name is cosmetic: pthread_setname_np of another thread (glibc writes /proc/self/task/<tid>/comm)
# answers 0 where that write is refused; its own thread is named through prctl, no /proc
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/prctl.h>
int pthread_setname_np(pthread_t t, const char* name) {
  static int (*real)(pthread_t, const char*);
  if (pthread_equal(t, pthread_self())) return prctl(PR_SET_NAME, name, 0, 0, 0) ? errno : 0;
  if (!real) real = (int (*)(pthread_t, const char*))dlsym(RTLD_NEXT, "pthread_setname_np");
  int rc = real ? real(t, name) : ENOSYS;
  return (rc == EACCES || rc == ENOENT || rc == EPERM) ? 0 : rc;
}
"""
LEAVES = {
    "leave /proc/self/task write: cuInit": "print(landlock_leave('/proc/self/task', False), '|', cuinit())",
    "leave /proc/self/task write+truncate: cuInit": "print(landlock_leave('/proc/self/task', True), '|', cuinit())",
    "leave /proc/self write+truncate: cuInit": "print(landlock_leave('/proc/self', True), '|', cuinit())",
    "leave /proc write+truncate: cuInit": "print(landlock_leave('/proc', True), '|', cuinit())",
    "pid ns own /proc, leave /proc/self w+t: cuInit": "p = pidns(True); print(p, landlock_leave('/proc/self', True), '|', cuinit())",
}
SCENARIOS.update(LEAVES) if __import__('os').environ.get('PROBE_LEAVES') else None
SHIMMED = {
    "shim: Landlock (/proc read-only), then cuInit, torch": "print(landlock_proc_readonly(), '|', cuinit(), '|', torch_kernel())",
    "shim: pid ns own /proc, Landlock, cuInit, torch": "p = pidns(True); print(p, landlock_proc_readonly(), '|', cuinit(), '|', torch_kernel())",
}

if __name__ == "__main__":
    import os

    shim = "/tmp/setname-shim.so"
    with open("/tmp/setname-shim.c", "w") as f:
        f.write(SHIM)
    built = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, "/tmp/setname-shim.c", "-ldl"],
                           capture_output=True, text=True)
    print("shim build:", built.returncode, built.stderr[-300:])
    plans = [(n, b, {}) for n, b in SCENARIOS.items()] + [(n, b, {"LD_PRELOAD": shim}) for n, b in SHIMMED.items()]
    for name, body, extra in plans:
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-c", COMMON + body], capture_output=True, text=True, timeout=120,
                             env={**os.environ, **extra})
        said = (run.stdout.strip() or run.stderr.strip().splitlines()[-1:] or ["(nothing)"])
        said = said if isinstance(said, str) else said[0]
        print(f"{name:45s} rc={run.returncode} {time.monotonic() - started:5.1f}s  {said[:400]}", flush=True)
