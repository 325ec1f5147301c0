"""The judge's zygote (eval/judge/zygote.py, eval/worker/zygote.py): workers forked from a process that
imported torch once start as the old `python -I -B` workers did, with every layer; the zygote holds
nothing of the judge's environment; it dies with the judge; a dead zygote is replaced; EVAL_ZYGOTE=0
starts Python as before; a worker's end is reported as Popen would (minus its signal)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.judge import zygote
from eval.judge.accounting import _stat
from eval.judge.channel import WorkerProcess
from tests.conftest import ROOT

SECRET = "EVAL_TEST_ZYGOTE_SECRET"


def _hello(tmp_path, name="w"):
    worker = WorkerProcess(None, tmp_path / f"{name}.log")
    info = worker._hello("full")
    return worker, info


def test_a_forked_worker_has_every_layer_and_nothing_of_the_judge(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET, "do-not-leak")
    zygote.shutdown()  # a zygote started now, with this environment in the judge
    worker, info = _hello(tmp_path)
    try:
        assert info.get("started by", "").startswith("zygote"), info.get("started by")
        layers = info["sandbox"]
        assert str(layers.get("seccomp", "")).startswith("on") and str(layers.get("landlock", "")).startswith("on")
        assert str(layers.get("threads", "")).startswith("one"), layers.get("threads")
        forks = zygote._ZYGOTE[0]
        environ = Path(f"/proc/{forks.process.pid}/environ").read_bytes()
        assert SECRET.encode() not in environ, "the zygote holds the judge's environment"
        assert worker.alive()
    finally:
        worker.close()


def test_a_killed_worker_reads_as_killed_and_the_next_starts(tmp_path):
    worker, _ = _hello(tmp_path, "a")
    process = worker.process
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    worker.close()
    again, info = _hello(tmp_path, "b")
    try:
        assert info.get("started by", "").startswith("zygote") and again.alive()
    finally:
        again.close()


def test_a_dead_zygote_is_replaced(tmp_path):
    first = zygote.warm(zygote.environment())
    assert first is not None and first.ready()
    first.process.kill()
    first.process.wait()
    deadline = time.monotonic() + 10
    while not first.dead and time.monotonic() < deadline:
        time.sleep(0.05)
    worker, info = _hello(tmp_path)
    try:
        assert info.get("cuda") is not None and worker.alive()
        assert zygote._ZYGOTE and zygote._ZYGOTE[0] is not first
    finally:
        worker.close()


def test_without_the_zygote_workers_start_python(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_ZYGOTE", "0")
    worker, info = _hello(tmp_path)
    try:
        assert info.get("started by") == "python" and isinstance(worker.process, subprocess.Popen)
    finally:
        worker.close()


@pytest.mark.parametrize("command", [["test"], ["--help"]])
def test_a_killed_judge_takes_its_zygote_and_workers(tmp_path, command):
    """The judge SIGKILLed while its worker runs a hanging submission: nothing of it is left."""
    hang = tmp_path / "hang.py"
    hang.write_text("import time\n\ndef custom_kernel(data):\n    time.sleep(600)\n")
    if command == ["--help"]:  # a command that starts no worker still ends at once
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "eval", "--help"], cwd=ROOT, capture_output=True, timeout=120)
        assert time.monotonic() - started < 60
        return
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}
    judge = subprocess.Popen([sys.executable, "-m", "eval", "test", str(hang), "--cases", "smoke", "--timeout", "300"],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        kids = []
        while time.monotonic() < deadline and len(kids) < 2:  # the zygote and the worker it forked
            kids = _descendants(judge.pid)
            time.sleep(0.2)
        assert len(kids) >= 2, f"the judge never started its zygote and worker: {kids}"
    finally:
        judge.kill()
        judge.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and [p for p in kids if _alive(p)]:
        time.sleep(0.2)
    assert not [p for p in kids if _alive(p)], "a process of the killed judge lived on"


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(_stat(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def _alive(pid: int) -> bool:
    return zygote._exists(pid)


def test_workers_started_at_once_while_the_zygote_imports_all_start(tmp_path):
    """Threads of one judge starting their first workers together, the zygote still importing torch
    (red team, 2026-11-27: the ready message was taken as a spawn reply; a worker's pipes and key then
    went to a fallback that could not read the key)."""
    import concurrent.futures

    zygote.shutdown()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        started = list(pool.map(lambda i: _hello(tmp_path, f"t{i}"), range(3)))
    try:
        assert all(info.get("started by", "").startswith("zygote") and worker.alive() for worker, info in started)
    finally:
        for worker, _ in started:
            worker.close()
