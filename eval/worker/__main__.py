"""Worker process entry: `python -m eval.worker REQ_FD REPLY_FD KEY_FD NATIVE_SO LEVEL UID PATHS`.

Started by the judge (eval/judge/channel.py). Order matters: CUDA is initialised first, while the
process still has the rights the driver needs (it may create /dev/nvidia-uvm through the setuid
nvidia-modprobe, which no_new_privs and an unprivileged uid forbid); then the sandbox goes on; only
then is anything of the submission's imported. LEVEL is how much sandbox the judge asks for; PATHS
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
    import torch  # trusted; before the sandbox, as is CUDA's start

    if torch.cuda.is_available():
        torch.cuda.init()
        torch.empty(1, device="cuda")  # the context exists and is current on this thread
    from eval.worker import driver, sandbox

    layers = sandbox.apply(paths["write"], uid if uid >= 0 else None, level, paths.get("read"), paths.get("list", []))
    driver.serve(request_fd, reply_fd, key_fd, native_so, layers)
