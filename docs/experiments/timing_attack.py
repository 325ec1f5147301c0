"""Measurement for issue #40 (a script, not a test; .ci/timing-attack-check runs it on the GPU): work a
submission starts off the timed stream (side-stream copies, a side-stream kernel, a graph, a native
thread that launches later) against the honest kernel it wraps, and the honest kernels' own means
(fidelity: what the harness's reordering changed).

    python docs/experiments/timing_attack.py [--rounds 3] [--subs a.py,b.py] [--out DIR] [--old .old]

Every submission is judged with `benchmark` (task.yml's benchmarks, no BF16 baseline, at most --runs
timed runs a case under the leaderboard's stop rule, no host-cost batches) in this process,
`--rounds` times, interleaved (round 1: every submission, then round 2...). The judge's
EVAL_STRADDLE_LOG gives each run's flush span (pre_ns) and the worker's idle-flush reference, so the
table shows the flush excess each submission caused (the allowance in eval/judge/modes.py is set
from these). --old DIR: a tree of the harness before #40 (`git archive 9689c92`), where v5 and
l2_side_copy are judged too (its own `python -m eval`, one process each), to show what the attack
bought before and what the reordering changed for honest kernels. Writes DIR/timing_attack.json and
DIR/straddle/*.jsonl; prints the table last.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

HONEST = "submission/v5.py"
ATTACKS = ["tests/adversarial/l2_side_copy.py", "tests/adversarial/l2_side_kernel.py",
           "tests/adversarial/l2_graph.py", "tests/adversarial/l2_thread_later.py",
           "tests/adversarial/l2_persisting.py"]
HONEST_SUBS = (HONEST, "submission/v4.py")  # these and files named honest_*.py are controls; every other --subs file is judged as an attack


def is_control(sub: str) -> bool:
    return sub in HONEST_SUBS or Path(sub).name.startswith("honest_")


MAX_GAIN = 0.02  # the regression test's bound (tests/adversarial/manifest.yaml, expect no-faster)


def default_subs() -> list[str]:
    subs = [HONEST]
    try:
        import cutlass  # noqa: F401  (v4 is CuTe DSL)
        subs.append("submission/v4.py")
    except Exception:
        print("v4 skipped: `import cutlass` fails here", flush=True)
    return subs + ATTACKS


def judge_here(sub: str, out: Path, tag: str, case_set: str) -> dict:
    from eval import cases
    from eval.judge import modes

    log = out / "straddle" / f"{tag}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    os.environ["EVAL_STRADDLE_LOG"] = str(log)
    options = modes.Options(timeout=float(os.environ.get("TIMING_ATTACK_TIMEOUT_S", 300)), baseline=False,
                            log_dir=out / "logs")
    t0 = time.monotonic()
    record = modes.run_benchmarks(ROOT / sub, cases.select_cases(case_set), options)
    os.environ.pop("EVAL_STRADDLE_LOG", None)
    return {"sub": sub, "harness": "new", "wall_s": time.monotonic() - t0, "error": record.error,
            "cases": [{"spec": c.spec, "passed": c.passed, "error": c.error,
                       "mean_ns": c.stats.mean if c.stats else None, "runs": len(c.samples)} for c in record.cases],
            "straddle": straddle_stats(log)}


OLD_JUDGE = """
import json, sys
from pathlib import Path
from eval import cases
from eval.judge import modes
sub, out, runs, case_set = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
modes.BENCHMARK_BUDGET = {"warmup": (min(runs, 200), 1e8), "case": (runs, 10e9)}
modes.HOST_CALLS = 0
options = modes.Options(timeout=300.0, baseline=False, log_dir=out.parent / "logs")
record = modes.run_benchmarks(Path(sub), cases.select_cases(case_set), options)
out.write_text(json.dumps({"error": record.error, "cases": [
    {"spec": c.spec, "passed": c.passed, "error": c.error, "mean_ns": c.stats.mean if c.stats else None,
     "runs": len(c.samples)} for c in record.cases]}))
"""


def judge_old(old: Path, sub: str, out: Path, tag: str, runs: int, case_set: str) -> dict:
    """The harness before #40, in a process of its own (its eval package), with the same budget."""
    target = old / sub
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / sub, target)
    result = out / "old" / f"{tag}.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "EVAL_RESULTS_DIR": str(out / "old" / "results"),
           "EVAL_WORKER_READ": str((old / HONEST).resolve())}  # the attack files load v5 by path
    env.pop("EVAL_STRADDLE_LOG", None)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", OLD_JUDGE, str(target.resolve()), str(result), str(runs), case_set], cwd=old,
                          env=env, capture_output=True, text=True, timeout=400)
    (out / "old" / f"{tag}.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    try:
        record = json.loads(result.read_text())
    except (OSError, ValueError):
        return {"sub": sub, "harness": "old", "wall_s": time.monotonic() - t0,
                "error": f"rc={proc.returncode}: {proc.stderr[-300:]}", "cases": [], "straddle": {}}
    return {"sub": sub, "harness": "old", "wall_s": time.monotonic() - t0, "error": record.get("error"),
            "cases": record["cases"], "straddle": {}}


def straddle_stats(log: Path) -> dict:
    """Each run's flush span less the idle reference (us): median, p95, max, and runs over the allowance."""
    from eval.judge import modes

    excess, counted, ref = [], 0, -1.0
    if log.exists():
        for line in log.read_text().splitlines():
            reply = json.loads(line)
            ref = reply["ref_ns"]
            for pre in reply["pre_ns"]:
                if pre >= 0 and ref > 0:
                    excess.append((pre - ref) / 1e3)
                    counted += modes.straddle_excess({"pre_ns": pre}, ref) > 0
    if not excess:
        return {}
    excess.sort()
    return {"ref_us": ref / 1e3, "runs": len(excess), "median_us": statistics.median(excess),
            "p95_us": excess[int(0.95 * (len(excess) - 1))], "max_us": excess[-1], "min_us": excess[0],
            "over_allowance": counted}


def summarize(results: list[dict]) -> tuple[str, dict]:
    by: dict = {}
    for r in results:
        key = (r["harness"], r["sub"])
        for c in r["cases"]:
            by.setdefault(key, {}).setdefault(c["spec"], []).append(c)
        by.setdefault(key, {})
    specs = sorted({c["spec"] for r in results for c in r["cases"]}, key=lambda s: [x["spec"] for r in results
                                                                                   for x in r["cases"]].index(s))
    means = {k: {s: [c["mean_ns"] for c in v.get(s, []) if c["mean_ns"] and c["passed"]] for s in specs}
             for k, v in by.items()}
    lines = ["", "== #40 timing attack check: mean of the rounds' case means (us); ratio = attack / honest v5 "
                 "of the same harness; verdict: attack no faster than (1 - %.2f) x honest, or caught" % MAX_GAIN]
    short = ["x".join(part.split(": ")[1] for part in s.split("; ")[:3]) for s in specs]  # "m: 7168; k: ..." -> 7168x...
    lines.append(f"{'harness':7} {'submission':34} " + " ".join(f"{s[:22]:>22}" for s in short) + "  verdict")
    verdicts = {}
    for (harness, sub), per in sorted(by.items(), key=lambda kv: (kv[0][0] != "new", kv[0][1] != HONEST, kv[0][1])):
        honest = means.get((harness, HONEST), {})
        cells, leak, caught = [], False, []
        for s in specs:
            xs = means[(harness, sub)].get(s) or []
            fails = [c["error"] for c in per.get(s, []) if not c["passed"]]
            caught += fails
            if not xs:
                cells.append(f"{'fail':>22}")
                continue
            m = statistics.mean(xs)
            spread = (max(xs) - min(xs)) / m * 100 if len(xs) > 1 else 0.0
            h = honest.get(s)
            ratio = m / statistics.mean(h) if h else float("nan")
            if not is_control(sub) and h and ratio < 1 - MAX_GAIN:
                leak = True
            cells.append(f"{m / 1e3:8.2f} ±{spread:3.1f}% x{ratio:5.3f}")
        errors = [r["error"] for r in results if (r["harness"], r["sub"]) == (harness, sub) and r["error"]]
        if not is_control(sub):
            verdict = "LEAK (faster than honest)" if leak else ("caught: " + (caught + errors)[0][:60] if caught or errors
                                                                 else "ok (no faster)")
        else:
            verdict = "FAIL: " + (caught + errors)[0][:60] if caught or errors else "honest"
        verdicts[f"{harness}:{sub}"] = verdict
        lines.append(f"{harness:7} {Path(sub).stem:34} " + " ".join(cells) + "  " + verdict)
    lines.append("")
    lines.append("flush excess per run (us, the run's flush span less the idle reference), new harness:")
    for r in results:
        st = r.get("straddle") or {}
        if st:
            lines.append(f"  {Path(r['sub']).stem:20} ref {st['ref_us']:7.2f}  median {st['median_us']:6.2f}  "
                         f"p95 {st['p95_us']:6.2f}  max {st['max_us']:7.2f}  min {st['min_us']:6.2f}  "
                         f"over allowance {st['over_allowance']}/{st['runs']}")
    v5 = means.get(("new", HONEST), {})
    lines.append("")
    lines.append("our v5 means (new harness, us; compare with ../shared/official-check's eval.py): " +
                 " / ".join(f"{statistics.mean(v5[s]) / 1e3:.2f}" if v5.get(s) else "fail" for s in specs))
    old5 = means.get(("old", HONEST), {})
    if old5:
        lines.append("v5 new / old harness per case: " + " / ".join(
            f"{statistics.mean(v5[s]) / statistics.mean(old5[s]):.4f}" if v5.get(s) and old5.get(s) else "n/a"
            for s in specs))
    return "\n".join(lines), verdicts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--subs", default=None, help="comma-separated submission paths (default: v5, v4, the attacks)")
    ap.add_argument("--old", type=Path, default=None, help="the harness before #40 (git archive 9689c92)")
    ap.add_argument("--old-subs", default=f"{HONEST},{ATTACKS[0]}")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("BUDGET_S", 1e9)),
                    help="stop starting new judgements past this many seconds")
    ap.add_argument("--runs", type=int, default=100,
                    help="most timed runs per case (benchmark's own: 200; 100 as pmpp_v2's eval.py), the same stop rule")
    ap.add_argument("--cases", default="benchmarks", help="the case set (a smoke run of the script: smoke)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from eval.judge import modes

    # shorter judgements so that 3 rounds fit one call: fewer runs per case, no host-cost batches
    modes.BENCHMARK_BUDGET = {"warmup": (min(a.runs, 200), 1e8), "case": (a.runs, 10e9)}
    modes.HOST_CALLS = 0
    subs = a.subs.split(",") if a.subs else default_subs()
    old_subs = a.old_subs.split(",") if a.old and (a.old / "eval").is_dir() else []
    results: list[dict] = []
    t0 = time.monotonic()
    for rnd in range(1, a.rounds + 1):
        for sub in subs + [f"old:{s}" for s in old_subs]:
            if time.monotonic() - t0 > a.budget_s:
                print(f"budget: skipping {sub} round {rnd}", flush=True)
                continue
            tag = f"{Path(sub.removeprefix('old:')).stem}-r{rnd}"
            if sub.startswith("old:"):
                r = judge_old(a.old.resolve(), sub.removeprefix("old:"), a.out, tag, a.runs, a.cases)
            else:
                r = judge_here(sub, a.out, tag, a.cases)
            results.append(r)
            means = ", ".join(f"{c['mean_ns'] / 1e3:.2f}" if c["mean_ns"] else "fail" for c in r["cases"])
            print(f"[{time.monotonic() - t0:6.1f}s] round {rnd} {r['harness']} {sub}: {means} "
                  f"({r['wall_s']:.1f}s){' error: ' + str(r['error'])[:200] if r['error'] else ''}"
                  f"{'; ' + '; '.join(str(c['error'])[:200] for c in r['cases'] if c['error'])}", flush=True)
            (a.out / "timing_attack.json").write_text(json.dumps(results, indent=1))
    table, verdicts = summarize(results)
    (a.out / "timing_attack.txt").write_text(table + "\n")
    print(table)
    bad = [k for k, v in verdicts.items() if k.startswith("new:") and (v.startswith("LEAK") or v.startswith("FAIL"))]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
