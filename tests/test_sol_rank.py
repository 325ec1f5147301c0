"""Speed-of-light annotation, the faster-than-floor flag, ranking order and the chart."""
import json

from eval import rank, sol


def bench_record(mean_ns, gpu="NVIDIA H100 80GB HBM3"):
    return {"environment": {"gpu": gpu, "cuda_available": True},
            "cases": [{"status": "pass", "args": {"m": 7168, "k": 16384, "l": 1, "seed": 1},
                       "stats": {"mean": mean_ns, "err": 10.0, "median": mean_ns}}]}


def test_annotate_percent_of_sol_and_floor(results_dir):
    floors = {"floors": {"7168x16384x1": {"median_ns": 28500.0}}}
    sol.cache_path("NVIDIA H100 80GB HBM3").write_text(json.dumps(floors))
    record = bench_record(31350.0)
    sol.annotate(record)
    s = record["cases"][0]["sol"]
    assert abs(s["x_floor"] - 1.1) < 1e-9 and "flag" not in s
    assert abs(s["pct_datasheet"] - 100 * (s["bytes"] / 3.35e3) / 31350.0) < 1e-9
    fast = bench_record(20000.0)
    sol.annotate(fast)
    assert fast["cases"][0]["sol"]["flag"] == sol.FASTER_THAN_FLOOR


def test_b200_sol_column():
    record = bench_record(17244.0, gpu="NVIDIA B200")
    sol.annotate(record)
    assert abs(record["cases"][0]["sol"]["x_b200_sol"] - 2.0) < 1e-9


def test_rank_markdown_order_and_chart(tmp_path):
    def row(name, mean):
        case = {"stats": {"mean": mean}, "sol": {"x_floor": mean / 1000, "floor_ns": 1000}}
        return {"name": name, "geomean_ns": mean, "cases": [case], "speedup": None}
    ranked = sorted([row("slow", 5000.0), row("fast", 1200.0)], key=lambda r: r["geomean_ns"])
    md = rank.markdown(ranked, [{"name": "broken", "reason": "test failed: x"}], ["case"], "GPU")
    lines = [l for l in md.splitlines() if l.startswith("| ")]
    assert "fast" in lines[1] and "slow" in lines[2] and "skipped: test failed" in lines[3]
    png = rank.chart_png(ranked, ["case"], tmp_path / "chart.png")
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def saved_result(path, means_by_spec, spread=0.01, n=60, seed=0):
    import random

    from eval import results

    rng = random.Random(seed)
    cases = [{"spec": spec, "status": "pass", "samples": [mean * (1 + rng.gauss(0, spread)) for _ in range(n)]}
             for spec, mean in means_by_spec.items()]
    record = {"schema": results.SCHEMA_VERSION, "mode": "benchmark", "submission": str(path), "environment": {},
              "cases": cases}
    path.write_text(json.dumps(record))
    return path


def test_compare_two_saved_results_and_regression_gate(tmp_path):
    """compare A.json B.json: verdicts per case and for the geomean; --fail-if-slower exits 1."""
    import subprocess
    import sys

    from eval import cases
    from tests.conftest import ROOT

    specs = [c.spec for c in cases.select_cases("benchmarks")]
    a = saved_result(tmp_path / "a.json", {s: 1000.0 for s in specs}, seed=1)
    same = saved_result(tmp_path / "same.json", {s: 1000.0 for s in specs}, seed=2)
    slow = saved_result(tmp_path / "slow.json", {s: 1100.0 for s in specs}, seed=3)

    def compare(x, y, *extra):
        return subprocess.run([sys.executable, "-m", "eval", "compare", str(x), str(y), *extra], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    out = compare(a, same)
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1].endswith("same"), out.stdout
    out = compare(a, slow, "--fail-if-slower", "5")
    assert out.returncode == 1 and "slower" in out.stdout.splitlines()[-1] and "regression" in out.stderr
    assert compare(a, slow, "--fail-if-slower", "20").returncode == 0
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    out = compare(a, bad)
    assert out.returncode == 2 and "not a result file" in out.stderr
