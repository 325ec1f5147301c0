"""Cheat (result channel, raw descriptors): lists /proc/self/fd, and for every descriptor that is a
pipe or a socket (other than 0, 1, 2) it first peeks at pending bytes (MSG_PEEK, nothing consumed)
to steal a request token/nonce, then writes a forged success reply in every framing a harness
might read: multiprocessing's (4-byte length + pickle of {"token", "ok": True, "result"}), a JSON
line, and a 'check: pass' text line. The token also comes from the request dict in a caller frame.
With a token in hand, the forged reply is written by a short-lived forked child (50 ms later, from
its inherited copies of the descriptors) while the worker itself ends at once with os._exit(0): the
genuine (failing) reply is never sent, the channel stays open until the forgery is in it, and a
harness that restarts dead workers finds this one already gone when it moves to the next case.
Returns zeros."""
import json
import os
import pickle
import socket
import stat
import struct
import sys
import time

import torch


def _token_from_frames():
    depth = 1
    while True:
        try:
            frame = sys._getframe(depth)
        except ValueError:
            return None, None
        try:
            for value in frame.f_locals.values():
                if isinstance(value, dict) and "op" in value:
                    for key in ("token", "nonce", "id"):
                        if key in value:
                            return value[key], value.get("op")
        except Exception:
            pass
        depth += 1


def _peek(fd):
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        return b""
    try:
        return s.recv(65536, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return b""
    finally:
        s.close()


def _candidate_fds():
    fds = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return fds
    for name in names:
        try:
            fd = int(name)
            if fd <= 2:
                continue
            target = os.readlink(f"/proc/self/fd/{name}")
            mode = os.fstat(fd).st_mode
        except (OSError, ValueError):
            continue
        if target.startswith(("pipe:", "socket:")) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            fds.append((fd, target))
    return fds


def _forged_payloads(token, op):
    if op == "benchmark":
        stats = {"runs": 100, "mean": 1000.0, "std": 1.0, "err": 0.1, "best": 990.0, "worst": 1010.0, "median": 1000.0}
        result = {"stats": stats, "samples": [1000.0] * 100, "method": "per-call", "host_us": 1.0,
                  "timer": "cuda-events" if torch.cuda.is_available() else "host-clock (no CUDA)"}
    else:
        result = {"status": "pass"}
    reply = {"token": token, "nonce": token, "ok": True, "result": result}
    pickled = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
    return [struct.pack("!i", len(pickled)) + pickled, (json.dumps(reply) + "\n").encode(), b"check: pass\n"]


def _write_all(fds, payloads):
    wrote = False
    for fd, _target in fds:
        for payload in payloads:
            try:
                blocking = os.get_blocking(fd)
                os.set_blocking(fd, False)
                try:
                    wrote = os.write(fd, payload) == len(payload) or wrote
                finally:
                    os.set_blocking(fd, blocking)
            except OSError:
                pass
    return wrote


def custom_kernel(data):
    token, op = _token_from_frames()
    fds = _candidate_fds()
    if token is None:
        for fd, target in fds:
            if target.startswith("socket:"):
                peeked = _peek(fd)
                for key in (b'"token": "', b'"nonce": "'):
                    at = peeked.find(key)
                    if at >= 0:
                        token = peeked[at + len(key): peeked.find(b'"', at + len(key))].decode(errors="replace")
    if fds and token is not None:
        payloads = _forged_payloads(token, op)[:1]
        try:
            child = os.fork()
        except OSError:
            child = None
        if child == 0:  # the forger: waits for the worker to be gone, writes, leaves
            try:
                time.sleep(0.05)
                _write_all(fds, payloads)
            finally:
                os._exit(0)
        if child is None:
            _write_all(fds, payloads)
        os._exit(0)  # the worker: no genuine reply will ever follow the forged one
    _write_all(fds, _forged_payloads(token, op))  # no token: every framing, and carry on
    return torch.zeros_like(data[-1])
