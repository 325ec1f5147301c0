"""A worker's stdout and stderr: a pipe that a thread of the judge drains into the run's log file.

The worker never holds the log file itself (a descriptor of it would let the submission truncate it,
make it sparse and huge, or seek and rewrite what an earlier worker wrote there); what it writes is
copied up to LOG_LIMIT bytes per worker (the rest is counted, not kept), and the last TAIL_BYTES stay
in memory for error reports, so the judge never reads back a file of unbounded size.
"""
from __future__ import annotations

import fcntl
import os
import struct
import termios
import threading
import time
from pathlib import Path

LOG_LIMIT = 64 << 20  # bytes of one worker's output kept in the log file
TAIL_BYTES = 64 << 10  # bytes kept in memory for the error report


class LogPump:
    """Owns the read end of the worker's output pipe; `write_fd` is what the worker inherits as its
    stdout and stderr (closed in the judge once the worker has started: `started()`)."""

    def __init__(self, log_path: Path):
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.read_fd, self.write_fd = os.pipe()
        self._tail = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="worker-log", daemon=True)
        self._thread.start()

    def started(self) -> None:
        """The worker holds its copy of the write end: the judge's is closed, so the pipe ends (and the
        thread stops) when the worker and everything it started are gone."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def _drain(self) -> None:
        kept = 0
        with open(self.log_path, "ab", buffering=0) as log:
            while True:
                try:
                    chunk = os.read(self.read_fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                keep = chunk[:max(0, LOG_LIMIT - kept)]
                if keep:
                    log.write(keep)
                    kept += len(keep)
                with self._lock:
                    self._dropped += len(chunk) - len(keep)
                    self._tail += chunk
                    del self._tail[:-TAIL_BYTES]
            if self._dropped:
                log.write(f"\n[log cut: {self._dropped} more bytes of the worker's output not kept]\n".encode())

    def _pending(self) -> int:
        try:
            return struct.unpack("i", fcntl.ioctl(self.read_fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return 0

    def tail(self, lines: int = 15) -> str:
        """The last lines the worker wrote (waiting a moment for what is still in the pipe)."""
        deadline = time.monotonic() + 0.2
        while self._thread.is_alive() and self._pending() and time.monotonic() < deadline:
            time.sleep(0.005)
        with self._lock:
            data = bytes(self._tail)
        return "\n".join(data.decode(errors="replace").splitlines()[-lines:])

    def close(self, wait: float = 2.0) -> None:
        """After the worker is dead: let the thread copy what is left, then let go of the pipe."""
        self.started()
        self._thread.join(timeout=wait)
        if not self._thread.is_alive():
            try:
                os.close(self.read_fd)
            except OSError:
                pass
            self.read_fd = -1
        # else: a process of the worker still holds the pipe (it is being killed); the thread ends
        # at its end of file and the descriptor goes with the judge
