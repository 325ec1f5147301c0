"""The sandbox level this machine reaches, found once and kept (judge side; never loads submission
code).

A worker starts at one level (eval/worker/sandbox.py names them: full, cuda-first, no-uid, none).
Which one works with CUDA depends on the machine (kernel, NVIDIA driver, whether we are root), not on
the submission, so it is found once per machine, driver, kernel and sandbox code, by the first judge
that needs it (others wait on a lock and read its answer), and written to
<cache root>/sandbox-level.json. Every later worker, alone or side by side, starts at that level;
none steps down on its own. Where a level below full is what the machine reaches, every record and
report says so, and `leaderboard` and `batch` refuse to judge there unless the user chose a level
(`--sandbox LEVEL` or EVAL_SANDBOX). `python -m eval doctor` finds the level again and shows why.

Owns: the key of a machine, the cache file (read only when the judge's own uid wrote it and nobody
else can), the lock. Does not start workers: the caller passes a `try_level` function.
"""
from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import platform
import stat
import sys
from pathlib import Path

LEVELS = ("full", "cuda-first", "no-uid", "none")  # the judge's order, best first
LEVEL_ENV = "EVAL_SANDBOX"
SKIP_ENV = "EVAL_SANDBOX_SKIP"  # diagnosis only: python -m eval doctor reads it, every other command refuses it
FILE = "sandbox-level.json"


def cache_file() -> Path:
    from eval.worker import build

    return build.owned_root() / FILE


def driver_version() -> str:
    """The NVIDIA kernel module's version, without starting CUDA (None-like text where there is none)."""
    for path in ("/sys/module/nvidia/version", "/proc/driver/nvidia/version"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        return text.splitlines()[0][:200] if text else "?"
    return "no NVIDIA driver"


def sandbox_code() -> str:
    """A digest of the code that applies the layers: a change to it finds the level again."""
    from eval.worker import build

    here = Path(__file__).resolve().parents[1] / "worker"
    digest = hashlib.sha256()
    for name in ("sandbox.py", "__main__.py"):
        digest.update((here / name).read_bytes())
    digest.update(build.module_name().encode())
    return digest.hexdigest()[:16]


def machine_key() -> dict:
    import torch

    gpus = []
    if torch.cuda.is_available():
        gpus = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
    return {"host": platform.node(), "kernel": platform.release(), "driver": driver_version(), "gpus": gpus,
            "root": os.geteuid() == 0, "python": sys.executable, "torch": torch.__version__,
            "sandbox code": sandbox_code()}


def _trusted(path: Path) -> bool:
    """Written by this uid, writable by nobody else (a worker can never plant a lower level here)."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def known(key: dict | None = None) -> dict | None:
    """The cached finding for this machine, or None (no file, another machine/driver/kernel/code)."""
    path = cache_file()
    if not _trusted(path):
        return None
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict) or found.get("level") not in LEVELS:
        return None
    return found if found.get("key") == (key or machine_key()) else None


def remember(level: str, failed: list[tuple[str, str]], start_s: float | None = None, key: dict | None = None) -> dict:
    found = {"level": level, "key": key or machine_key(),
             "found": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "failed": [{"level": lv, "why": why} for lv, why in failed]}
    if start_s is not None:
        found["worker start s"] = round(start_s, 2)
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{FILE}.{os.getpid()}")
    tmp.write_text(json.dumps(found, indent=1))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return found


def forget() -> None:
    with contextlib.suppress(OSError):
        cache_file().unlink()


@contextlib.contextmanager
def finding():
    """Held while one judge finds the level: a neighbour waits here, then reads the answer."""
    path = cache_file().with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def describe(level: str, found: dict | None, chosen: bool) -> str:
    """The record's "sandbox level" entry: the level, and why a lower one where it is lower."""
    if chosen:
        return f"{level} (chosen: EVAL_SANDBOX / --sandbox)" + ("" if level == "full" else ": below full")
    if level == "full":
        return "full"
    why = "; ".join(f"CUDA failed at {f['level']} ({f['why']})" for f in (found or {}).get("failed", []))
    return f"{level}: below full, the best this machine reaches ({why}); see python -m eval doctor"


def chosen_level() -> str | None:
    """The user's level (EVAL_SANDBOX, set by --sandbox too), checked."""
    level = os.environ.get(LEVEL_ENV)
    if level and level not in LEVELS:
        raise ValueError(f"EVAL_SANDBOX={level} is not one of {', '.join(LEVELS)}")
    return level or None
