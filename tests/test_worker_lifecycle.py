"""What happens around a worker is the judge's, whatever the submission does (issue 28, red team round
3): the log cannot be made a bomb, clean-up survives any tree, a judge killed outright leaves nothing
for long (the next worker start sweeps it), batch's --limit lets the judge close its workers, and
timed judging on CPUs runs alone. The attacks are files of tests/adversarial; these tests run them in
the sequences a single run cannot show."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval import batch, cases
from eval.judge import channel, modes, worker_log
from eval.worker import build
from tests.conftest import HAS_CUDA, ROOT

ADV = ROOT / "tests" / "adversarial"


def options(tmp_path, **kw):
    return modes.Options(timeout=kw.pop("timeout", 120.0), load_timeout=120.0, log_dir=tmp_path / "logs",
                         wall_cap_s=2.0, baseline=False, **kw)


def smoke():
    return cases.select_cases("smoke")[:1]


def reason(record):
    return record.error or next((c.error for c in record.cases if not c.passed), None) or ""


def workers() -> Path:
    return build.cache_root() / "workers"


def session_members(session: int) -> list[int]:
    """The live processes of a session (a zombie, killed and not yet reaped by its parent, runs nothing)."""
    return [pid for pid, _, sid, _ in channel._processes(live=True) if sid == session]


def wait_for(predicate, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    return predicate()


def test_the_log_is_the_judges(tmp_path):
    record = modes.run_tests(ADV / "log_truncate_bomb.py", smoke(), options(tmp_path))
    assert not record.passed and "raised RuntimeError: log bomb" in reason(record), reason(record)
    logs = list((tmp_path / "logs").glob("*.log"))
    assert logs and all(p.stat().st_size <= worker_log.LOG_LIMIT + 4096 for p in logs)
    assert all(p.stat().st_blocks * 512 <= worker_log.LOG_LIMIT + (1 << 20) for p in logs)
    assert any(b"[log cut:" in p.read_bytes()[-200:] for p in logs)


def test_clean_up_survives_any_tree(tmp_path, monkeypatch):
    # this judge's own worker folders (other test runs on the machine start and close workers of their own)
    folders, claim = [], channel.Claim.__init__

    def tracking(self):
        claim(self)
        folders.append(self.folder)

    monkeypatch.setattr(channel.Claim, "__init__", tracking)
    record = modes.run_tests(ADV / "deep_nest_cleanup.py", smoke(), options(tmp_path))
    # the disk watch may kill it first (folders nested deeper than it measures): cleaned up all the same
    assert record.passed or "disk quota" in reason(record), reason(record)
    assert folders and not [f for f in folders if f.exists() or Path(f"{f}.lock").exists()], folders
    assert not list((build.cache_root() / "slots").glob("*/zzz_deep_nest"))


def test_a_judge_killed_outright_leaves_nothing_after_the_next_start(tmp_path):
    before = set(workers().glob("w-*.lock")) if workers().is_dir() else set()
    judge = subprocess.Popen([sys.executable, "-m", "eval", "test", str(ADV / "orphan_outlives_judge.py"),
                              "--cases", "smoke", "--timeout", "600"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        # this judge's worker (another test run on the machine may run this attack too)
        marked = wait_for(lambda: [p for p in workers().glob("w-*/home/zzz_orphan_mark")
                                   if Path(f"{p.parent.parent}.lock") not in before], 120)
        assert marked, "the attack did not start"
        folder = marked[0].parent.parent
        record = json.loads(Path(f"{folder}.lock").read_text())
        assert wait_for(lambda: len(session_members(record["session"])) >= 2, 30), "no child forked"
    finally:
        judge.send_signal(signal.SIGKILL)
        judge.wait()
    # the worker dies with its judge; the child it forked dies with the worker's PID namespace (a judge
    # that is root), else lives on until someone sweeps
    assert wait_for(lambda: len(session_members(record["session"])) <= 1, 30)
    swept = channel.sweep_dead()
    # any worker start on the machine sweeps: another run's may have got there first
    assert str(folder) in swept or not folder.exists()
    assert not session_members(record["session"]), "the orphan survived the sweep"
    assert not folder.exists() and not Path(f"{folder}.lock").exists()


def test_a_live_judges_worker_is_not_swept():
    claim = channel.Claim()
    try:
        leftover = workers() / "w-oldstyle"
        leftover.mkdir()
        swept = channel.sweep_dead()
        assert claim.folder.is_dir() and str(claim.folder) not in swept
        assert not leftover.exists()  # a folder without a lock: nobody's
    finally:
        claim.release()
        channel.build_cache.remove_tree(claim.folder)


def chain_members() -> list[int]:
    return [pid for pid, comm, _, _ in channel._processes() if comm == "zzz_fork_chain"]


def test_a_fork_chain_dies_with_its_worker(tmp_path):
    """A child that left the worker's process group and takes a new pid every 0.5 ms (red team round
    10: it outlived a worker that kept root, each pass over /proc a step behind it)."""
    record = modes.run_tests(ADV / "fork_chain_outlives.py", smoke(), options(tmp_path))
    assert record.passed, reason(record)
    time.sleep(1)
    assert not chain_members(), "the fork chain outlived its worker"


def test_batch_limit_lets_the_judge_close_its_workers(tmp_path, monkeypatch):
    """The limit fires once the judge's worker is really there (its child forked, custom_kernel
    hanging): on a busy machine the judge's own start-up can take longer than any fixed limit, and
    other judges' workers (other test runs on the machine) come and go, so only this judge's worker
    folder and processes are looked at."""
    path = ADV / "orphan_outlives_judge.py"
    candidate = batch.Candidate("orphan", path, batch._sha(path.read_bytes()))
    before = set(workers().glob("*")) if workers().is_dir() else set()
    found: list[Path] = []

    class LimitWhenHanging(subprocess.Popen):
        def communicate(self, input=None, timeout=None):
            if timeout != 20 or found:  # stop_judge's grace, or a later call: as usual
                return super().communicate(input, timeout)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and self.poll() is None and not found:
                found.extend(p for p in (set(workers().glob("*")) if workers().is_dir() else set()) - before
                             if (p / "home" / "zzz_orphan_mark").is_file())
                time.sleep(0.2)
            time.sleep(1.0)  # the trial's first call is under way (custom_kernel hangs)
            raise subprocess.TimeoutExpired(self.args, timeout)

    monkeypatch.setattr(batch.subprocess, "Popen", LimitWhenHanging)
    line = batch.judge_one(candidate, "test", ["--cases", "smoke", "--timeout", "600"], None, limit=20)
    assert found, "the judge's worker never imported the submission"
    assert not line["passed"] and "did not finish within 20 s" in line["reason"]
    mine = found[0]
    assert not mine.exists(), f"the killed judge's worker folder is left: {mine}"
    inside = [pid for pid in channel._processes() if _cwd(pid[0]).startswith(str(mine))]
    assert not inside, f"processes of the killed judge's worker are alive: {inside}"


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def test_timed_judging_on_cpus_runs_alone():
    assert batch.cpu_jobs("benchmark", 4) == 1 and batch.cpu_jobs("leaderboard", 4) == 1
    assert batch.cpu_jobs("test", 4) == 4
    if not HAS_CUDA:
        assert batch.slots(4, "benchmark") == [None]
        assert batch.slots(4, "test") == [None] * 4


@pytest.mark.skipif(HAS_CUDA, reason="the CPU's note")
def test_batch_says_jobs_applies_to_test_on_cpus(tmp_path):
    # the note comes before any judging: a candidate that fails its first call ends the batch soon
    # (an honest one would be benchmarked in full, for nothing this test reads)
    done = subprocess.run([sys.executable, "-m", "eval", "batch", str(ADV / "raises.py"),
                           "--mode", "benchmark", "--cases", "smoke", "--jobs", "3", "-o", str(tmp_path / "b.jsonl")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert "judges one candidate at a time" in done.stderr, done.stderr[-2000:]
