"""The worker's seccomp filter (standard library only): what eval/worker/sandbox.py's apply_late
installs on every thread (TSYNC) once CUDA has started. Refused (EPERM): ptrace and its kin
(process_vm_readv/writev, pidfd_getfd, kcmp), tkill and pidfd_send_signal, kill/tgkill/rt_*sigqueueinfo
aimed at the judge, at -1 or at another process group, setsid, unshare, setns and namespace clones
(clone3 answers ENOSYS: its flags cannot be inspected, libc falls back to clone), the kernel keyrings,
inotify and fanotify, prlimit64 on another process (and, where root is kept, scheduling, priority and
page moves of another process), IP, unix and vsock sockets, prctl(PR_SET_DUMPABLE), and every x32
system call: setsid because the worker's session is how the judge finds and kills everything it
started; the keyrings because every process of a uid shares them; inotify and fanotify because a watch
names the files made in folders the worker may not list (other workers' under the cache); unix
sockets because a descriptor sent into a pair nobody reads is held by no process (the disk watch
cannot see its file) and a path reaches services outside. Owns the numbers of each architecture.
"""
from __future__ import annotations

import ctypes
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SECCOMP = {"x86_64": 317, "aarch64": 277}
DENIED = {"x86_64": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
                     "kcmp": 312, "tkill": 200, "pidfd_send_signal": 424, "setsid": 112, "unshare": 272,
                     "setns": 308, "add_key": 248, "request_key": 249, "keyctl": 250, "inotify_init": 253,
                     "inotify_init1": 294, "inotify_add_watch": 254, "fanotify_init": 300, "fanotify_mark": 301},
          "aarch64": {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
                      "kcmp": 272, "tkill": 130, "pidfd_send_signal": 424, "setsid": 157, "unshare": 97,
                      "setns": 268, "add_key": 217, "request_key": 218, "keyctl": 219, "inotify_init1": 26,
                      "inotify_add_watch": 27, "fanotify_init": 262, "fanotify_mark": 263}}
CLONE = {"x86_64": (56, 435), "aarch64": (220, 435)}  # clone, clone3
CLONE_NEW_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
# signals whose first argument names the target process: refused when it is the judge, -1 (everyone)
# or a process group other than the worker's own
SIGNALS = {"x86_64": {"kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297},
           "aarch64": {"kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240}}
# system calls allowed only on the worker itself (first argument 0 or its own pid): prlimit64 on
# another process could set a neighbour's or the judge's CPU limit to 1 s (a kill seccomp's signal
# rules never see)
OWN_ONLY = {"x86_64": {"prlimit64": 302}, "aarch64": {"prlimit64": 261}}
# where the worker keeps root, its neighbours are root too: the kernel lets it renice them, change
# their scheduling class or CPUs, move their pages (red team round 8: a rival's threads at nice 19,
# SCHED_IDLE, one CPU, its throughput halved). These go to itself only (first argument 0 or its pid;
# a thread id of its own is refused as well: pthread_setaffinity_np fails where root is kept)
OWN_ONLY_AS_ROOT = {"x86_64": {"sched_setparam": 142, "sched_setscheduler": 144, "sched_setaffinity": 203,
                               "sched_setattr": 314, "migrate_pages": 256, "move_pages": 279},
                    "aarch64": {"sched_setparam": 118, "sched_setscheduler": 119, "sched_setaffinity": 122,
                                "sched_setattr": 274, "migrate_pages": 238, "move_pages": 239}}
# (which, who) calls: allowed only for which = the process itself, who = 0 or its pid
WHO_AS_ROOT = {"x86_64": {"setpriority": (141, 0), "ioprio_set": (251, 1)},
               "aarch64": {"setpriority": (140, 0), "ioprio_set": (30, 1)}}
# prctl(PR_SET_DUMPABLE): after the uid change the worker is not dumpable, so its /proc/<pid> files are
# root's and its uid cannot open /proc/self/mem (or task/<tid>/mem) to write past page protections
# (the native part's sealed pages); setting it back is refused (red team, 2026-11-27)
PRCTL = {"x86_64": 157, "aarch64": 167}
PR_SET_DUMPABLE = 4
SOCKET = {"x86_64": 41, "aarch64": 198}
SOCKETPAIR = {"x86_64": 53, "aarch64": 199}
AF_UNIX, AF_INET, AF_INET6, AF_VSOCK = 1, 2, 10, 40
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _err() -> str:
    return os.strerror(ctypes.get_errno())


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _seccomp(arch: str, judge_pid: int, own_pid: int) -> str:
    if arch not in DENIED:
        return f"unavailable (architecture {arch})"
    ld_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    jge = 0x35  # BPF_JMP|JGE|K
    # x86_64's x32 numbers (bit 30 set) reach the same system calls under other numbers: all refused
    prog = [_bpf(ld_abs, 4), _bpf(jeq, AUDIT_ARCH[arch], 1, 0), _bpf(ret, deny), _bpf(ld_abs, 0),
            _bpf(jge, 0x40000000, 0, 1), _bpf(ret, deny)]
    for number in DENIED[arch].values():
        prog += [_bpf(jeq, number, 0, 1), _bpf(ret, deny)]
    clone, clone3 = CLONE[arch]
    prog += [_bpf(jeq, clone3, 0, 1), _bpf(ret, 0x00050000 | 38)]  # ENOSYS: glibc falls back to clone
    prog += [_bpf(jeq, clone, 0, 3), _bpf(ld_abs, 16), _bpf(jset, CLONE_NEW_FLAGS, 0, 1), _bpf(ret, deny),
             _bpf(ld_abs, 0)]
    target = [  # the low word of the first argument (a pid_t), then: deny, deny, negative?, own group?
        _bpf(ld_abs, 16),
        _bpf(jeq, judge_pid, 3, 0),
        _bpf(jeq, 0xFFFFFFFF, 2, 0),
        _bpf(jset, 0x80000000, 0, 2),
        _bpf(jeq, (-own_pid) & 0xFFFFFFFF, 1, 0),
        _bpf(ret, deny),
        _bpf(ret, allow),
    ]
    for number in SIGNALS[arch].values():
        prog += [_bpf(jeq, number, 0, len(target)), *target]
    own = [_bpf(ld_abs, 16), _bpf(jeq, 0, 2, 0), _bpf(jeq, own_pid, 1, 0), _bpf(ret, deny), _bpf(ret, allow)]
    as_root = os.geteuid() == 0  # after the uid change: still root, so its neighbours are root's
    for number in [*OWN_ONLY[arch].values(), *(OWN_ONLY_AS_ROOT[arch].values() if as_root else ())]:
        prog += [_bpf(jeq, number, 0, len(own)), *own]
    for number, which in WHO_AS_ROOT[arch].values() if as_root else ():
        who = [_bpf(ld_abs, 16), _bpf(jeq, which, 0, 3), _bpf(ld_abs, 24), _bpf(jeq, 0, 2, 0),
               _bpf(jeq, own_pid, 1, 0), _bpf(ret, deny), _bpf(ret, allow)]
        prog += [_bpf(jeq, number, 0, len(who)), *who]
    # no IP sockets at all (UDP too: Landlock's network rules cover TCP only, where there is no
    # network namespace), and no unix sockets: a descriptor sent over one and never received is held
    # by no process (the disk watch cannot see its file), and a path names services outside (Landlock
    # covers unix sockets only from ABI 9); nor vsock (a virtual machine's host, outside any network
    # namespace). The worker's own channels are pipes.
    prog += [_bpf(jeq, SOCKET[arch], 0, 7), _bpf(ld_abs, 16), _bpf(jeq, AF_UNIX, 3, 0), _bpf(jeq, AF_INET, 2, 0),
             _bpf(jeq, AF_INET6, 1, 0), _bpf(jeq, AF_VSOCK, 0, 1), _bpf(ret, deny), _bpf(ret, allow)]
    prog += [_bpf(jeq, SOCKETPAIR[arch], 0, 4), _bpf(ld_abs, 16), _bpf(jeq, AF_UNIX, 0, 1), _bpf(ret, deny),
             _bpf(ret, allow)]
    prog += [_bpf(jeq, PRCTL[arch], 0, 4), _bpf(ld_abs, 16), _bpf(jeq, PR_SET_DUMPABLE, 0, 1), _bpf(ret, deny),
             _bpf(ret, allow)]
    prog.append(_bpf(ret, allow))
    filters = ctypes.create_string_buffer(b"".join(prog))
    fprog = struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(filters))
    fprog_buf = ctypes.create_string_buffer(fprog)
    # SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC: every thread, not only this one
    if _libc.syscall(SECCOMP[arch], ctypes.c_uint(1), ctypes.c_uint(1), fprog_buf) != 0:
        return f"unavailable ({_err()})"
    return "on"
