"""Nothing a submission does outlives it or reaches another run (issue 28): planted files and code are
invisible to the next worker, a daemon dies with its worker, no signal leaves the worker, worker text
is data in every format, the judge decides from the signed hello, and the build cache is the judge's.
The attacks themselves are files of tests/adversarial (manifest.yaml); these tests run them in
sequences a single run cannot show."""
import os
import signal
import subprocess
import sys
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from eval import cases, rank, report
from eval.judge import build_cache, channel, modes
from eval.worker import build
from tests.conftest import ROOT

ADV = ROOT / "tests" / "adversarial"
TORCH_REF = ROOT / "submission" / "torch_ref.py"


def options(tmp_path, **kw):
    return modes.Options(timeout=kw.pop("timeout", 120.0), load_timeout=120.0, log_dir=tmp_path / "logs",
                         wall_cap_s=2.0, baseline=False, **kw)


def smoke(n=1):
    return cases.select_cases("smoke")[:n]


def reason(record):
    return record.error or next((c.error for c in record.cases if not c.passed), None) or ""


def marks(name: str) -> set:
    """Every file called `name` the attack could have left where a later run looks. The walk goes on
    past folders that vanish under it (another run's workers come and go there meanwhile)."""
    places = [Path("/var/tmp"), build.cache_root()]
    found = set()
    for place in places:
        for folder, dirs, files in os.walk(place):  # errors (a folder gone mid-walk) are skipped
            found |= {os.path.join(folder, f) for f in files + dirs if f == name}
    found |= {str(p) for p in Path("/tmp").glob(name)}
    return found


def test_planting_leaves_no_trace_for_the_next_run(tmp_path):
    before = marks("zzz_nvfp4_forged_persist")
    planted = modes.run_tests(ADV / "persist_home_pth.py", smoke(), options(tmp_path))
    assert planted.passed, reason(planted)
    probe = modes.run_tests(ADV / "honest_probe_persist.py", smoke(), options(tmp_path))
    assert probe.passed, f"the probe saw a trace of the planting run: {reason(probe)}"
    # what its import wrote into its own build folder is kept for its own later runs only (the
    # cache entry of its file's hash, seeded into no other submission's worker)
    own = str(build_cache.root() / build_cache.key(ADV / "persist_home_pth.py", False))
    assert {m for m in marks("zzz_nvfp4_forged_persist") if not m.startswith(own + "/")} == \
        {m for m in before if not m.startswith(own + "/")}


def test_private_folders_are_gone_after_the_run(tmp_path, monkeypatch):
    # this judge's own workers: their folders and build slots (other test runs on the machine start
    # and close workers of their own, some with the same submission's slot)
    made, private = [], channel.Private

    def tracking(root, slot):
        made.append(private(root, slot))
        return made[-1]

    from eval.judge import worker_start

    monkeypatch.setattr(worker_start, "Private", tracking)  # where WorkerProcess looks it up
    record = modes.run_tests(TORCH_REF, smoke(), options(tmp_path))
    assert record.passed, reason(record)
    assert made and not [p.root for p in made if p.root.exists()], "a worker's private folder outlived it"
    alive = {p for p in (build.cache_root() / "workers").glob("w-*.lock")}
    assert not [p.builds for p in made if p.builds.exists() and not alive], "a build slot outlived every worker"


def _victim():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "nvfp4-victim"])


def _state(pid: int) -> str:
    return channel._stat(pid)[0]


def _named(comm: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_daemon_dies_with_its_worker_and_signals_nothing_outside(tmp_path):
    victim = _victim()
    try:
        record = modes.run_tests(ADV / "setsid_daemon.py", smoke(), options(tmp_path))
        assert record.passed, reason(record)
        deadline = time.monotonic() + 10
        while _named("nvfp4daemon") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _named("nvfp4daemon"), "the daemon outlived its worker"
        assert _state(victim.pid) != "T", "the worker stopped a process outside it"
    finally:
        victim.kill()
        victim.wait()


def test_one_side_of_compare_cannot_stop_the_other(tmp_path):
    from eval import compare

    outcome = compare.compare(TORCH_REF, ADV / "setsid_daemon.py", smoke(), options(tmp_path, timeout=60.0), 2, 2)
    assert outcome.error is None, outcome.error


def _compare_slow_honest_with_escape(tmp_path):
    from eval import compare

    # the window the escaping side is stopped in is made long by the side timed meanwhile, not by
    # a count of runs: 20 calls that each sleep 200 ms hold it stopped 4 s a round, and its child
    # (woken every 10 ms) runs far past the 50 ms slack even when other work shares the cores (at
    # 60 ms a call it did not, beside another test process on 2 busy cores)
    folder = Path(tempfile.mkdtemp(prefix="slow-honest-"))  # readable by a worker's own uid (not pytest's 0700 tree)
    folder.chmod(0o755)
    slow = folder / "slow_honest.py"
    slow.write_text("import importlib.util, time\n"
                    f"_spec = importlib.util.spec_from_file_location('_honest', {str(TORCH_REF)!r})\n"
                    "_honest = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_honest)\n\n\n"
                    "def custom_kernel(data):\n    time.sleep(0.2)\n    return _honest.custom_kernel(data)\n")
    slow.chmod(0o644)
    try:
        return compare.compare(slow, ADV / "freeze_escape_timer.py", smoke(), options(tmp_path, timeout=60.0), 2, 20)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_side_that_continues_itself_voids_the_comparison(tmp_path):
    """A stop is only a signal: a process's own timer sending it SIGCONT undoes it (red team round
    11), so the judge measures what the stopped side ran and voids the comparison."""
    outcome = _compare_slow_honest_with_escape(tmp_path)
    assert outcome.error and "while it was stopped" in outcome.error, outcome.error


def test_the_disk_watchs_stopped_looks_do_not_undo_compares_stop(tmp_path, monkeypatch):
    """The disk watch stops a worker for a look of its own when the whole disk has grown by more
    than the quota (on a shared disk, others' files do that). Its look used to continue a side
    compare had stopped and to restart the measure of what that side ran, so an escaping side went
    unseen (CI, 2026-11-28). Here every look is a stopped one, as often as the watch allows."""
    from eval.judge import disk_quota

    grown = iter(range(0, 1 << 62, 1 << 40))  # the disk grows by a TiB between any two readings
    monkeypatch.setattr(disk_quota, "_disk_used", lambda folder: next(grown))
    monkeypatch.setattr(disk_quota, "FROZEN_EVERY_S", 0.0)
    monkeypatch.setattr(disk_quota, "INTERVAL_S", 0.02)
    looks = []
    look = disk_quota.DiskWatch._look
    monkeypatch.setattr(disk_quota.DiskWatch, "_look", lambda self, frozen: (looks.append(frozen), look(self, frozen))[1])
    outcome = _compare_slow_honest_with_escape(tmp_path)
    assert any(looks), "no stopped look was taken: the test shows nothing"
    assert outcome.error and "while it was stopped" in outcome.error, outcome.error


def test_a_stop_inside_a_stop_holds_until_the_last_is_let_go(tmp_path):
    """Stops nest: the inner let-go leaves the worker stopped and reports what ran since the first."""
    from eval.judge.channel import WorkerProcess

    worker = WorkerProcess(ADV / "freeze_escape_timer.py", tmp_path / "w.log")
    try:
        worker.start(120)
        reaper = channel._reaper(worker.process.pid)
        outside = {worker.process.pid, reaper} if reaper else set()
        inside = [pid for pid, _, sid, _ in channel._processes() if sid == worker.process.pid and pid not in outside]
        main = [pid for pid in inside if int(channel._stat(pid)[1]) not in inside]  # the worker, not the child that wakes itself
        assert main and len(main) < len(inside), (main, inside)
        child = [pid for pid in inside if pid not in main]
        deadline = time.monotonic() + 60  # until it spins, its timers armed (a stop before that holds it)
        while channel._schedstat(child[0])[0] < 50e6 and time.monotonic() < deadline:
            time.sleep(0.05)
        worker.freeze(True)  # compare's
        time.sleep(2.0)  # the child continues itself and runs: far past the 50 ms slack, on busy cores too
        worker.freeze(True)  # a look of the disk watch, inside compare's stop
        inner = worker.freeze(False)
        assert inner > 50e6, inner  # measured from the first stop, not restarted by the look
        assert all(_state(pid) == "T" for pid in main), [_state(pid) for pid in main]  # still stopped
        assert worker.freeze(False) >= inner  # compare's let-go sees it too
        assert worker.freeze(False) == 0  # nothing left to let go
    finally:
        worker.close()


def test_compare_runs_the_checks_of_test(tmp_path):
    from eval import compare

    outcome = compare.compare(TORCH_REF, ADV / "partial_rows.py", smoke(), options(tmp_path), 1, 2)
    assert outcome.error and "fails the checks" in outcome.error, outcome.error
    text = compare.render(outcome).splitlines()  # the failing side's log named, the verdict last
    assert text[-1].startswith("compare failed:") and len(text[-1].splitlines()) == 1
    logs = [line for line in text if line.startswith("log: ")]
    assert logs == [f"log: {outcome.logs[str(ADV / 'partial_rows.py')]}"], text
    assert (f"[{compare.HOST_TIMER}]" in text) == outcome.host_timer


def test_worker_text_is_data_in_every_format(tmp_path):
    record = modes.run_tests(ADV / "text_injection.py", smoke(), options(tmp_path))
    assert not record.passed and "raised RuntimeError" in reason(record)
    for fmt in report.FORMATS:
        text = report.render(record, fmt)
        lines = text.splitlines()
        assert not any(line.lstrip().startswith(("check: pass", "benchmark.0.mean", "test.0.status: pass"))
                       for line in lines), (fmt, text)
        assert "\x1b" not in text and "\r" not in text
    assert "| 1 | forged" not in report.markdown(record)
    row = rank.Row(name="text_injection", path="x", reason=f"test failed: {reason(record)}")
    md = rank.markdown([], [row], ["128x256x1"], "CPU")
    assert md.count("\n|") == 3, md  # header, rule, the one row: no forged row


def test_the_judge_believes_the_hello_not_the_submission(tmp_path, monkeypatch):
    """Under EVAL_SANDBOX=none the record says the sandbox is off, whatever the submission does."""
    monkeypatch.setenv("EVAL_SANDBOX", "none")
    record = modes.run_tests(ADV / "honest_peeker.py", smoke(), options(tmp_path))
    assert record.passed, reason(record)
    assert record.environment.sandbox["sandbox"].startswith("off")
    assert "seccomp" not in record.environment.sandbox


def test_an_import_that_hangs_ends_at_the_timeout(tmp_path):
    # the reason is the timeout's own (no wall-clock window here: a busy machine stretches the
    # judge's start-up, not the 5 s the judge itself counts)
    record = modes.run_tests(ADV / "import_hang.py", smoke(), options(tmp_path, timeout=5.0))
    assert "timed out after 5 s" in reason(record), reason(record)


def test_build_cache_entries_are_the_judges(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "sub.py"
    source.write_text("def custom_kernel(data):\n    return data[-1]\n")
    key = build_cache.key(source, False)
    assert key != build_cache.key(source, True)
    built = tmp_path / "built"
    (built / "torch_extensions" / "ext").mkdir(parents=True)
    (built / "torch_extensions" / "ext" / "ext.so").write_bytes(b"\x7fELF")
    os.symlink("/etc/passwd", built / "torch_extensions" / "ext" / "link")
    assert build_cache.store(key, built)
    entry = build_cache.root() / key
    assert (entry / "torch_extensions" / "ext" / "ext.so").read_bytes() == b"\x7fELF"
    assert not (entry / "torch_extensions" / "ext" / "link").exists(), "a link was copied into the cache"
    assert not build_cache.store(key, built), "an entry is written once"
    mode = (entry / "torch_extensions" / "ext" / "ext.so").stat().st_mode
    assert not mode & 0o022, "writable by others"
    slot = build_cache.Slot(key)
    try:
        assert build_cache.seed(key, slot.path)
        assert (slot.path / "torch_extensions" / "ext" / "ext.so").is_file()
        second = build_cache.Slot(key)  # the same submission twice at once: another path
        assert second.path != slot.path
        second.release()
    finally:
        slot.release()
    assert not slot.path.exists()


def test_a_reply_larger_than_its_request_is_refused_before_it_is_read():
    assert modes.reply_limit("profile", {}) == 0
    args = {"m": 128, "k": 256, "l": 1, "seed": 1}
    one = modes.reply_limit("trial", {"args": args, "params": {"steps": [{}]}})
    assert 0 < one <= 2 * modes.SNAPSHOT_SLACK * (1 << 20)


@pytest.mark.parametrize("sub", ["parameter_output", "subclass_plain_output"])
def test_outputs_the_leaderboard_accepts(sub, tmp_path):
    record = modes.run_tests(ADV / f"{sub}.py", smoke(), options(tmp_path))
    assert record.passed, reason(record)


def test_the_sandbox_refuses_leaving_the_session_and_new_namespaces():
    """setsid, unshare and namespace clones are refused inside the worker's seccomp filter (run in a
    child process: the filter cannot be removed once applied)."""
    code = ("import os, sys; from eval.worker import sandbox; sandbox._seccomp(sandbox.platform.machine(), "
            "os.getppid(), os.getpid())\n"
            "try:\n os.setsid(); print('setsid allowed')\nexcept OSError: print('setsid refused')\n"
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "print('unshare refused' if libc.unshare(0x10000000) != 0 else 'unshare allowed')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         start_new_session=False)
    assert "setsid refused" in out.stdout and "unshare refused" in out.stdout, out.stdout + out.stderr


def test_the_sandbox_keeps_a_worker_undumpable():
    """After the uid change a worker is not dumpable: its /proc/<pid> files are root's, so it cannot
    open its own mem to write past page protections. prctl(PR_SET_DUMPABLE) is refused, other prctl
    calls are not (red team, 2026-11-27)."""
    code = ("import ctypes, os; from eval.worker import sandbox; sandbox._seccomp(sandbox.platform.machine(), "
            "os.getppid(), os.getpid())\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print('dumpable', 'refused' if libc.prctl(4, 1, 0, 0, 0) != 0 else 'allowed')\n"
            "print('name', 'refused' if libc.prctl(15, b'x', 0, 0, 0) != 0 else 'allowed')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "dumpable refused" in out.stdout and "name allowed" in out.stdout, out.stdout + out.stderr


def test_a_cache_folder_someone_else_could_write_is_refused(tmp_path, monkeypatch):
    """The cache folder sits in /var/tmp, where anyone may make it first: the worker's library and
    the machine's sandbox level are never taken from a folder another user could write."""
    from eval.worker import build

    shared = tmp_path / "cache"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("EVAL_CACHE", str(shared))
    with pytest.raises(RuntimeError, match="is not this user's alone"):
        build.build()
    os.chmod(shared, 0o755)
    assert build.owned_root() == shared


def test_compare_freezes_the_side_not_timed(tmp_path):
    """While one side of compare is timed, every process of the other is stopped (its spinning
    threads included), and continues afterwards."""
    from eval.judge.channel import WorkerProcess

    from eval.judge import channel

    worker = WorkerProcess(TORCH_REF, tmp_path / "w.log")
    try:
        worker.start(120)
        reaper = channel._reaper(worker.process.pid)  # as root: the worker is in a PID namespace of its own
        outside = {worker.process.pid, reaper} if reaper else set()  # its keepers, never stopped
        inside = [pid for pid, _, sid, _ in channel._processes() if sid == worker.process.pid and pid not in outside]
        assert inside
        worker.freeze(True)
        assert all(_state(pid) == "T" for pid in inside), [_state(pid) for pid in inside]
        assert worker.freeze(False) < 50e6  # an honest worker runs nothing while stopped
        # as root the continue is the reaper's kill(-1, SIGCONT), sent once the reaper runs: like a stop
        # (which freeze waits for), it lands asynchronously; on a busy CI machine after the check
        deadline = time.monotonic() + 2.0
        while any(_state(pid) == "T" for pid in inside) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert not any(_state(pid) == "T" for pid in inside)
    finally:
        worker.close()


STEAL_TARGET = Path("/tmp/nvfp4_steal_sources_target.jsonl")  # the fixed path steal_sources.py reads
SHM_PLANTED = ("zzz_nvfp4_shm_plant", "zzz_nvfp4_shm_plant_ballast", "sem.zzz_nvfp4_shm_plant")


def _landlock(sandbox: dict) -> bool:
    """The worker has a Landlock layer (a kernel with Landlock): its read list applies."""
    return sandbox.get("landlock", "").startswith("on")


def test_the_read_list_holds_no_other_run(tmp_path, monkeypatch):
    """What a worker may read: its own submission file, the harness, the problem, Python; not a file
    beside its submission, the judge's working folder, results/, tests/, /dev (raw disks) or the
    host's /dev/shm; EVAL_WORKER_READ adds paths."""
    from eval.judge import channel

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setenv(channel.READ_ENV, str(extra))
    submission = tmp_path / "cand.py"
    submission.write_text("def custom_kernel(data):\n    return data[-1]\n")
    readable, listable = channel._readable_paths(submission.resolve(), tmp_path / "native.so")

    def covered(path):
        return any(channel._beneath(os.path.realpath(path), granted) for granted in readable)

    assert covered(submission) and covered(extra / "x") and covered(TORCH_REF) and covered(os.__file__)
    assert covered(ROOT / "eval" / "worker" / "driver.py") and covered(ROOT / "task.py")
    assert not covered(tmp_path / "other.py"), "a file beside the submission (another candidate)"
    for path in (ROOT / "results" / "x.json", ROOT / "tests" / "test_isolation.py", ROOT / ".git" / "config",
                 Path("/dev/vda"), Path("/dev/shm/x"), Path("/tmp/x"), Path("/var/tmp/x")):
        assert not covered(path), path
    assert listable == [str(ROOT)]


def test_a_worker_reads_no_other_candidate_or_verdict_file(tmp_path):
    """steal_sources reads what a process's command line names (here another candidate's source and
    a verdict JSONL in a folder of their own) and a fixed file in /tmp: Landlock's read list lets none
    through, and the honest answer stays right."""
    other = tmp_path / "other_candidate.py"
    other.write_text(TORCH_REF.read_text())
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text('{"id": "other", "passed": true}\n')
    STEAL_TARGET.write_text('{"id": "secret"}\n')
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "nvfp4-steal-victim",
                               str(other), str(verdicts)])
    try:
        record = modes.run_tests(ADV / "steal_sources.py", smoke(), options(tmp_path))
    finally:
        victim.kill()
        victim.wait()
        STEAL_TARGET.unlink(missing_ok=True)
    if not _landlock(record.environment.sandbox):
        pytest.skip(f"no Landlock here: {record.environment.sandbox.get('landlock')}")
    assert record.passed, f"the worker read a file outside its read list: {reason(record)}"


def test_a_batch_candidate_reads_neither_the_others_nor_the_verdicts(tmp_path):
    """The red team's steal_batch_sources, inside a real `eval batch`: the candidate judged second
    finds the batch process, reads nothing it names, and the verdict file is the judge's alone."""
    import json

    from eval import problem_folder

    other = tmp_path / "a_other.py"
    other.write_text(TORCH_REF.read_text())
    out = tmp_path / "verdicts.jsonl"
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path / "results")}
    env.pop(problem_folder.DIR_ENV, None)
    command = [sys.executable, "-m", "eval", "batch", str(other), str(ADV / "steal_sources.py"), "--mode", "test",
               "--cases", "smoke", "--timeout", "120", "-o", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    lines = {e["id"]: e for e in map(json.loads, out.read_text().splitlines())}
    assert len(lines) == 2, done.stdout[-2000:] + done.stderr[-2000:]
    thief = lines[str(ADV / "steal_sources.py")]
    if not _landlock(thief["record"]["environment"]["sandbox"]):
        pytest.skip("no Landlock here")
    assert thief["passed"], f"the candidate read another's source or the verdicts: {thief['reason']}"
    assert lines[str(other)]["passed"], lines[str(other)]["reason"]
    assert out.stat().st_mode & 0o777 == 0o600


def test_shared_memory_a_worker_leaves_is_gone_with_it(tmp_path):
    """shm_plant leaves files in /dev/shm (a worker that keeps root is not swept by uid): as root, the
    worker's /dev/shm is a private tmpfs, so nothing is left on the host and the probe run after it
    sees nothing."""
    shm = Path("/dev/shm")
    for name in SHM_PLANTED:  # what a run of an older harness left
        (shm / name).unlink(missing_ok=True)
    planted = modes.run_tests(ADV / "shm_plant.py", smoke(), options(tmp_path))
    left = [name for name in SHM_PLANTED if (shm / name).exists()]
    probe = modes.run_tests(ADV / "honest_probe_shm.py", smoke(), options(tmp_path))
    for name in left:
        (shm / name).unlink(missing_ok=True)
    assert planted.passed, reason(planted)
    assert not left, f"left on the host's /dev/shm: {left}"
    assert probe.passed, f"the probe saw what the planting run left: {reason(probe)}"
    if os.geteuid() == 0:
        assert planted.environment.sandbox.get("shm", "").startswith("on (private tmpfs"), planted.environment.sandbox


def _without_capabilities():
    """preexec_fn: the child keeps its uid (root, where the tests run as root) and drops every capability, as a worker
    that keeps root does."""
    import platform

    from eval.worker import sandbox

    sandbox._drop_capabilities(platform.machine())


def test_a_worker_cannot_reschedule_a_neighbour(tmp_path):
    """A neighbour as a worker that keeps root is (root, no capabilities): the probe sets its priority,
    CPU set and scheduling class to what they are; each is refused (seccomp where root is kept, the
    kernel where the uid is dropped), so the probe returns the honest output."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], preexec_fn=_without_capabilities)
    try:
        probe = tmp_path / "renice_probe.py"
        probe.write_text((ADV / "renice_neighbour.py").read_text().replace(
            "TARGET = None", f"TARGET = {victim.pid}").replace("_HERE.parents[2]", f"Path({str(ROOT)!r})")
            .replace("import pathlib", "import pathlib\nfrom pathlib import Path"))
        record = modes.run_tests(probe, smoke(), options(tmp_path))
        assert record.passed, reason(record)
        assert victim.poll() is None and os.getpriority(os.PRIO_PROCESS, victim.pid) == 0
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own needs root")
def test_a_uid_is_signalled_whole_by_a_spawned_helper_not_a_fork_of_the_judge(monkeypatch):
    """_signal_uid kills every process of the uid (kill(-1) as that uid) and no longer forks the judge
    (a fork of a judge holding CUDA's mappings took about 3 s on the GPU machines)."""
    from eval.judge import lifecycle

    uid = 1_300_000_000 + os.getpid() % 1000
    procs = [subprocess.Popen(["sleep", "60"], user=uid, group=uid) for _ in range(3)]
    mine = subprocess.Popen(["sleep", "60"])  # another uid's process: untouched
    monkeypatch.setattr(os, "fork", lambda: (_ for _ in ()).throw(AssertionError("the judge forked")))
    try:
        lifecycle._signal_uid(uid, signal.SIGKILL)
        assert [p.wait(timeout=10) for p in procs] == [-signal.SIGKILL] * 3
        time.sleep(0.1)
        assert mine.poll() is None
    finally:
        mine.kill()
        for p in procs:
            p.kill()
