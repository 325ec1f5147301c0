"""Worker process entry: `python -m eval.worker REQ_FD REPLY_FD KEY_FD NATIVE_SO LEVEL UID PATHS`.

Started by the judge (eval/judge/channel.py). Order matters (eval/worker/sandbox.py names the
levels). At LEVEL "full", as root: a PID namespace of its own with its own /proc; then, while this
is the only thread, the per-thread layers (namespaces, no_new_privs, capabilities, Landlock with
leave to write its own /proc/<pid>/task, where cuInit names its thread); then CUDA's driver starts
(cuInit); then Landlock again without that leave; then torch and the CUDA context; then the uid
change and seccomp, which reach every thread; only then is anything of the submission's imported. At the judge's step-downs ("cuda-first", "no-uid") torch and the context
start first and every layer follows (the order that kept CUDA working before). PATHS is a JSON
object of path lists: "write" (folders and device files it may write), "read" (what it may read and
run; absent: reads are not restricted), "list" (folders it may only list) and, for `python -m eval
doctor --skip` alone, "skip" (layers left out, eval/worker/sandbox.py LAYERS).
"""
import faulthandler
import json
import sys
import time

if __name__ == "__main__":
    stamps = {"python": time.monotonic()}  # CLOCK_MONOTONIC: the judge reads the same clock
    faulthandler.enable()  # a crash leaves its Python stack in the worker log
    request_fd, reply_fd, key_fd = (int(x) for x in sys.argv[1:4])
    native_so, level, uid, paths = sys.argv[4], sys.argv[5], int(sys.argv[6]), json.loads(sys.argv[7])
    uid = uid if uid >= 0 else None
    from eval.worker import sandbox  # standard library only

    sandbox.leave_out(paths.get("skip", ()))  # diagnosis only (python -m eval doctor --skip)

    # as root, before anything else: the rest runs in a PID namespace of its own (the judge's child
    # and the namespace's reaper wait outside it and never return from here)
    pid_namespace = sandbox.own_pid_namespace() if level != "none" else None
    stamps["pid namespace"] = time.monotonic()

    def per_thread_layers() -> dict:
        return sandbox.apply_early(paths["write"], uid, level, paths.get("read"), paths.get("list", []))

    early = driver_state = None
    if level in sandbox.EARLY_LEVELS:  # before any thread exists: every thread CUDA and torch start is bound
        early = per_thread_layers()  # Landlock with leave to name threads: cuInit needs it
        stamps["layers"] = time.monotonic()
        driver_state = sandbox.start_driver()
        stamps["cuInit"] = time.monotonic()
        early = {"cuda driver": driver_state, **sandbox.seal_landlock(early, paths["write"], paths.get("read"),
                                                                      paths.get("list", []), uid)}
    import torch  # trusted

    stamps["import torch"] = time.monotonic()
    cuda_error = None
    if torch.cuda.is_available():
        try:
            torch.cuda.init()
            torch.empty(1, device="cuda")  # the context exists and is current on this thread
        except Exception as exc:  # noqa: BLE001 - said in the hello: the judge decides
            cuda_error = f"{type(exc).__name__}: {exc}"
    if cuda_error is None and not torch.cuda.is_available() and (driver_state or "").startswith("cuInit failed"):
        cuda_error = driver_state  # the driver's own answer, for the judge's step-down decision
    stamps["cuda context"] = time.monotonic()
    if early is None:
        early = per_thread_layers()
    from eval.worker import driver

    layers = sandbox.apply_late(uid, level, early)  # the uid and seccomp: every thread
    stamps["late layers"] = time.monotonic()
    if pid_namespace is not None:
        layers["pid namespace"] = pid_namespace
    driver.serve(request_fd, reply_fd, key_fd, native_so, layers, cuda_error, stamps)
