"""`python -m eval batch --ray local`: the same verdicts as the batch without Ray (an honest candidate
from a JSONL of sources, a wrong one, one that crashes, one that hangs at import), the same sandbox,
records streamed to the JSONL, a rerun that judges nothing again; without Ray, one usage line."""
import json
import os
import re
import subprocess
import sys

import pytest

from eval import problem_folder
from tests.conftest import ROOT
from tests.test_batch import CRASH, HANG

# a timeout an honest import and trial meet on a busy machine, which the hang still reaches
COMMON = ["--mode", "test", "--cases", "smoke", "--timeout", "30", "--jobs", "2"]


def _candidates(tmp_path) -> list[str]:
    source = (ROOT / "submission" / "torch_ref.py").read_text()
    assert "\n    return c\n" in source
    (tmp_path / "hang.py").write_text(HANG)
    (tmp_path / "crash.py").write_text(CRASH)
    (tmp_path / "wrong.py").write_text(source.replace("\n    return c\n", "\n    return c * 2\n"))
    (tmp_path / "cands.jsonl").write_text(json.dumps({"id": "honest", "source": source}) + "\n")
    return [str(tmp_path / name) for name in ("hang.py", "crash.py", "wrong.py", "cands.jsonl")]


def _batch(tmp_path, out, *extra):
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}
    env.pop(problem_folder.DIR_ENV, None)
    command = [sys.executable, "-m", "eval", "batch", *_candidates(tmp_path), *COMMON, "-o", str(out), *extra]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _verdicts(out) -> dict:
    return {e["id"]: e for e in map(json.loads, out.read_text().splitlines())}


def _kind(reason):
    """A reason without its numbers (each judgement draws its own inputs: the values differ)."""
    return re.sub(r"-?\d+(\.\d+)?", "#", reason or "")


def test_ray_batch_gives_the_local_batch_verdicts(tmp_path):
    pytest.importorskip("ray")
    local, through_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    first = _batch(tmp_path, local)
    assert first.returncode == 112, first.stderr[-2000:]
    ran = _batch(tmp_path, through_ray, "--ray", "local")
    assert ran.returncode == 112, ran.stdout[-2000:] + ran.stderr[-2000:]
    mine, theirs = _verdicts(through_ray), _verdicts(local)
    assert sorted(mine) == sorted(theirs) and len(mine) == 4
    for cid, entry in theirs.items():
        assert (mine[cid]["passed"], _kind(mine[cid]["reason"])) == (entry["passed"], _kind(entry["reason"])), cid
        assert mine[cid]["host"] and mine[cid]["options"] == entry["options"]
    assert mine["honest"]["passed"] and not mine[str(tmp_path / "wrong.py")]["passed"]
    assert "timed out" in mine[str(tmp_path / "hang.py")]["reason"]
    assert "crashed" in mine[str(tmp_path / "crash.py")]["reason"]
    sandbox = mine["honest"]["record"]["environment"]["sandbox"]
    assert sandbox == theirs["honest"]["record"]["environment"]["sandbox"]
    assert "1 of 4 passed" in ran.stdout and "failed:" in ran.stdout
    again = _batch(tmp_path, through_ray, "--ray", "local")
    assert len(through_ray.read_text().splitlines()) == 4, "a rerun judged again what was judged"
    assert "1 of 4 passed" in again.stdout


def test_ray_missing_is_one_usage_line(tmp_path):
    (tmp_path / "a.py").write_text("def custom_kernel(data):\n    return None\n")
    code = "import sys; sys.modules['ray'] = None; from eval.cli import main; main()"
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path)}
    env.pop(problem_folder.DIR_ENV, None)
    done = subprocess.run([sys.executable, "-c", code, "batch", str(tmp_path / "a.py"), "--ray", "local"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {__import__('eval.batch_ray').batch_ray.INSTALL_HINT}"]


class _Died(Exception):
    """Stands for ray.exceptions.RayError (an actor that died under its task)."""


class _Ref:
    """A task's object ref (hashable, as Ray's are); `pending` ones never finish."""

    def __init__(self, value, pending=False):
        self.value, self.pending = value, pending


class _FakeRay:
    """Just enough of the ray module for batch_ray's driver loop: tasks finish at once, in order; a
    candidate named `dies` kills every actor that judges it, `dies-once` only the first; actors after
    the first `placeable` are never placed (their node is gone)."""

    class exceptions:
        RayError = _Died

    def __init__(self, placeable=99):
        self.actors, self.killed, self.placeable, self.seen = 0, 0, placeable, []

    def cluster_resources(self):
        return {"CPU": 2.0}

    def remote(self, **resources):
        fake = self

        class Method:
            def __init__(self, fn):
                self.remote = fn

        class Actor:
            def __init__(self):
                fake.actors += 1
                placed = fake.actors <= fake.placeable
                self.ready = Method(lambda: _Ref("fake-host", pending=not placed))
                self.judge = Method(self._judge)

            def _judge(self, cid, source, sha256, shown, mode, args, limit, problem, secret=None):
                fake.seen.append(cid)
                if cid == "dies" or (cid == "dies-once" and fake.seen.count(cid) == 1):
                    return _Ref(_Died("The actor died unexpectedly before finishing this task."))
                return _Ref({"id": cid, "sha256": sha256, "passed": True, "reason": None, "geomean_ns": 1.0,
                             "device": None, "seconds": 0.0, "record": None, "host": "fake"})

        return lambda cls: type("ActorClass", (), {"remote": staticmethod(Actor)})

    def wait(self, refs, num_returns, timeout):
        done = [r for r in refs if not r.pending]
        return done[:num_returns], [r for r in refs if r not in done[:num_returns]]

    def get(self, ref):
        if isinstance(ref.value, Exception):
            raise ref.value
        return ref.value

    def kill(self, actor, no_restart):
        self.killed += 1


def _fake_candidates(tmp_path, names):
    from eval import batch

    problem_folder.use(ROOT)
    candidates = []
    for name in names:
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
        candidates.append(batch.Candidate(name, tmp_path / f"{name}.py", name * 8))
    return candidates


def test_a_candidate_whose_actor_died_is_judged_again_elsewhere(tmp_path):
    """The driver loop with a stand-in for ray: a candidate whose actor died under it (a node lost) is
    judged again on a new actor and has one line; one whose actors die every time gets a line saying
    so after MAX_ATTEMPTS; every other candidate is judged and streamed; each dead actor is replaced."""
    import collections

    from eval import batch_ray

    candidates = _fake_candidates(tmp_path, ("first", "dies-once", "dies", "last"))
    fake, out = _FakeRay(), tmp_path / "out.jsonl"
    lines = batch_ray._drive(fake, collections.deque(candidates), "test", [], out, "key", 2, 60.0, None)
    by_id = {line["id"]: line for line in lines}
    assert by_id["first"]["passed"] and by_id["last"]["passed"]
    assert by_id["dies-once"]["passed"] and by_id["dies-once"]["retried"] == 1
    assert not by_id["dies"]["passed"] and "the Ray actors judging it died 2 times" in by_id["dies"]["reason"]
    assert fake.seen.count("dies") == batch_ray.MAX_ATTEMPTS and fake.seen.count("dies-once") == 2
    assert fake.killed == 3 and fake.actors == 2 + 3
    written = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(written) == sorted(c.id for c in candidates), "a candidate lost or written twice"


def test_candidates_no_actor_can_take_are_left_for_a_resume(tmp_path, monkeypatch):
    """A node lost for good: its actor's replacement is never placed; after START_S it is given up,
    the remaining actor judges what it can, and candidates nobody could take are not written."""
    import collections

    from eval import batch_ray

    monkeypatch.setattr(batch_ray, "START_S", 0.0)
    candidates = _fake_candidates(tmp_path, ("dies-once", "b"))
    fake, out = _FakeRay(placeable=1), tmp_path / "out.jsonl"
    lines = batch_ray._drive(fake, collections.deque(candidates), "test", [], out, "key", 1, 60.0, None)
    by_id = {line["id"]: line for line in lines}
    assert by_id["dies-once"].get("infrastructure") and by_id["b"].get("infrastructure")
    assert not out.exists() or not out.read_text().strip()


def test_a_cluster_address_where_nothing_answers_is_one_line_at_once(tmp_path, monkeypatch):
    """On a 2xH200 a `--ray auto` batch whose raylets had not started retried for minutes, printing
    warnings, and its pass never ended: nothing listening at the address is one line, at once."""
    import socket
    import time

    from eval import batch, batch_ray

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sub = tmp_path / "a.py"
    sub.write_text("def custom_kernel(data):\n    return None\n")
    found = batch.collect([sub], tmp_path / "sources")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    started = time.monotonic()
    for address in (f"127.0.0.1:{port}", "auto"):
        with pytest.raises(ConnectionError, match="nothing answers there"):
            batch_ray.run(found, "test", [], tmp_path / "v.jsonl", address)
    assert time.monotonic() - started < 60  # refused at once; Ray's own retries took minutes
