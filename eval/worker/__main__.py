"""Worker process entry: `python -m eval.worker REQ_FD REPLY_FD KEY_FD NATIVE_SO LEVEL UID PATHS`.

Started by the judge (eval/judge/channel.py). Order matters: the per-thread layers (namespaces,
capabilities, Landlock) go on first, while this is the only thread; then torch and CUDA start (the
judge has started CUDA on this machine before, so /dev/nvidia-uvm exists: no setuid nvidia-modprobe
is needed); then the uid change and seccomp, which reach every thread; only then is anything of the
submission's imported. LEVEL is how much sandbox the judge asks for; PATHS
is a JSON object of path lists: "write" (folders and device files it may write), "read" (what it may
read and run; absent: reads are not restricted) and "list" (folders it may only list).
"""
import faulthandler
import json
import sys

if __name__ == "__main__":
    faulthandler.enable()  # a crash leaves its Python stack in the worker log
    request_fd, reply_fd, key_fd = (int(x) for x in sys.argv[1:4])
    native_so, level, uid, paths = sys.argv[4], sys.argv[5], int(sys.argv[6]), json.loads(sys.argv[7])
    uid = uid if uid >= 0 else None
    from eval.worker import sandbox  # standard library only

    # before any thread exists: namespaces, capabilities and Landlock bind the calling thread and the
    # threads it starts later (torch's import starts some: numpy's OpenBLAS server, CUDA's)
    early = sandbox.apply_early(paths["write"], uid, level, paths.get("read"), paths.get("list", []))
    import torch  # trusted

    if torch.cuda.is_available():
        torch.cuda.init()
        torch.empty(1, device="cuda")  # the context exists and is current on this thread
    from eval.worker import driver

    layers = sandbox.apply_late(uid, level, early)  # the uid and seccomp: every thread
    driver.serve(request_fd, reply_fd, key_fd, native_so, layers)
