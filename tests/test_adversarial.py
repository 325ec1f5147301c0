"""The red-team corpus (tests/adversarial/manifest.yaml): every cheat is caught with its reason, every
honest-but-unusual submission passes, timer attacks do not shorten the reported time, and forgeries
leave no trace where they aimed (results/, site-packages, the judge's stdout)."""
import glob
import site
import sys
from pathlib import Path

import pytest
import yaml

from eval import cases, report
from eval.judge import modes
from tests.conftest import HAS_CUDA, ROOT

ADV = ROOT / "tests" / "adversarial"
MANIFEST = yaml.safe_load((ADV / "manifest.yaml").read_text())
# per-case timeout for submissions that never return: the judge's own clock, counted from the request
# (a busy machine stretches the start-up around it, not the seconds counted), so a hang that needs
# no time to set itself up fails as surely after 5 s as after 15; the compiler hangs whose attack
# unfolds over seconds (a new gcc every 5 s, a 10 s wrapper sleep, an 8 s stall) keep 15 s
SLOW_TO_FAIL = {"hangs": 5.0, "import_hang": 5.0, "orphan_outlives_judge": 5.0, "fake_compiler_hang": 5.0,
               "idle_compiler_hang": 15.0, "drip_compiler_hang": 15.0, "preload_compiler_hang": 15.0,
               "honest_slow_build": 5.0}


def options(tmp_path, name):
    return modes.Options(timeout=SLOW_TO_FAIL.get(name, 120.0), load_timeout=MANIFEST[name].get("load_timeout", 120.0),
                         log_dir=tmp_path / "logs",
                         wall_cap_s=2.0, baseline=False, fail_narrow=MANIFEST[name].get("fail_narrow", False))


def run(name, mode, tmp_path, n_cases=1, path=None):
    smoke = cases.select_cases(MANIFEST.get(name, {}).get("cases", "smoke"))
    smoke = smoke if "cases" in MANIFEST.get(name, {}) else smoke[:n_cases]
    path = path or ADV / f"{name}.py"
    if mode == "test":
        return modes.run_tests(path, smoke, options(tmp_path, name))
    return modes.run_benchmarks(path, smoke, options(tmp_path, name), leaderboard=mode == "leaderboard")


_HONEST: dict = {}


def honest_means(name, tmp_path) -> dict:
    """Case name -> mean ns of the manifest entry's honest submission on its cases (once per session)."""
    entry = MANIFEST[name]
    key = (entry["honest"], entry.get("cases", "smoke"))
    if key not in _HONEST:
        record = run(name, "benchmark", tmp_path / "honest", path=ROOT / entry["honest"])
        assert record.passed, f"{entry['honest']} (honest): {first_reason(record)}"
        _HONEST[key] = {c.spec: c.stats.mean for c in record.cases}
    return _HONEST[key]


def _neighbours() -> int:
    """Other judges' workers that may share this GPU now (none where there is no GPU)."""
    from eval.judge.lifecycle import _live_workers

    return _live_workers(None, same_gpu=True) if HAS_CUDA else 0


def first_reason(record):
    return record.error or next((c.error for c in record.cases if not c.passed), None) or ""


def traces():
    """What a forgery could leave: files in the real results/ and .pth files in site-packages."""
    real = ROOT / "results"
    found = {str(p) for p in real.rglob("*") if not p.name.startswith("sol-")} if real.exists() else set()  # floors: the judge's
    for d in site.getsitepackages() + [site.getusersitepackages()]:
        found |= set(glob.glob(str(Path(d) / "*.pth")))
    return found


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_adversarial_submission(name, tmp_path, capfd, monkeypatch):
    entry = MANIFEST[name]
    if entry.get("gpu_only") and not HAS_CUDA:
        pytest.skip("needs a CUDA GPU")
    for key, value in entry.get("env", {}).items():  # e.g. a small disk quota, so the attack is cheap
        monkeypatch.setenv(key, str(value))
    before = traces()
    expect = entry["expect"]
    neighbours = _neighbours() if expect == "no-faster" else 0
    record = run(name, entry.get("mode", "test"), tmp_path)
    out, err = capfd.readouterr()
    reason = first_reason(record)
    if expect == "fail":
        wanted = [entry["reason"], *entry.get("alt_reasons", [])]
        assert not record.passed, f"{name} passed: {entry['attack']}"
        assert any(w in reason for w in wanted), f"{name}: {reason!r} (wanted one of {wanted})"
    elif expect == "honest-time" and not record.passed:  # caught instead of measured: as good
        wanted = entry.get("alt_reasons", [])
        assert any(w in reason for w in wanted), f"{name}: {reason!r} (wanted an honest time or one of {wanted})"
    elif expect == "honest-time":  # measured: the time it reports is at least what it really took
        for case in record.cases:
            assert case.stats.mean >= entry["min_ms"] * 1e6, f"{name}: reported {case.stats.mean / 1e6:.3f} ms"
    elif expect == "no-faster" and not record.passed:  # caught, naming what it saw
        wanted = entry.get("alt_reasons", [])
        assert any(w in reason for w in wanted), f"{name}: {reason!r} (wanted a time or one of {wanted})"
    elif expect == "no-faster":  # measured: no better than the honest kernel it wraps, beyond noise
        honest = honest_means(name, tmp_path)
        shared = max(neighbours, _neighbours()) or any("shared this GPU" in w for c in record.cases for w in c.warnings)
        if shared:  # other judges' workers on this GPU (adversarial shards side by side): no comparison
            pytest.skip(f"{name}: timed beside other judges' workers on this GPU; a no-faster comparison needs the "
                        "GPU alone (.ci/timing-attack-check measures this class there)")
        for case in record.cases:
            floor = (1 - entry["max_gain"]) * honest[case.spec]
            assert case.stats.mean >= floor, (f"{name}, {case.spec}: {case.stats.mean / 1e3:.2f} us against "
                                              f"{honest[case.spec] / 1e3:.2f} us honest ({entry['honest']})")
    elif not record.passed:  # caught another way that counts as neutralised (alt_reasons)
        wanted = entry.get("alt_reasons", [])
        assert any(w in reason for w in wanted), f"{name} should pass: {reason}"
    assert "check: pass" not in out + err  # nothing printed in the judge's name
    new = traces() - before
    assert not new, f"{name} left {sorted(new)}"


def test_manifest_covers_every_file():
    files = {p.stem for p in ADV.glob("*.py")}
    assert files == set(MANIFEST), (files - set(MANIFEST), set(MANIFEST) - files)
    assert sum(e["expect"] != "pass" for e in MANIFEST.values()) >= 30


def test_crash_does_not_stop_later_cases(tmp_path):
    record = run("exits", "test", tmp_path, n_cases=2)
    assert [c.status for c in record.cases] == ["fail", "fail"]
    assert all("exited with code 3" in c.error for c in record.cases)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_cuda_illegal_address_is_caught_and_the_next_case_runs(tmp_path):
    record = run("illegal_address", "test", tmp_path, n_cases=2)
    assert [c.status for c in record.cases] == ["fail", "fail"]
    assert all("CUDA error" in c.error or "crashed" in c.error for c in record.cases), record.cases


@pytest.fixture(scope="module")
def peeker(tmp_path_factory):
    """One judged run of honest_peeker with POPCORN_SEED set in the judge, for the three tests below
    (each asks something else of the same record)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("POPCORN_SEED", "4242")
        return run("honest_peeker", "test", tmp_path_factory.mktemp("peeker"))


def test_secret_seed_invisible_and_prints_do_not_leak(peeker):
    record = peeker
    assert record.passed, first_reason(record)
    assert report.popcorn(record).count("check: pass") == 1  # the submission's print went to the log


def test_worker_log_holds_the_submission_output(peeker):
    record = peeker
    assert "check: pass" in Path(record.log).read_text()  # printed there, never in the report


def test_sandbox_layers_reported(peeker):
    record = peeker
    layers = record.environment.sandbox
    assert layers.get("no_new_privs") == "on" and "landlock" in layers and "seccomp" in layers
    assert not sys.platform.startswith("linux") or layers["seccomp"] == "on"


def _cli(*args, timeout=300):
    import os
    import subprocess
    import tempfile

    env = {**os.environ, "EVAL_RESULTS_DIR": tempfile.mkdtemp(prefix="nvfp4-cli-")}
    return subprocess.Popen([sys.executable, "-m", "eval", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_judge_survives_a_signal_from_the_worker():
    """signal_parent sends SIGTERM to a parent running `-m eval` (not pytest): the real CLI must live."""
    proc = _cli("test", str(ADV / "signal_parent.py"), "--cases", "smoke")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, (proc.returncode, out[-500:], err[-500:])


def _workers() -> set:
    import os

    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"eval.worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(int(pid))
        except OSError:
            pass
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        pid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if pid <= 1:
            return False
    return False


def test_worker_never_outlives_its_judge():
    import time

    before = _workers()
    proc = _cli("test", str(ADV / "hangs.py"), "--cases", "smoke", "--timeout", "600")
    deadline = time.monotonic() + 120
    while not {p for p in _workers() - before if _descends_from(p, proc.pid)} and time.monotonic() < deadline:
        time.sleep(0.5)
    started = {pid for pid in _workers() - before if _descends_from(pid, proc.pid)}  # this judge's, not another run's
    assert started, "no worker started"
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while (_workers() & started) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not (_workers() & started), "the worker outlived its judge"


def test_narrow_data_passes_with_a_warning_by_default(tmp_path):
    """The leaderboard's verdict on a kernel right only on its own data: pass, and a warning naming
    what full-range data showed (--fail-narrow, as the manifest's narrow entries use, fails it)."""
    path = ADV / "narrow_lut.py"
    record = modes.run_tests(path, cases.select_cases("smoke")[:1],
                             modes.Options(timeout=120.0, load_timeout=120.0, log_dir=tmp_path / "logs",
                                           wall_cap_s=2.0, baseline=False))
    assert record.passed, first_reason(record)
    assert any("correct only on narrow data" in w for c in record.cases for w in c.warnings)
