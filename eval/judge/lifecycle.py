"""A worker's life and death, judge side: the lock that says a judge still owns a worker's
folder (Claim), the sweep of what killed judges left (sweep_dead), how many GPU neighbours are
alive (_live_workers), stopping and continuing a worker (Control.freeze), and ending it
(Control.close, _kill_worker, _kill_rest, _signal_worker, _signal_uid, _sweep_shared_memory).

Each worker starts isolated and leaves nothing behind: its own session (which no process of it can
leave: the sandbox refuses setsid) killed whole, and, as root, a uid of its own (every process of
that uid is killed at the end too) and a /dev/shm of its own; its private folder is deleted and its
lock let go when it closes, or by the next judge's sweep_dead when its judge was killed.

Owns: signals to a worker's processes and the removal of its folders. It may not start a worker
(eval/judge/worker_start.py), read a reply (wire.py) or decide what a worker may read or write
(file_policy.py); what it knows of processes comes from accounting.py.
"""
from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from eval.judge import build_cache, text
from eval.judge.accounting import _cpu_ns, _processes, _running, _start_time
from eval.judge.file_policy import SHARED_MEMORY
from eval.worker import build


class Control:
    """Stopping, continuing and ending a WorkerProcess (mixed into it: it uses the handle's process,
    uid, private folders, claim, disk watch, log and descriptors)."""

    def freeze(self, frozen: bool) -> int:
        """Stop (True) or continue (False) every process of the worker: its session and, where it
        has one, its own uid. compare freezes the side that is not being timed, so that side's
        threads cannot take the CPU from the other's measurement. A stop is only a signal, and a
        process can continue itself (a timer that sends it SIGCONT: red team round 11), so on
        continuing it returns how long its processes ran on a CPU while they were to be stopped.

        Stops nest: compare and the disk watch's stopped look (disk_quota.DiskWatch) call this
        from two threads, and a look that falls inside compare's stop neither continues the worker
        nor restarts the measure of what it ran (it did both, and the side escaped unseen). The
        worker continues when the last stop is let go; each let-go returns what ran since the
        first."""
        with self._freeze_lock:
            if not self.alive():
                return 0
            session = self.process.pid
            if frozen:
                self._freezes += 1
                if self._freezes > 1:  # stopped already, and measured from that first stop
                    return 0
            else:
                if self._freezes == 0:
                    return 0
                self._freezes -= 1
                ran = 0
                if self._frozen_at is not None:
                    ran = sum(max(0, ns - self._frozen_at.get(pid, 0))
                              for pid, ns in _cpu_ns(session, self.uid).items())
                if self._freezes > 0:  # another caller holds it stopped
                    return ran
                self._frozen_at = None
            reaper = _reaper(session)
            if reaper is not None:  # kill(-1) inside its PID namespace: every process there at once
                os.kill(reaper, signal.SIGUSR1 if frozen else signal.SIGUSR2)
                pids = [pid for pid, _, sid, _ in _processes() if sid == session and pid not in (reaper, session)]
            else:
                pids = _signal_worker(session, self.uid, signal.SIGSTOP if frozen else signal.SIGCONT)
            if not frozen:
                return ran
            deadline = time.monotonic() + 2.0  # a stop is delivered asynchronously: wait until it holds
            while time.monotonic() < deadline and any(_running(pid) for pid in pids):
                time.sleep(0.001)
            self._frozen_at = _cpu_ns(session, self.uid)
            return 0

    def close(self) -> None:
        """Kill the worker's whole process group (and every process of its own uid), then delete its
        private folders. Each step runs whatever the one before met (the folders are the worker's
        own: anything can be in them), so one that fails never keeps the next from running."""
        process, private, store = self.process, self.private, self._store_builds
        self.process, self.private, self._store_builds = None, None, False
        with self._freeze_lock:  # a stop not let go (its worker died) does not outlive it
            self._freezes, self._frozen_at = 0, None
        steps = []
        disk, self.disk = self.disk, None
        if disk is not None:  # before the folders go: a walk of what is being deleted is no measure
            steps.append(disk.stop)
        if process is not None:
            steps += [lambda: _kill_worker(process, self.uid), lambda: _sweep_shared_memory(self.uid)]
            steps += [lambda fd=fd: os.close(fd) for fd in (self.request_fd, self.reply_fd) if fd >= 0]
        if self.log is not None:
            steps.append(self.log.close)
        if private is not None:
            # a worker that kept root: whose files are whose cannot be told, and its processes may
            # outlive the kill; its builds are not kept
            if store and self.uid is not None:
                steps.append(lambda: build_cache.store(self.build_key, private.builds, self.uid, self._built_by))
            steps.append(private.slot.release)
        if self.claim is not None:  # its folder is the private root: deleted, then the lock let go
            steps += [lambda claim=self.claim: build_cache.remove_tree(claim.folder), self.claim.release]
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the next step runs; the judge carries on
                print(f"worker clean-up: {type(exc).__name__}: {text.one_line(str(exc), 200)}", file=sys.stderr)
        self.request_fd = self.reply_fd = -1
        self.claim = None


def _kill_worker(process: subprocess.Popen, uid: int | None) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _kill_rest(process.pid, uid)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    _kill_rest(process.pid, uid, settle=True)


class Claim:
    """A worker's private folder `<cache>/workers/w-XXXXXXXX` and its lock file beside it (the
    judge's, out of the worker's reach), locked for as long as this judge lives. The lock file names
    the worker's session and uid once it has started, so that a judge killed before it could clean
    up (SIGKILL, the OOM killer, `batch --limit`) leaves nothing for long: the next worker start on
    this machine (sweep_dead) finds the lock free and kills what is left of that worker, then
    deletes its folder and shared memory."""

    def __init__(self):
        workers = build.cache_root() / "workers"
        workers.mkdir(parents=True, exist_ok=True)
        os.chmod(workers, 0o711)
        # the lock first, then the folder: a folder without a lock is a leftover. The lock file is
        # locked before it has its name (made under a name sweep_dead never looks at, then linked):
        # a neighbour's sweep that opened it between its creation and its flock took it for a dead
        # judge's, unlinked it, and a later sweep deleted the live worker's folder
        hidden = workers / f".new-{secrets.token_hex(8)}"
        fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else holds it
        try:
            while True:
                name = f"w-{secrets.token_hex(6)}"
                try:
                    os.link(hidden, workers / f"{name}.lock")
                except FileExistsError:
                    continue
                break
        finally:
            os.unlink(hidden)
        self.fd, self.folder = fd, workers / name
        self.folder.mkdir(mode=0o700)

    def started(self, session: int, uid: int | None, gpu: bool = True) -> None:
        """Record the worker's session (its pid, with the start time that tells it from a later
        process of the same number), uid, whether it sees the GPU, and which (CUDA_VISIBLE_DEVICES)."""
        record = {"session": session, "started": _start_time(session), "uid": uid, "gpu": gpu,
                  "device": os.environ.get("CUDA_VISIBLE_DEVICES")}
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(record).encode(), 0)

    def release(self) -> None:
        try:
            os.unlink(f"{self.folder}.lock")
        finally:
            os.close(self.fd)


def _live_workers(own: "Claim | None", same_gpu: bool = False) -> int:
    """How many other workers on this machine that see the GPU have a judge alive (their lock files
    are held; a build-only worker, or one not started yet, is no neighbour on the GPU). same_gpu:
    only those that may share this judge's GPU (the same CUDA_VISIBLE_DEVICES, or either sees all)."""
    mine = os.environ.get("CUDA_VISIBLE_DEVICES")
    workers = build.cache_root() / "workers"
    count = 0
    for lock in workers.glob("w-*.lock") if workers.is_dir() else ():
        if own is not None and lock == Path(f"{own.folder}.lock"):
            continue
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free: its judge is gone (sweep_dead's)
        except OSError:
            try:
                record = json.loads(os.pread(fd, 4096, 0) or b"{}")
                theirs = record.get("device")
                count += bool(record.get("gpu")) and (not same_gpu or not mine or not theirs or theirs == mine)
            except (OSError, ValueError, AttributeError):
                pass
        finally:
            os.close(fd)
    return count


def sweep_dead() -> list[str]:
    """Clean up after every worker whose judge is gone: a lock file that nobody holds. Kills what
    is left of the worker (its session, where that number still belongs to it, and its own uid),
    deletes its shared memory, its folder and the lock. Returns the folders swept."""
    workers = build.cache_root() / "workers"
    if not workers.is_dir():
        return []
    swept = []
    for folder in workers.glob("w-*"):
        if folder.is_dir() and not folder.is_symlink() and not Path(f"{folder}.lock").exists():
            build_cache.remove_tree(folder)  # its lock is gone (a judge of an older harness, or a failed clean-up)
            swept.append(str(folder))
    for hidden in workers.glob(".new-*"):  # a lock file whose judge died before it had its name
        try:
            if time.time() - hidden.lstat().st_mtime < 60:  # (one being made now is locked at once)
                continue
            fd = os.open(hidden, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(hidden)
        except OSError:
            pass
        finally:
            os.close(fd)
    for lock in sorted(workers.glob("w-*.lock")):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino != os.stat(lock).st_ino:
                raise OSError("released while we looked")
        except OSError:
            os.close(fd)  # its judge lives (or has just cleaned up itself)
            continue
        try:
            try:
                record = json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                record = {}
            session, uid = record.get("session"), record.get("uid")
            if isinstance(session, int) and _start_time(session) not in (None, record.get("started")):
                session = None  # the number is another process's now (the worker's session has no one left)
            if isinstance(session, int) or isinstance(uid, int):
                _kill_rest(session if isinstance(session, int) else -1, uid if isinstance(uid, int) else None,
                           settle=True)
                _sweep_shared_memory(uid if isinstance(uid, int) else None)
            folder = lock.with_suffix("")
            build_cache.remove_tree(folder)
            os.unlink(lock)
            swept.append(str(folder))
        except Exception as exc:  # noqa: BLE001 - a leftover that cannot be swept must not stop a judge
            print(f"sweeping {lock.name}: {type(exc).__name__}: {text.one_line(str(exc), 200)}", file=sys.stderr)
        finally:
            os.close(fd)
    return swept


def _reaper(pid: int) -> int | None:
    """The first process of the worker's PID namespace: the only child of the judge's child `pid`
    (eval/worker/sandbox.py own_pid_namespace)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) == 1 and os.readlink(f"/proc/{children[0]}/ns/pid") != os.readlink(f"/proc/{pid}/ns/pid"):
            return int(children[0])
    except OSError:
        pass
    return None  # no namespace (not root, or EVAL_SANDBOX=none): the judge's child is the worker


def _sweep_shared_memory(uid: int | None) -> None:
    """Delete what the worker's own uid left in /dev/shm (it outlives processes)."""
    if uid is None:
        return
    try:
        entries = list(os.scandir(SHARED_MEMORY))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.stat(follow_symlinks=False).st_uid == uid:
                if entry.is_dir(follow_symlinks=False):
                    build_cache.remove_tree(Path(entry.path))
                else:
                    os.unlink(entry.path)
        except OSError:
            pass


# what the helper of _signal_uid runs: become uid, then kill(-1, sig) (everything of uid but itself)
_AS_UID = ("import os, sys\n"
           "uid, sig = int(sys.argv[1]), int(sys.argv[2])\n"
           "os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)\n"
           "os.kill(-1, sig)\n")


def _signal_uid(uid: int, sig: int) -> None:
    """Signal every process of uid at once: a helper that becomes uid and calls kill(-1, sig),
    which the kernel applies to all of them atomically (a chain of forks cannot outrun it). The
    helper is a fresh interpreter started with vfork and exec (subprocess, nothing to run between
    the two): a fork of the judge itself, which holds CUDA's mappings, took about 3 s on the GPU
    machines (14 s of a worker's close went to five of them; 2026-11-28, H200)."""
    subprocess.run([sys.executable, "-I", "-S", "-c", _AS_UID, str(uid), str(int(sig))], env={},
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False, timeout=60)


def _signal_worker(session: int, uid: int | None, sig: int) -> list[int]:
    """Send sig to everything the worker started: every process of its own uid at once (where it
    has one), then each process found in its session or of its uid; returns those found, less the
    dead ones (a zombie waits only for its parent's wait: a kill's settling need not wait for it)."""
    if uid is not None and os.geteuid() == 0:
        _signal_uid(uid, sig)
    found = [pid for pid, _, sid, owner in _processes(live=True) if sid == session or (uid is not None and owner == uid)]
    for pid in found:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return found


def _kill_rest(session: int, uid: int | None, settle: bool = False) -> None:
    """SIGKILL everything the worker started: its session (which no process of it can leave) and,
    where it has a uid of its own, every process of that uid. settle: again and again until a
    pass finds none (a chain of forks outruns one pass over /proc), for at most 5 s."""
    deadline = time.monotonic() + 5
    while True:
        found = _signal_worker(session, uid, signal.SIGKILL)
        if not settle or not found or time.monotonic() > deadline:
            return
        time.sleep(0.01)
