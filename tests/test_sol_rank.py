"""Speed-of-light annotation, faster than memory allows as a failure, ranking order and the chart."""
import json

from eval import rank, sol
from eval.judge import modes
from eval.records import CaseResult, Environment, RunRecord, Sol
from eval.stats import calculate_stats

ARGS = {"m": 7168, "k": 16384, "l": 1, "seed": 1}


def bench_record(mean_ns, gpu="NVIDIA H100 80GB HBM3"):
    case = CaseResult(spec="s", label="7168x16384x1", args=dict(ARGS), stats=calculate_stats([mean_ns] * 3))
    return RunRecord(mode="benchmark", submission="x.py", environment=Environment(gpu=gpu, cuda_available=True),
                     cases=[case])


def test_annotate_percent_of_sol_and_floor(results_dir):
    floors = {"floors": {"7168x16384x1": {"median_ns": 28500.0}}}
    sol.cache_path("NVIDIA H100 80GB HBM3").write_text(json.dumps(floors))
    record = bench_record(31350.0)
    sol.annotate(record)
    s = record.cases[0].sol
    assert abs(s.x_floor - 1.1) < 1e-9
    assert abs(s.pct_datasheet - 100 * (s.bytes / 3.35e3) / 31350.0) < 1e-9


def test_faster_than_memory_allows_fails_the_case():
    floors = {"7168x16384x1": {"median_ns": 28500.0}}
    slow_enough = bench_record(0.91 * 28500.0).cases[0]
    modes._check_floor(slow_enough, floors)
    assert slow_enough.passed
    fast = bench_record(0.89 * 28500.0).cases[0]
    modes._check_floor(fast, floors)
    assert not fast.passed and "faster than memory allows" in fast.error
    unknown = bench_record(1000.0).cases[0]
    modes._check_floor(unknown, {})  # no floor measured on this GPU: nothing to judge by
    assert unknown.passed


def test_batched_timing_skips_the_floor_where_the_data_fits_in_l2():
    """--timing batched leaves a case's bytes in L2 between calls: an honest kernel on a case smaller
    than L2 beats the DRAM floor (v5 on the H200: 11.80 µs against 13.34 on 7168x2048x4, 33 MB in a
    60 MB L2), so the floor judges only cases larger than L2 there."""
    floors = {"7168x16384x1": {"median_ns": 28500.0}}
    fast = bench_record(0.5 * 28500.0).cases[0]  # 7168x16384x1 moves 66 MB
    modes._check_floor(fast, floors, resident_l2_bytes=128 * 2**20)
    assert fast.passed
    modes._check_floor(fast, floors, resident_l2_bytes=50 * 2**20)
    assert not fast.passed and "faster than memory allows" in fast.error


def test_b200_sol_column():
    record = bench_record(17244.0, gpu="NVIDIA B200")
    sol.annotate(record)
    assert abs(record.cases[0].sol.x_b200_sol - 2.0) < 1e-9


def test_rank_markdown_order_and_chart(tmp_path):
    def row(name, mean):
        case = CaseResult(spec="s", label="case", args={}, stats=calculate_stats([mean] * 3),
                          sol=Sol(x_floor=mean / 1000, floor_ns=1000))
        return rank.Row(name=name, path=name, geomean_ns=mean, cases=[case])
    ranked = sorted([row("slow", 5000.0), row("fast", 1200.0)], key=lambda r: r.geomean_ns)
    md = rank.markdown(ranked, [rank.Row(name="broken", path="b", reason="test failed: x")], ["case"], "GPU")
    lines = [l for l in md.splitlines() if l.startswith("| ")]
    assert "fast" in lines[1] and "slow" in lines[2] and "skipped: test failed" in lines[3]
    png = rank.chart_png(ranked, ["case"], tmp_path / "chart.png")
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def saved_result(path, means_by_spec, spread=0.01, n=60, seed=0):
    import random

    from eval.records import SCHEMA_VERSION

    rng = random.Random(seed)
    cases = [{"spec": spec, "label": spec, "args": {}, "status": "pass", "samples": [mean * (1 + rng.gauss(0, spread)) for _ in range(n)]}
             for spec, mean in means_by_spec.items()]
    record = {"schema": SCHEMA_VERSION, "mode": "benchmark", "submission": str(path), "environment": {},
              "cases": cases}
    path.write_text(json.dumps(record))
    return path


def test_compare_two_saved_results_and_regression_gate(tmp_path, inproc):
    """compare A.json B.json: verdicts per case and for the geomean; --fail-if-slower exits 1."""
    import subprocess
    import sys

    from eval import cases
    from tests.conftest import ROOT

    specs = [c.spec for c in cases.select_cases("benchmarks")]
    a = saved_result(tmp_path / "a.json", {s: 1000.0 for s in specs}, seed=1)
    same = saved_result(tmp_path / "same.json", {s: 1000.0 for s in specs}, seed=2)
    slow = saved_result(tmp_path / "slow.json", {s: 1100.0 for s in specs}, seed=3)

    def compare(x, y, *extra, env=None, pass_fds=()):
        return subprocess.run([sys.executable, "-m", "eval", "compare", str(x), str(y), *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, env=env, pass_fds=pass_fds)

    import os

    read, write = os.pipe()
    out = compare(a, same, env={**os.environ, "POPCORN_FD": str(write)}, pass_fds=(write,))
    os.close(write)
    with os.fdopen(read) as fd:
        popcorn = fd.read()
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1].endswith("same"), out.stdout
    assert "compare-count: 3" in popcorn and "geomean.verdict: same" in popcorn, popcorn  # POPCORN_FD as for test
    # the rest in this process (inproc, tests/conftest.py): saved results only, no worker, no POPCORN_FD
    code, stdout, stderr = inproc("compare", str(a), str(slow), "--fail-if-slower", "5")
    assert code == 1 and "slower" in stdout.splitlines()[-1] and "regression" in stderr
    assert inproc("compare", str(a), str(slow), "--fail-if-slower", "20")[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, _, stderr = inproc("compare", str(a), str(bad))
    assert code == 2 and "not a result file" in stderr


def test_the_baseline_is_timed_once_per_gpu_and_then_read_back(results_dir, monkeypatch):
    """A batch of candidates does not time the same library kernel for each: the first record times
    it and keeps it in results/baseline-<gpu>.json, the next reads it back (another GPU, another
    timing method: timed again)."""
    from eval import baselines
    from eval.cases import select_cases
    from eval.judge import modes
    from eval.records import CaseResult

    timed = []

    class Runner:
        def __init__(self, submission, options):
            pass

        def close(self):
            pass

    def fake_time(runner, baseline, options, runs):
        timed.append(baseline["args"])
        return [10.0, 20.0, 30.0]

    monkeypatch.setattr(baselines, "Runner", Runner)  # where baseline_for_cases looks it up
    monkeypatch.setattr(baselines, "_time", fake_time)
    case = select_cases("smoke")[0]

    def results():
        return [CaseResult(case.spec, case.label, case.args)]

    options = modes.Options()
    first = results()
    baselines.baseline_for_cases(first, options, "NVIDIA H100 80GB HBM3")
    assert first[0].baseline["median_ns"] == 20.0 and len(timed) == 1
    again = results()
    baselines.baseline_for_cases(again, options, "NVIDIA H100 80GB HBM3")
    assert again[0].baseline == first[0].baseline and len(timed) == 1  # read back, not timed
    baselines.baseline_for_cases(results(), options, "NVIDIA H200")
    baselines.baseline_for_cases(results(), modes.Options(method="batched", batch=20), "NVIDIA H100 80GB HBM3")
    assert len(timed) == 3


def test_rank_as_json_lists_the_ranked_then_the_failed():
    """`rank --format json`: the standings as data, the same rows as the table."""
    import json

    from eval import rank
    from eval.records import CaseResult
    from eval.stats import Stats

    fast = rank.Row(name="v5", path="submission/v5.py", gpu="G", geomean_ns=20e3, speedup=9.0,
                    cases=[CaseResult(spec="s", label="7168x16384x1", args={},
                                      stats=Stats(runs=3, mean=20e3, std=1.0, err=0.5, best=19e3, worst=21e3,
                                                  median=20e3))])
    bad = rank.Row(name="raises", path="x.py", reason="test failed: raised")
    rows = json.loads(rank.as_json(rank.Ranking(rows=[fast, bad], ranked=[fast], failed=[bad], text="")))
    assert [r["rank"] for r in rows] == [1, None] and rows[1]["reason"] == "test failed: raised"
    assert rows[0]["cases"] == [{"case": "7168x16384x1", "passed": True, "mean_ns": 20e3}]


def test_a_failing_submission_in_rank_names_its_log(tmp_path, monkeypatch):
    """rank's skipped row says where the traceback is, as every failure does."""
    from pathlib import Path

    from eval import rank
    from eval.judge import modes
    from eval.records import CaseResult, RunRecord

    log = tmp_path / "worker.log"
    log.write_text("Traceback ...\n")
    failed = RunRecord(mode="test", submission="x.py", passed=False, log=str(log),
                       cases=[CaseResult(spec="s", label="128x256x1", args={}).fail("raised RuntimeError: boom")])
    monkeypatch.setattr(modes, "run_tests", lambda *a, **k: failed)
    row = rank._evaluate(Path("x.py"), [], [], None)
    assert row.reason.startswith("test failed: 128x256x1: raised RuntimeError: boom") and f"(log: {log})" in row.reason
