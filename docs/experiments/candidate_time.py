"""Measurement for issue #39 (a script, not a test): where a warm candidate's `benchmark` time goes,
inside the judge, request by request.

    python docs/experiments/candidate_time.py [--sub submission/v5.py] [--runs 2] [--prof FILE]
        [--mode benchmark] [--problem DIR]

Judges SUB with MODE (default benchmark) through eval.api once uncounted (a build, this GPU's
floors), then RUNS times (--runs 0: the first only, its requests printed as they end), and prints
for the last one:
  - every request to the worker (op, case, the judge's own seconds since the previous reply, the
    request's seconds, timed runs in the reply, seconds per run), so that the timing's cost splits
    into the worker's runs and the judge's checks around them;
  - the judge's own seconds per function of eval/ (cProfile, cumulative, the top 30), where the
    waits on the worker show as channel reads.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from eval import api  # noqa: E402
from eval.judge import runner as runner_module  # noqa: E402

CALLS: list[dict] = []
LIVE: list[bool] = []
LAST: list[float] = []


def show(c: dict) -> None:
    per = f"{1e3 * c['seconds'] / c['runs']:.2f}" if c["runs"] else "-"
    print(f"{c['op']:<10} {c['case'][:28]:<28} {c['before']:>8.3f} {c['seconds']:>7.3f} {c['runs']:>5} {per:>7} "
          f"{c['host_calls']}", flush=True)
    if c.get("phases"):  # a trial's parts in the worker (seconds, summed over its steps), and its reply's size
        parts = " ".join(f"{k} {v:.3f}" for k, v in c["phases"].items())
        print(f"           worker: {parts}; reply {c['blob'] >> 20} MiB", flush=True)


def watch_calls() -> None:
    call = runner_module.Runner.call

    def timed_call(self, op, payload, timeout=None):
        started = time.perf_counter()
        before = started - LAST[0] if LAST else 0.0  # the judge's own work since the last reply
        reply = call(self, op, payload, timeout)
        LAST[:] = [time.perf_counter()]
        seconds = LAST[0] - started
        runs = len(reply.header.get("runs") or []) if op in ("runs", "baseline") else 0
        args = payload.get("args") or {}
        case = ",".join(f"{k}={v}" for k, v in args.items() if k in ("m", "k", "l", "size", "n", "seqlen", "bs", "dim"))
        CALLS.append({"op": op, "case": case, "seconds": seconds, "runs": runs, "before": before,
                      "host_calls": (payload.get("params") or {}).get("host_calls", 0),
                      "phases": reply.header.get("phases"), "blob": len(reply.blob or b"")})
        if LIVE:
            show(CALLS[-1])
        return reply
    runner_module.Runner.call = timed_call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sub", default="submission/v5.py")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--prof", default=None)
    parser.add_argument("--mode", default="benchmark")
    parser.add_argument("--problem", default=None)
    args = parser.parse_args()
    watch_calls()
    if not args.runs:
        LIVE.append(True)
        print(f"{'op':<10} {'case':<28} {'judge s':>8} {'s':>7} {'runs':>5} {'ms/run':>7} host_calls", flush=True)
    started = time.perf_counter()
    record = api.judge(args.sub, args.mode, problem=args.problem)
    print(f"first{' (uncounted)' if args.runs else ''}: {time.perf_counter() - started:.1f} s, passed {record.passed}",
          flush=True)
    if not args.runs:
        return
    for i in range(args.runs):
        CALLS.clear()
        LAST.clear()
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        record = api.judge(args.sub, args.mode, problem=args.problem)
        profile.disable()
        total = time.perf_counter() - started
        print(f"run {i + 1}: {total:.2f} s, passed {record.passed}, geomean {(record.geomean_ns or 0) / 1e3:.2f} us")
    print(f"{'op':<10} {'case':<28} {'judge s':>8} {'s':>7} {'runs':>5} {'ms/run':>7} host_calls")
    for c in CALLS:
        show(c)
    print(f"requests: {sum(c['seconds'] for c in CALLS):.2f} s of {total:.2f} s")
    stats = pstats.Stats(profile)
    if args.prof:
        stats.dump_stats(args.prof)
    stats.sort_stats("cumulative").print_stats(r"eval/|torch/cuda|reference|task", 30)


if __name__ == "__main__":
    main()
