"""Cheat (reply channel, memory): writes a well-formed frame head into every pipe it can write to
(the reply pipe among them) claiming a 4 GiB blob and a 256 MiB header, then sends a few bytes and
stalls: a judge that sizes its buffers from the head allocates until it runs out of memory. Must fail
at once with "reply failed authentication" (a reply larger than its request can produce is refused
before it is read)."""
import os
import stat
import struct
import time


def _pipes():
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                yield fd
        except OSError:
            pass


def custom_kernel(data):
    head = b"NVF1" + struct.pack("<IQ", 256 << 20, 4 << 30)
    for fd in _pipes():
        try:
            os.write(fd, head + b"{" * 64)
        except OSError:
            pass
    time.sleep(30)
    return data[-1]
