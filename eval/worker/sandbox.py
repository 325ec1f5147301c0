"""The worker's sandbox, in two steps: apply_early before torch or CUDA start any thread (the layers
the kernel binds to the calling thread and its later threads: namespaces, capabilities, Landlock),
apply_late after CUDA has started (uid and seccomp, which reach every thread) and before the
submission is imported. Standard library only (ctypes).

LEVEL (eval/judge/levels.py finds the one this machine reaches, once, and keeps it):
  full        the per-thread layers first (Landlock with leave to write and truncate files below the
              worker's own /proc/<pid>, where cuInit names its thread), then CUDA's driver (cuInit
              through libcuda), then Landlock again without that leave, then torch: every thread torch
              and CUDA start is inside every layer (H100 and H200, 2026-11-27: docs/sandbox-gpu.md)
  cuda-first  torch and the CUDA context first, then every layer: threads started before the
              sandbox (the driver's, a BLAS pool's) are outside the per-thread layers, and the
              "threads" entry says how many (the order that works where "full" breaks CUDA)
  no-uid      as cuda-first, without the uid change
  none        nothing, the last resort
Layers, each reported as "on" or why not:
  pid namespace  as root, first of all: the worker runs in a PID namespace of its own under a reaper
                 that runs no submission code; when the reaper dies the kernel kills every process
                 in it at once, and it stops or continues all of them at once for the judge
  cuda driver    (full) cuInit after the per-thread layers and before torch, and the threads it started
  uid            as root: an unprivileged uid (all threads: glibc changes every thread's ids)
  no_new_privs   no setuid binary can give privileges back
  capabilities   when still root: all dropped, so no CAP_SYS_PTRACE / CAP_DAC_OVERRIDE (the judge is
                 non-dumpable, so its /proc/<pid>/fd cannot be opened without them)
  shm            as root: a mount namespace of its own with a private tmpfs on /dev/shm (size capped),
                 so the POSIX shared memory and semaphores it makes are its own and vanish with its last
                 process (a worker that keeps root could otherwise leave files there for later runs)
  proc           as root, in that namespace: /proc mounted again with hidepid, so no other process's
                 command line or environ is seen (other judges' candidates and options)
  read-only view where root is kept, in that namespace: every mount read-only but its own folders,
                 /dev/shm and /proc (Landlock does not cover metadata: chmod, chown, utime)
  network        as root: a network namespace of its own (nothing but a down loopback: no TCP to another
                 worker, a Ray head or any service); without root, Landlock ABI 4+ refuses TCP bind and
                 connect instead
  landlock       writes only below the given folders (scratch, cache, /dev/shm) and to the given
                 device files (GPU, null, zero...: written, never renamed or replaced); reads (and
                 execution) only of what the judge lists (eval/judge/channel.py _readable_paths: system
                 folders, the Python installation, the CUDA toolkit, the harness, the problem's files,
                 the submission file, the compiled part), so never another candidate's source or
                 a verdict file. Landlock binds the calling thread and the threads it makes later:
                 applied while the worker has one thread, it binds every thread (the "threads" entry
                 says so)
  landlock scope  (ABI 6+) no signal to, and no abstract unix socket of, any process outside this
                 worker's Landlock domain: the judge, other workers, anything else on the machine
  seccomp        every thread (TSYNC): eval/worker/seccomp_filter.py says what it refuses (ptrace and
                 its kin, signals to the judge or other groups, setsid, namespaces, keyrings, inotify,
                 sockets, other processes' limits, prctl(PR_SET_DUMPABLE), x32)
  parent death   the worker is killed when the judge dies (it never outlives its judge)
"""
from __future__ import annotations

import ctypes
import os
import platform
import signal
import stat
import struct

from eval.worker.seccomp_filter import _seccomp  # noqa: F401 (the filter; tests call sandbox._seccomp)

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
SYS = {"x86_64": {"landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
                  "seccomp": 317, "capset": 126},
       "aarch64": {"landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446,
                   "seccomp": 277, "capset": 91}}
PR_SET_PDEATHSIG = 1
CAP_SETGID, CAP_SETUID = 6, 7
CLONE_NEWIPC, CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x08000000, 0x00020000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x4000, 0x40000
MS_REMOUNT, MS_BIND = 0x20, 0x1000
# the per-mount flags a read-only remount keeps as they were (mountinfo's names)
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": 0x8, "noatime": 0x400, "nodiratime": 0x800,
               "relatime": 0x200000, "strictatime": 0x1000000}
SHARED_MEMORY = "/dev/shm"
PROC_GID = 999_999_999  # nobody's group (workers' own uids and gids start at 1e9)
SHM_CAP_BYTES = 1 << 30  # the private /dev/shm holds at most this, or a quarter of RAM where that is less

UID_LEVELS = ("full", "cuda-first")  # the levels that drop to an unprivileged uid
# every layer by the name `python -m eval doctor --skip` takes (diagnosis only: a worker started
# with any of them left out judges nothing, eval/judge/levels.py)
LAYERS = ("pid-namespace", "own-proc", "cuda-driver", "ipc-namespace", "shm", "proc", "read-only-view", "network",
          "no-new-privs", "landlock", "capabilities", "uid", "seccomp", "parent-death", "memory-filter")
_skipped: frozenset[str] = frozenset()


def leave_out(names) -> None:
    """Diagnosis (`python -m eval doctor --skip`): the named layers are not applied, each reported as
    "skipped (diagnosis)"."""
    global _skipped
    unknown = set(names) - set(LAYERS)
    if unknown:
        raise ValueError(f"unknown layer(s): {', '.join(sorted(unknown))} (layers: {', '.join(LAYERS)})")
    _skipped = frozenset(names)


def skipped(name: str) -> bool:
    return name in _skipped


SKIPPED = "skipped (diagnosis: doctor --skip)"
EARLY_LEVELS = ("full",)  # the levels whose per-thread layers go on before torch

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def own_pid_namespace() -> str:
    """As root, first thing (before any thread): a PID namespace of its own. This process (the
    judge's child) forks the namespace's first process, a reaper that never runs submission code,
    which forks the worker; this function returns only in the worker. When the reaper dies (the
    judge's SIGKILL, or the worker's end) the kernel kills every process in the namespace at once,
    so no chain of forks outruns the kill, and the reaper stops (SIGUSR1) or continues (SIGUSR2) all
    of them at once with kill(-1) inside it (red team round 10, where root is kept: a process that
    left its group and took a new pid every 50 µs outlived the judge, and escaped compare's freeze).
    The judge's child ends as the worker did (a signal as that signal). Not root: nothing to do.
    The worker then mounts a /proc of the namespace's own (_own_proc) before anything reads it."""
    if skipped("pid-namespace"):
        return SKIPPED
    if os.geteuid() != 0:
        return "n/a (not root: the worker's own uid is signalled at once instead)"
    if _libc.unshare(CLONE_NEWPID) != 0:
        return f"unavailable ({_err()})"
    status_r, status_w = os.pipe()  # the worker's wait status, from the reaper to the judge's child
    reaper = os.fork()
    if reaper:
        _end_like(_outlive(reaper, status_r, lambda status: os.read(status_r, 4)))
    signal.signal(signal.SIGUSR1, lambda *_: os.kill(-1, signal.SIGSTOP))
    signal.signal(signal.SIGUSR2, lambda *_: os.kill(-1, signal.SIGCONT))
    worker = os.fork()
    if worker == 0:
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        os.close(status_r)
        os.close(status_w)
        return "on (its end kills every process in it at once; " + _own_proc() + ")"
    _outlive(worker, status_w, lambda status: os.write(status_w, status.to_bytes(4, "little")))
    os._exit(0)


def _own_proc() -> str:
    """In the new PID namespace, before CUDA or anything else reads /proc: a mount namespace of its
    own (private: nothing propagates back) with /proc mounted again for this namespace. Without it
    /proc is the host's, where the worker's pids and thread ids (its namespace's) name other
    processes or none: CUDA's driver names the threads it starts through
    /proc/self/task/<tid>/comm, and cuInit failed with CUresult 304 on the H100 and H200 (2026-11-27,
    every level but none; docs/sandbox-gpu.md)."""
    if skipped("own-proc"):
        return "its /proc: " + SKIPPED
    if _libc.unshare(CLONE_NEWNS) != 0:
        return f"its /proc: unavailable (mount namespace: {_err()}): the host's /proc names other processes"
    if _libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        return f"its /proc: unavailable (private mounts: {_err()})"
    if _libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | 0x8), None) != 0:
        return f"its /proc: unavailable ({_err()}): the host's /proc names other processes"
    return "a /proc of its own"


def _outlive(child: int, keep: int, then):
    """In a process outside the worker: hold none of its channels (but `keep`), die with the judge
    (PR_SET_PDEATHSIG), reap (as the namespace's first process, orphans too) until `child` ends,
    and return then(its wait status)."""
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            return then(status)


def _end_like(report: bytes) -> None:
    """End as the worker did: its exit code, or killed by its signal (a reaper killed outright sent
    no report: killed)."""
    status = int.from_bytes(report, "little") if len(report) == 4 else signal.SIGKILL
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else signal.SIGKILL
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def start_driver() -> str:
    """cuInit(0) through libcuda, at full after the per-thread layers (its thread is born inside them)
    and before torch. Landlock must then let this process write its own /proc/<pid> (cuInit
    names the thread it starts there, and fails with CUresult 304 where it may not) and /proc must be
    the worker's own PID namespace's (_own_proc). Torch's later cuInit finds it done. No GPU, no
    driver: nothing to do. (The device files must exist already: with no_new_privs and no
    capabilities the setuid nvidia-modprobe cannot make them; `nvidia-smi` once as root does.)"""
    if skipped("cuda-driver"):
        return SKIPPED
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        return "n/a (no GPU visible)"
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "n/a (no CUDA driver)"
    rc = cuda.cuInit(0)
    if rc == 100:  # CUDA_ERROR_NO_DEVICE: a driver without a GPU (a CPU machine with the libraries)
        return "n/a (no GPU)"
    threads = len(os.listdir("/proc/self/task"))
    return f"on (cuInit before torch; {threads} thread{'s' if threads > 1 else ''} then)" if rc == 0 else \
        f"cuInit failed (CUresult {rc})"


def _err() -> str:
    return os.strerror(ctypes.get_errno())


def apply_early(writable: list[str], uid: int | None, level: str = "full", readable: list[str] | None = None,
                listable: list[str] = ()) -> dict[str, str]:
    """The layers the kernel puts on the calling thread only (namespaces, the capability sets,
    Landlock), applied before torch, CUDA or anything else has started a thread: every thread made
    later inherits them. (Applied after, a thread that torch's import had started, e.g. numpy's
    OpenBLAS server, kept root's rights, the host's network and /proc and no Landlock, and a
    submission could hand it a callback: red team round 6.) writable: folders and device files it
    may write; readable: what it may read and run (None: reads not restricted); listable: folders
    it may only list."""
    if level == "none":
        return {"sandbox": "off (CUDA did not work inside it here, or EVAL_SANDBOX=none)"}
    arch = platform.machine()
    applied = {}
    threads = len(os.listdir("/proc/self/task"))
    applied["threads"] = "one (every layer binds every later thread)" if threads == 1 else \
        f"{threads} before the sandbox: the per-thread layers do not bind the others"
    root = os.geteuid() == 0
    if root:  # System V IPC and POSIX message queues of its own, gone with it
        applied["ipc namespace"] = _layer("ipc-namespace", lambda: "on" if _libc.unshare(CLONE_NEWIPC) == 0
                                          else f"unavailable ({_err()})")
        applied["shm"] = _layer("shm", _private_shm)  # while root: before the capabilities go
        mounts = applied["shm"].startswith("on")
        applied["proc"] = _layer("proc", _private_proc if mounts else lambda: "n/a (no mount namespace)")
        if not (uid is not None and level in UID_LEVELS):  # root is kept: its own files' metadata is its
            applied["read-only view"] = _layer("read-only-view", (lambda: _read_only_view(writable)) if mounts
                                               else lambda: "n/a (no mount namespace)")
        applied["network"] = _layer("network", lambda: "on (a network namespace of its own: no interface but a "
                                    "down loopback)" if _libc.unshare(CLONE_NEWNET) == 0 else f"unavailable ({_err()})")
    keep = (CAP_SETGID, CAP_SETUID) if uid is not None and level in UID_LEVELS else ()
    if level in EARLY_LEVELS or not root:
        # full: no_new_privs, then the capabilities, then Landlock, all before CUDA's driver starts
        # (cuInit follows, then Landlock once more: seal_landlock). Below full (cuda-first, no-uid) as
        # root: no_new_privs after CUDA, in apply_late (the former order)
        applied["no_new_privs"] = _layer("no-new-privs", _no_new_privs)
    if root and level in EARLY_LEVELS:
        applied["capabilities"] = _layer("capabilities", lambda: _drop_capabilities(arch, keep))
    names = level in EARLY_LEVELS and not skipped("cuda-driver")  # cuInit comes next, inside Landlock
    applied["landlock"] = _layer("landlock", lambda: _landlock(arch, writable, readable, listable, names))
    if root and level not in EARLY_LEVELS:  # after Landlock (CAP_SYS_ADMIN allowed it): all gone, but the two the uid change needs
        applied["capabilities"] = _layer("capabilities", lambda: _drop_capabilities(arch, keep))
    return applied


def seal_landlock(applied: dict, writable: list[str], readable: list[str] | None, listable: list[str],
                  uid: int | None = None) -> dict:
    """At full, after cuInit: Landlock once more, without leave to write the worker's own /proc/<pid>
    (Landlock domains stack: this thread and every thread it starts later hold both, so only the
    driver's own cuInit thread keeps that leave). cuInit names the thread it starts by opening
    /proc/self/task/<tid>/comm to write and truncate, and fails with CUresult 304 where it may not
    (H100, H200, 2026-11-27); the threads started later are named only where they may be, and work
    unnamed."""
    applied = dict(applied)
    if not str(applied.get("landlock", "")).startswith("on"):
        return applied
    threads = len(os.listdir("/proc/self/task"))
    sealed = _landlock(platform.machine(), writable, readable, listable)
    if not sealed.startswith("on"):
        applied["landlock"] = f"partly: {sealed} (every thread may write its own /proc/<pid>)"
        return applied
    if threads > 1 and (uid is not None or os.geteuid() != 0):
        # its uid's /proc/<pid> files are root's once the uid changes (not dumpable, and seccomp keeps
        # it so): the leave reaches no mem file
        applied["threads"] = (f"one (every layer binds every later thread; CUDA's driver started {threads - 1} "
                              "inside them at cuInit, with leave to write the worker's own /proc/<pid>: "
                              "thread names, never mem: the uid owns none of those files)")
    elif threads > 1:
        applied["threads"] = (f"{threads - 1} of CUDA's driver may write the worker's own /proc/<pid>, mem "
                              "included, and root is kept: a submission that gets code onto them writes past page "
                              "protections (make the tree readable by an unprivileged uid)")
    return applied


def _layer(name: str, apply_it) -> str:
    """apply_it()'s report, or SKIPPED where doctor --skip named the layer."""
    return SKIPPED if skipped(name) else apply_it()


def _no_new_privs() -> str:
    return "on" if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 else f"failed ({_err()})"


def apply_late(uid: int | None, level: str, applied: dict[str, str]) -> dict[str, str]:
    """After CUDA started: the layers that hold for every thread of the process (the uid: glibc
    changes every thread's ids; seccomp: TSYNC), then the parent-death signal. Returns every layer's
    state, apply_early's included."""
    if level == "none":
        return applied
    arch = platform.machine()
    applied = dict(applied)
    if skipped("uid"):
        applied["uid"] = SKIPPED
    elif uid is not None and os.geteuid() == 0 and level in UID_LEVELS:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)  # every thread: their capabilities go with root
            applied["uid"] = f"dropped to {uid}"
        except OSError as exc:
            applied["uid"] = f"failed ({exc.strerror})"
    elif os.geteuid() == 0:
        applied["uid"] = "kept root (" + ("CUDA failed as an unprivileged uid, or EVAL_SANDBOX=no-uid)" if level == "no-uid" else
                                          "the tree is not readable by an unprivileged uid)")
    applied["no_new_privs"] = _layer("no-new-privs", _no_new_privs)
    judge = os.getppid()
    applied["seccomp"] = _layer("seccomp", lambda: _seccomp(arch, judge, os.getpid()))
    if skipped("parent-death"):
        applied["parent death"] = SKIPPED
        return applied
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # after the uid change, which clears it
    if os.getppid() != judge:
        os._exit(1)  # the judge is already gone
    return applied


def apply(writable: list[str], uid: int | None, level: str = "full", readable: list[str] | None = None,
          listable: list[str] = ()) -> dict[str, str]:
    """Both steps at once (a process that starts no thread in between: tests)."""
    return apply_late(uid, level, apply_early(writable, uid, level, readable, listable))


def _private_shm() -> str:
    """A mount namespace of its own (mounts made private, so nothing propagates back to the host)
    with a fresh tmpfs on /dev/shm: nosuid, nodev, mode 1777, at most SHM_CAP_BYTES or a quarter of
    RAM. What the worker puts there is invisible to every other process and freed when the last
    process of the namespace ends. Runs as root, before seccomp (which then refuses unshare) and
    before Landlock (whose /dev/shm rule must name the new mount)."""
    if not os.path.isdir(SHARED_MEMORY):
        return f"n/a (no {SHARED_MEMORY})"
    if _libc.unshare(CLONE_NEWNS) != 0:
        return f"unavailable (mount namespace: {_err()})"
    if _libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None) != 0:
        return f"unavailable (private mounts: {_err()})"
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        ram = 4 * SHM_CAP_BYTES
    size = max(64 << 20, min(SHM_CAP_BYTES, ram // 4))
    options = f"mode=1777,size={size}".encode()
    if _libc.mount(b"tmpfs", SHARED_MEMORY.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), options) != 0:
        return f"unavailable (tmpfs on {SHARED_MEMORY}: {_err()})"
    return f"on (private tmpfs of {size >> 20} MiB, gone with the worker)"


def _private_proc() -> str:
    """In the worker's mount namespace (_private_shm made it): /proc mounted again with
    hidepid=invisible, so once its uid is dropped (or its capabilities, for one that keeps root) it
    sees no other process's folder: no command line of another judge or candidate, no environ.
    /proc/self and the system's own files (/proc/driver/nvidia, cpuinfo) stay."""
    # gid=: the group exempt from hidepid is root's by default, and a worker that keeps root is in it
    for options in (f"hidepid=invisible,gid={PROC_GID}", f"hidepid=2,gid={PROC_GID}"):
        if _libc.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | 0x8), options.encode()) == 0:
            return f"on ({options.split(',')[0]}: other processes unseen)"
    return f"unavailable ({_err()})"


def _mounts() -> list[tuple[str, set[str]]]:
    """This namespace's mount points and their per-mount options, from /proc/self/mountinfo."""
    found = []
    with open("/proc/self/mountinfo") as info:
        for line in info:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # "\040" for a space, as the kernel writes it
            found.append((point, set(fields[5].split(","))))
    return found


def _read_only_view(writable: list[str]) -> str:
    """In the worker's mount namespace (private: nothing propagates back): every mount read-only but
    its writable folders (bound onto themselves first, so they stay writable), /dev/shm and /proc.
    Landlock already refuses writes to files elsewhere, but not their metadata: a worker that keeps
    root could otherwise chmod, chown or touch root's files anywhere (a setuid bit on a system
    binary, for every later user). Device files stay writable on a read-only mount."""
    keep = {SHARED_MEMORY}
    for path in writable:
        if os.path.isdir(path) and not os.path.islink(path):
            if _libc.mount(path.encode(), path.encode(), None, ctypes.c_ulong(MS_BIND | MS_REC), None) != 0:
                return f"unavailable (binding {path}: {_err()})"
            keep.add(os.path.realpath(path))
    done, refused = 0, []
    for point, options in _mounts():
        if point in keep or point == "/proc" or point.startswith("/proc/") or "ro" in options:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name in options & MOUNT_FLAGS.keys():
            flags |= MOUNT_FLAGS[name]
        if _libc.mount(None, point.encode(), None, ctypes.c_ulong(flags), None) == 0:
            done += 1
        else:
            refused.append(f"{point}: {_err()}")
    if refused:
        return f"partly ({done} mounts read-only; not {'; '.join(refused[:3])})"
    return f"on ({done} mounts read-only; its folders, /dev/shm and /proc writable)"


def _drop_capabilities(arch: str, keep: tuple[int, ...] = ()) -> str:
    """Every capability dropped from the bounding set (all of them: the uid change needs `keep`
    effective, not bounding) and from this thread's sets but `keep`."""
    if arch not in SYS:
        return f"unavailable (architecture {arch})"
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    mask = sum(1 << cap for cap in keep)
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = struct.pack("IIIIII", mask, mask, 0, 0, 0, 0)  # effective, permitted, inheritable (x2 words)
    h, d = ctypes.create_string_buffer(header), ctypes.create_string_buffer(data)
    if _libc.syscall(SYS[arch]["capset"], h, d) != 0:
        return f"failed ({_err()})"
    return "on" if not keep else "on (setuid and setgid kept until the uid change, which drops them)"


# Landlock write-type rights: write file, remove dir/file, make char/dir/reg/sock/fifo/block/sym,
# then refer (ABI 2) and truncate (ABI 3). Read-type rights (ABI 1): execute, read file, read dir
# (list), handled when the judge sends a read list. Device ioctls stay allowed.
_LL_WRITE = sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_READ = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1 << 0, 1 << 1


def _add_rule(nr: dict, ruleset: int, path: str, rights: int) -> None:
    """Grant rights beneath path (a folder) or on it (a file: only the file-type rights of rights);
    a path that does not exist is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | (1 << 14)  # what applies to a file
        if rights:
            rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
            _libc.syscall(nr["landlock_add_rule"], ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0))
    finally:
        os.close(fd)


def _landlock(arch: str, writable: list[str], readable: list[str] | None = None, listable: list[str] = (),
              thread_names: bool = False) -> str:
    """Writes only below `writable` (device files there: written, never replaced); with a read
    list, reads and execution only of `writable` and `readable`, and listing of `listable`.
    thread_names: also file writes (and truncation) below this process's /proc/<pid> (cuInit's thread
    names; seal_landlock takes it back)."""
    if arch not in SYS:
        return f"unavailable (architecture {arch})"
    nr = SYS[arch]
    abi = _libc.syscall(nr["landlock_create_ruleset"], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return f"unavailable (kernel without Landlock: {_err()})"
    reads = _LL_READ if readable is not None else 0
    access = _LL_WRITE | reads | (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0)
    net = _LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP if abi >= 4 else 0  # handled, no rule: no TCP at all
    if abi >= 6:  # scoped: signals and abstract unix sockets stay inside this domain
        attr = ctypes.create_string_buffer(struct.pack("QQQ", access, net, _LL_SCOPE_SIGNAL | _LL_SCOPE_ABSTRACT_UNIX))
        size = 24
    elif abi >= 4:
        attr = ctypes.create_string_buffer(struct.pack("QQ", access, net))
        size = 16
    else:
        attr = ctypes.create_string_buffer(struct.pack("Q", access))
        size = 8
    ruleset = _libc.syscall(nr["landlock_create_ruleset"], attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"unavailable ({_err()})"
    try:
        for path in writable:  # opened now: /dev/shm is the private tmpfs where _private_shm mounted one
            _add_rule(nr, ruleset, path, access)  # a device file: written (and read), never replaced
        for path in readable or ():
            _add_rule(nr, ruleset, path, _LL_READ)
        for path in listable if reads else ():
            _add_rule(nr, ruleset, path, _LL_READ_DIR)
        if thread_names:  # cuInit names its thread: /proc/self/task/<tid>/comm, opened to write and truncate
            _add_rule(nr, ruleset, "/proc/self", _LL_WRITE_FILE | (1 << 14 if abi >= 3 else 0) | reads)
        if _libc.syscall(nr["landlock_restrict_self"], ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"unavailable ({_err()})"
    finally:
        os.close(ruleset)
    what = "reads and writes restricted" if reads else "writes restricted"
    what += "; no TCP" if net else ""
    if abi < 6:
        what += f"; ABI {abi}: without signal and socket scoping, which needs ABI 6"
    return f"on ({what})"
