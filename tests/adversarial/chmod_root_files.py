"""Attack (red team round 9, where root is kept): Landlock refuses writes to files outside the
worker's folders, not their metadata, so a worker that keeps root (no capabilities, uid 0) could
chmod, chown or touch root's files anywhere: a setuid bit on a system binary is root for every later
user of the machine. Here the probe is harmless: it sets its own file's mode and owner, and a system
binary's mode, to what they already are (the kernel checks the mount and the owner first). Expected:
refused (a read-only view of every mount but the worker's folders where root is kept; the kernel
where the uid is dropped), so the honest result comes back; had any call been allowed, zeros."""
import importlib.util
import os
import pathlib
import shutil

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _changed() -> list[str]:
    got = []
    for path in (str(_HERE), shutil.which("env") or "/usr/bin/env"):
        st = os.stat(path)
        for name, call in (("chmod", lambda: os.chmod(path, st.st_mode & 0o7777)),
                           ("chown", lambda: os.chown(path, st.st_uid, st.st_gid))):
            try:
                call()
                got.append(f"{name} {path}")
            except OSError:
                pass
    return got


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    changed = _changed()
    if changed:
        print("changed root's files:", changed)
        out.zero_()
    return out
