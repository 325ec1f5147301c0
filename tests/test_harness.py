"""The harness end to end on the CPU: CLI, exit codes, records, formats, isolation."""
import json
import os
import subprocess
import sys
import tempfile

import pytest

from eval import cases, report, results
from eval.judge import modes
from tests.conftest import HAS_CUDA, ROOT

TORCH_REF = ROOT / "submission" / "torch_ref.py"


SCRATCH_RESULTS = tempfile.mkdtemp(prefix="nvfp4-results-")  # CLI runs never write the real results/


def cli(*args, env=None, timeout=300):
    full_env = {**os.environ, "EVAL_RESULTS_DIR": SCRATCH_RESULTS, **(env or {})}
    return subprocess.run([sys.executable, "-m", "eval", *args], cwd=ROOT, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


# usage and input errors end before any worker starts: the command line in this process (inproc,
# tests/conftest.py: eval/cli.py cli, what `python -m eval` runs), not an interpreter and torch import each

def test_cli_help_lists_modes(inproc):
    code, out, _ = inproc("--help")
    assert code == 0
    for mode in ("test", "benchmark", "leaderboard", "profile", "sol", "compare", "rank", "accuracy"):
        assert mode in out


@pytest.mark.parametrize("args,needle", [
    (("frobnicate",), "No such command"),
    (("test", "missing.py"), "does not exist"),
    (("test", str(TORCH_REF), "--cases", "nope"), "unknown case set 'nope'"),
    (("test", str(TORCH_REF), "--timing", "slow"), "Invalid value"),
])
def test_cli_usage_errors_exit_2(args, needle, inproc):
    code, _, err = inproc(*args)
    assert code == 2 and needle in err
    assert "Traceback" not in err


def test_malformed_task_file_exits_2(tmp_path, inproc):
    bad = tmp_path / "task.yml"
    bad.write_text("tests: [ {m: 128\n")
    code, _, err = inproc("test", str(TORCH_REF), env={"EVAL_TASK_FILE": str(bad)})
    assert code == 2 and "not valid YAML" in err and "Traceback" not in err


def test_invalid_shape_in_shapes_file_exits_2(tmp_path, inproc):
    bad = tmp_path / "shapes.yaml"
    bad.write_text("sets:\n  odd:\n    - {m: 100, k: 256, l: 1, seed: 1}\n")
    code, _, err = inproc("test", str(TORCH_REF), "--cases", "odd", env={"EVAL_SHAPES_FILE": str(bad)})
    assert code == 2 and "multiple of 128" in err


def test_cli_test_pass_and_fail_exit_codes():
    assert cli("test", str(TORCH_REF), "--cases", "smoke", "--format", "popcorn").returncode == 0
    bad = cli("test", str(ROOT / "tests" / "adversarial" / "raises.py"), "--cases", "smoke", "--format", "popcorn")
    assert bad.returncode == 112 and "test.0.status: fail" in bad.stdout and "check: fail" in bad.stdout


def test_benchmark_record_schema_and_formats(results_dir):
    # a few timed runs a case (what `run` times on a CPU: eval/cli.py CPU_BUDGET), not as many as fit
    # in the wall cap: the record's schema and its formats are the same for 5 runs as for 500
    options = modes.Options(log_dir=results_dir / "logs", wall_cap_s=5, budget={"warmup": (2, 1e8), "case": (5, 1e9)})
    record = modes.run_benchmarks(TORCH_REF, cases.select_cases("smoke"), options)
    assert record.passed and record.geomean_ns > 0, record.error or [c.error for c in record.cases]
    assert record.environment.timer == ("cuda-events" if HAS_CUDA else "host-clock (no CUDA)")
    for case in record.cases:
        assert case.stats.runs >= 3 and case.stats.mean > 0 and case.stats.median > 0
        assert len(case.samples) == case.stats.runs and case.host_us > 0
    path = results.write_new(record.to_json(), "x")
    again = results.write_new(record.to_json(), "x")
    assert path != again and path.exists() and again.exists()  # never overwritten
    saved = results.load_record(path)
    assert saved.cases[0].spec == record.cases[0].spec and saved.cases[0].stats == record.cases[0].stats
    assert json.loads(path.read_text())["cases"][0]["stats"]["mean"] == record.cases[0].stats.mean
    lines = report.popcorn(record).splitlines()
    assert lines[0] == "benchmark-count: 2" and lines[1].startswith("benchmark.0.spec: m: 128")
    assert "benchmark.0.mean: " in "\n".join(lines) and lines[-1] == "check: pass"
    assert ("HOST TIMER" in report.table(record)) != HAS_CUDA and "| case |" in report.markdown(record)
    json.loads(report.render(record, "json"))


def test_load_record_rejects_foreign_json(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a result file"):
        results.load_record(other)


def test_make_eval_path_on_cpu(results_dir, tmp_path):
    """What `make eval SUB=submission/torch_ref.py ARGS="--cases smoke"` runs: test, then benchmark; -o
    holds both halves; without CUDA the host-timer notice and the reduced budget stand whatever
    --cases picks (at most 5 timed runs a case, not the leaderboard's hundreds)."""
    report = tmp_path / "run.txt"
    out = cli("run", str(TORCH_REF), "--cases", "smoke", "--format", "popcorn", "-o", str(report), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "check: pass" in out.stdout and "benchmark.1.mean" in out.stdout
    written = report.read_text()
    assert "test.0.status: pass" in written and "benchmark.1.mean" in written, written
    if not HAS_CUDA:
        assert "no CUDA GPU: every time below is a CPU host-timer number" in out.stderr
        assert "--cases smoke, at most 5 timed runs per case" in out.stderr
        runs = [int(line.split(": ", 1)[1]) for line in out.stdout.splitlines()
                if line.startswith("benchmark.") and line.split(": ")[0].endswith(".runs")]
        assert len(runs) == 2 and max(runs) <= 5, runs


def test_default_submission_is_best_runnable_here():
    from eval.submissions import best_runnable, needs

    assert best_runnable().name == ("v5.py" if HAS_CUDA else "torch_ref.py")
    assert needs(ROOT / "submission" / "v5.py") == {"cuda"}
    assert needs(ROOT / "submission" / "triton_ref.py") == {"cuda", "triton"}


def test_run_measures_floors_when_none_cached(monkeypatch, results_dir):
    """make eval on a GPU with no cached floors measures them before benchmarking."""
    from click.testing import CliRunner

    from eval import baselines, cli, sol

    from eval.records import Environment, RunRecord

    env = Environment(gpu="Fake GPU", cuda_available=True)
    calls = []
    monkeypatch.setattr(cli.modes, "run_tests", lambda *a, **k: RunRecord(mode="test", submission="x", passed=True,
                                                                          environment=env))
    monkeypatch.setattr(baselines, "measure_floors", lambda cases, options: calls.append(len(cases)) or (env, {}))
    monkeypatch.setattr(sol, "save_floors", lambda env, measured: None)
    monkeypatch.setattr(cli, "_benchmark", lambda *a, **k: RunRecord(mode="benchmark", submission="x", passed=True))
    result = CliRunner().invoke(cli.main, ["run", str(TORCH_REF)])
    assert result.exit_code == 0, result.output
    assert calls == [3]
    sol.cache_path("Fake GPU").write_text('{"floors": {"7168x16384x1": {"median_ns": 1.0}}}')
    calls.clear()
    assert CliRunner().invoke(cli.main, ["run", str(TORCH_REF)]).exit_code == 0
    assert calls == [2]  # only the two shapes without a cached floor
    sol.cache_path("Fake GPU").write_text('{"floors": {"7168x16384x1": {}, "4096x7168x8": {}, "7168x2048x4": {}}}')
    calls.clear()
    assert CliRunner().invoke(cli.main, ["run", str(TORCH_REF)]).exit_code == 0
    assert calls == []


def test_tune_times_and_judges_every_configuration(tmp_path, results_dir):
    """tune asks the worker for CONFIGS (never imports the submission here), runs each one through the
    judged loop, and lists a configuration that does not fit with its reason."""
    sub = tmp_path / "tunable.py"
    sub.write_text(
        "import importlib.util\n"
        f"_s = importlib.util.spec_from_file_location('_h', {str(TORCH_REF)!r})\n"
        "_h = importlib.util.module_from_spec(_s)\n_s.loader.exec_module(_h)\n"
        "CONFIGS = [(1,), (2,), (3,)]\ncustom_kernel = _h.custom_kernel\n"
        "def run_with(data, config):\n"
        "    if tuple(config) == (3,):\n        raise RuntimeError('config 3 does not fit')\n"
        "    if tuple(config) == (2,):\n        return data[-1]  # wrong: the pre-filled c\n"
        "    return _h.custom_kernel(data)\n")
    from eval import tune

    result = tune.tune(sub, cases.select_cases("smoke")[:1], modes.Options(log_dir=results_dir / "logs"), runs=3)
    text, lines = result.text, result.text.splitlines()
    assert result.ok and lines[0] == "== 128x256x1" and lines[-1].strip().startswith("[1]"), text
    assert "skip: raised RuntimeError: config 3 does not fit" in text and "WRONG" in text and "pre-filled c" in text
    assert result.best == {(128, 256, 1): (1,)} and result.device_key is None  # no device_key(): row not keyed


def test_tune_writes_the_device_row(tmp_path):
    """--write replaces this device's row in the submission's TUNED literal, keeps other devices'
    rows and the shapes it did not tune, and leaves the rest of the file as it was."""
    from eval import tune

    sub = tmp_path / "tunable.py"
    sub.write_text("import torch\n# per device\nTUNED = {\n    ('GPU A', 10, 100, 4): {(1, 2, 3): (9,)},\n"
                   "    ('GPU B', 20, 200, 8): {(1, 2, 3): (8,), (4, 5, 6): (7,)},\n}\nCONFIGS = [(1,)]\n")
    tune.write_row(sub, tune.TuneResult("", True, ("GPU B", 20, 200, 8), {(1, 2, 3): (2, 1)}))
    tune.write_row(sub, tune.TuneResult("", True, ("GPU C", 30, 300, 16), {(1, 2, 3): (3,)}))
    tune.write_row(sub, tune.TuneResult("", True, ("GPU A", 10, 101, 4), {(4, 5, 6): (6,)}))  # same GPU, new bandwidth
    namespace: dict = {}
    exec(sub.read_text().replace("import torch\n", ""), namespace)
    assert namespace["TUNED"] == {("GPU B", 20, 200, 8): {(1, 2, 3): (2, 1), (4, 5, 6): (7,)},
                                  ("GPU C", 30, 300, 16): {(1, 2, 3): (3,)},
                                  ("GPU A", 10, 101, 4): {(1, 2, 3): (9,), (4, 5, 6): (6,)}}
    assert sub.read_text().startswith("import torch\n# per device\nTUNED = {") and namespace["CONFIGS"] == [(1,)]
    with pytest.raises(tune.TableError, match="device_key"):
        tune.write_row(sub, tune.TuneResult("", True, None, {(1, 2, 3): (1,)}))
    (tmp_path / "flat.py").write_text("TUNED = dict(a=1)\n")
    with pytest.raises(tune.TableError, match="no `TUNED"):
        tune.write_row(tmp_path / "flat.py", tune.TuneResult("", True, ("G", 1, 1, 1), {(1,): (1,)}))


def test_batched_timing_judges_every_output(results_dir):
    """--timing batched: an honest kernel passes (the host-cost calls are checked against the first
    input, which they use); a kernel that caches by pointer is caught before timing."""
    options = modes.Options(log_dir=results_dir / "logs", wall_cap_s=2, method="batched", batch=3,
                            baseline=False)
    smoke = cases.select_cases("smoke")[:1]
    honest = modes.run_benchmarks(TORCH_REF, smoke, options)
    assert honest.passed, honest.error or [c.error for c in honest.cases]
    cheat = modes.run_benchmarks(ROOT / "tests" / "adversarial" / "cache_by_pointer.py", smoke, options)
    # caught by the per-case correctness calls before timing (which step first sees the stale result
    # depends on the buffers the allocator hands out)
    caught = cheat.cases[0]
    assert not cheat.passed and "mismatch" in caught.error and not caught.samples, caught.error


def test_the_record_says_how_long_the_import_took(tmp_path):
    opts = modes.Options(timeout=120.0, load_timeout=120.0, log_dir=tmp_path / "logs", wall_cap_s=2.0, baseline=False)
    smoke = cases.select_cases("smoke")[:1]
    honest = modes.run_tests(ROOT / "submission" / "torch_ref.py", smoke, opts)
    assert honest.passed and honest.import_s is not None and honest.import_s >= 0
    assert f"import (builds included): {honest.import_s:.1f} s" in report.timer_note(honest)
    broken = tmp_path / "broken.py"
    broken.write_text("import time\ntime.sleep(0.5)\nraise ImportError('cannot build for this GPU')\n")
    failed = modes.run_tests(broken, smoke, opts)
    assert failed.error and "cannot build for this GPU" in failed.error
    assert failed.import_s is not None and failed.import_s >= 0.5


@pytest.mark.skipif(HAS_CUDA, reason="v5 cannot run without CUDA: the short path of `run`")
def test_run_in_json_prints_one_list_as_its_o_file(tmp_path):
    """`run --format json`: stdout parses as JSON, the same list of records as -o (here the test half
    only: v5 cannot run without CUDA, exit 113)."""
    report = tmp_path / "run.json"
    out = cli("run", str(ROOT / "submission" / "v5.py"), "--format", "json", "-o", str(report), timeout=300)
    assert out.returncode == 113, out.stderr[-2000:]
    printed = json.loads(out.stdout)
    assert printed == json.loads(report.read_text()) and [r["mode"] for r in printed] == ["test"]
    assert printed[0]["cannot_run"] == "a CUDA GPU"


def test_an_output_may_span_what_the_reference_returns_and_no_more(monkeypatch):
    """The worker refuses an output tensor spanning more than the request's max_span: 1 GiB, or
    SNAPSHOT_SLACK times the reference's own output where that is larger (amd/mla-decode returns its
    1.2 GiB KV cache); both the trial and the timed runs ask for it, and it is echoed back."""
    from eval.judge import runner

    args = cases.select_cases("smoke")[0].args
    small = runner.case_profile(args)
    assert runner.max_span(args) == 1 << 30
    assert runner.runs_params(args, modes.Options(), (10, 1e9), False)["max_span"] == 1 << 30
    big = runner.CaseProfile(small.items, small.reference_writes, 3 << 29, small.outputs)
    monkeypatch.setattr(runner, "case_profile", lambda a: big)
    assert runner.max_span(args) == runner.SNAPSHOT_SLACK * (3 << 29)
    assert runner.reply_limit("trial", {"args": args, "params": {"steps": [{}, {}]}}) >= 2 * runner.max_span(args)


def test_a_baseline_run_asks_no_profile_of_a_case_it_does_not_have():
    """The floors' and baselines' runs (check=False, args {"seed": 0}) ask for the default max_span
    without calling the problem's generate_input (which needs the case's sizes)."""
    from eval.judge import runner

    assert runner.runs_params({"seed": 0}, modes.Options(), (10, 1e9), False, check=False)["max_span"] == 1 << 30
