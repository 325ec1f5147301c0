"""The judge's end of a worker's reply channel: frames, replies and their checks.

A request is pickled by us and written to the worker's request pipe; a reply is a frame of JSON
header + bytes + HMAC-SHA256 (`NVF1` | u32 header length | u64 blob length | header | blob | MAC,
written by eval/worker/native.cpp), never unpickled. A reply whose MAC, nonce or echoed parameters
do not match what we asked is a tampered channel and fails the run; a reply larger than its request
can produce is refused before it is read.

Owns: WorkerFailure, Reply, REPLY_KINDS, the frame reader and the checks (Requests, mixed into
eval/judge/worker_start.py's WorkerProcess: it uses the handle's process, key, request_fd,
reply_fd, disk, log and close()), _parse_info, _echo_matches and _death_reason. It may not start,
stop or signal a worker (worker_start.py, lifecycle.py) nor decide what a worker may read
(file_policy.py).
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import hmac
import json
import os
import pickle
import secrets
import select
import signal
import struct

from eval.judge import disk_quota, text
from eval.judge.accounting import Deadline

REPLY_KINDS = {"hello": "hello", "load": "ready", "trial": "trial", "runs": "runs", "baseline": "runs",
               "profile": "text", "configs": "text", "evaluate": "text"}
TEXT_HEADER_LIMIT = 16 << 20  # a reply without measurements (hello, ready, text, error)


class WorkerFailure(Exception):
    """A request did not complete: `reason` is one line naming what went wrong."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclasses.dataclass(frozen=True)
class Reply:
    kind: str  # ready | error | text | runs | trial
    header: dict
    blob: bytes


class Requests:
    """The request half of a WorkerProcess (mixed into it): send a request, read and verify its reply."""

    # -- requests -------------------------------------------------------------------------------
    def request(self, op: str, payload: dict, timeout: float, blob_limit: int = 0,
                build_limit: float | None = None) -> Reply:
        """Run one request in the worker and return its verified reply. Raises WorkerFailure (the
        worker is closed when it died, hung, tampered with the channel or sent more than the request
        can produce: blob_limit bytes of data, a header sized to match)."""
        if not self.alive():
            raise WorkerFailure("worker is not running")
        nonce = secrets.token_hex(16)
        body = pickle.dumps({"op": op, "nonce": nonce, **payload})
        try:
            os.write(self.request_fd, struct.pack(">Q", len(body)) + body)
        except OSError:
            raise self._died()
        clock = Deadline(timeout, build_limit, self.process.pid)
        try:
            reply = self._read_reply(clock, blob_limit)
        except WorkerFailure:
            self.close()
            raise
        if reply.header.get("nonce") != nonce:
            self.close()
            raise WorkerFailure("reply failed authentication: it answers another request (replayed or forged)")
        if reply.kind == "error":
            raise WorkerFailure(text.from_worker(reply.header.get("text", "error")), self._log_tail())
        if reply.kind != REPLY_KINDS.get(op):
            self.close()
            raise WorkerFailure(f"reply failed authentication: a {text.one_line(reply.kind, 40)!r} reply to a "
                                f"'{op}' request (forged)")
        if reply.kind in ("runs", "trial") and not _echo_matches(payload.get("params", {}), reply.header.get("params", {})):
            self.close()
            raise WorkerFailure("reply failed authentication: its parameters are not the ones requested")
        return reply

    def _read_reply(self, clock: "Deadline", blob_limit: int) -> Reply:
        head = self._read(16, clock)
        magic, header_len, blob_len = head[:4], *struct.unpack("<IQ", head[4:])
        if magic != b"NVF1":
            raise WorkerFailure("reply failed authentication: not a frame of the worker's compiled part (forged?)")
        header_limit = TEXT_HEADER_LIMIT + blob_limit // 64
        if header_len > header_limit or blob_len > blob_limit:
            raise WorkerFailure(f"reply failed authentication: {header_len} + {blob_len} bytes, more than the request "
                                f"can produce ({header_limit} + {blob_limit})")
        digest = hashlib.sha256()  # taken as the bytes come: a reply can hold GBs of outputs
        header = self._read(header_len, clock, digest)
        blob = self._read(blob_len, clock, digest)
        mac = self._read(32, clock)
        expected = hmac.new(self.key, digest.digest(), hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            raise WorkerFailure("reply failed authentication: bad signature (forged or tampered result channel)")
        try:
            parsed = json.loads(header)
        except ValueError:
            raise WorkerFailure("reply failed authentication: unreadable header")
        if not isinstance(parsed, dict):
            raise WorkerFailure("reply failed authentication: unreadable header")
        return Reply(kind=str(parsed.get("kind")), header=parsed, blob=blob)

    def _read(self, n: int, clock: "Deadline", digest=None) -> bytes:
        """n bytes from the worker, read into place (a reply's blob can be GBs: no chunks joined after);
        digest: hashed as they come, while the worker writes the next."""
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        with io.FileIO(self.reply_fd, closefd=False) as pipe:
            while got < n:
                ready, _, _ = select.select([self.reply_fd], [], [], min(1.0, clock.left()))
                if not ready:
                    if clock.expired():
                        raise WorkerFailure(clock.reason())
                    continue
                count = pipe.readinto(view[got:got + (1 << 24)])
                if not count:
                    raise self._died()
                if digest is not None:
                    digest.update(view[got:got + count])
                got += count
        return bytes(buffer) if n < (1 << 20) else buffer

    def _died(self) -> WorkerFailure:
        code = self.process.wait(timeout=30) if self.process else None
        if self.disk is not None and self.disk.reason:
            return WorkerFailure(self.disk.reason, self._log_tail())
        return WorkerFailure(_death_reason(code), self._log_tail())

    def _log_tail(self, lines: int = 15) -> str:
        return self.log.tail(lines) if self.log else ""


def _parse_info(raw) -> dict:
    """A reply's JSON text as a dict of plain values, or {} (never an exception)."""
    try:
        info = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _echo_matches(asked, echoed) -> bool:
    """Every parameter we sent comes back unchanged (numbers compared as floats)."""
    if isinstance(asked, dict):
        return isinstance(echoed, dict) and all(k in echoed and _echo_matches(v, echoed[k]) for k, v in asked.items()
                                                if k not in ("steps",)) and (
            "steps" not in asked or _steps_match(asked["steps"], echoed.get("steps")))
    if isinstance(asked, (list, tuple)):
        return isinstance(echoed, list) and len(asked) == len(echoed) and all(map(_echo_matches, asked, echoed))
    if isinstance(asked, bool) or isinstance(echoed, bool):
        return asked == echoed
    if isinstance(asked, (int, float)):
        return isinstance(echoed, (int, float)) and float(asked) == float(echoed)
    return True  # strings and other values are not echoed


def _steps_match(asked, echoed) -> bool:
    keys = ("seed", "reuse", "hash_args", "canary")
    return isinstance(echoed, list) and len(echoed) <= len(asked) and all(
        _echo_matches({k: a[k] for k in keys}, e) for a, e in zip(asked, echoed))


def _death_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = {"SIGSEGV": " (segfault)", "SIGKILL": " (killed: out of host memory?)", "SIGABRT": " (abort)",
                "SIGXFSZ": f" (a file past the worker's disk quota: raise {disk_quota.QUOTA_ENV} if a build needs more)"}
        return f"crashed: worker killed by {name}{hint.get(name, '')}"
    return f"crashed: worker process exited with code {exitcode} (os._exit or sys.exit in the submission?)"
