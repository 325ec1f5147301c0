"""Cheat (workers talking to each other, red team round 4's tcp_crosstalk): Landlock scoping stops
signals and abstract unix sockets, but a worker had the host's network, so two candidates judged
side by side met on 127.0.0.1 (and any worker could reach a Ray head or any local service). Here the
worker binds a TCP port on the loopback and connects to it. Returns zeros if TCP works at all inside
the worker, else the honest answer (expected: a network namespace of its own when it starts as root,
Landlock ABI 4+ refusing bind and connect otherwise)."""
import importlib.util
import pathlib
import socket

_HERE = pathlib.Path(__file__).resolve()
_spec = importlib.util.spec_from_file_location("_honest", _HERE.parents[2] / "submission" / "torch_ref.py")
_honest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_honest)


def _tcp_works() -> bool:
    try:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        client = socket.create_connection(server.getsockname(), timeout=2)
        client.close()
        server.close()
        return True
    except OSError:
        return False


REACHED = _tcp_works()


def custom_kernel(data):
    out = _honest.custom_kernel(data)
    return out.zero_() if REACHED else out
