"""Time every launch configuration a submission offers on each case (`python -m eval tune SUB`).

A tunable submission exposes CONFIGS (a list) and run_with(data, config); its worker reports the list.
Each configuration runs in the submission's worker through the same compiled loop as a benchmark
(L2 flushed, events around the call), and every timed output is judged; a configuration that does
not fit a shape or gives a wrong result is listed with its reason. Prints every configuration per
case, the best last.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from eval.cases import Case
from eval.judge import modes


def tune(sub: Path, cases: list[Case], options: modes.Options, runs: int = 100) -> tuple[str, bool]:
    runner = modes.Runner(sub, options)
    lines, ok = [], True
    try:
        try:
            configs = json.loads(runner.call("configs", {}).header.get("text") or "[]")
        except (modes.WorkerFailure, ValueError) as exc:
            return f"error: {getattr(exc, 'reason', exc)}", False
        for case in cases:
            rows = []
            for config in configs:
                result = modes.new_case(case, options)
                try:
                    params = modes.runs_params(result.args, options, (runs, modes.NO_LIMIT), fresh_seeds=False)
                    reply = runner.call("runs", {"args": result.args, "params": params, "config": config})
                    samples, reason = modes.judge_runs(reply, result.args)
                    rows.append((statistics.median(samples), config, f"WRONG: {reason}"[:90] if reason else ""))
                    if reason:
                        rows[-1] = (float("inf"), config, rows[-1][2])
                except modes.WorkerFailure as failure:
                    rows.append((float("inf"), config, f"skip: {failure.reason}"[:90]))
            rows.sort(key=lambda r: r[0])
            ok = ok and rows[0][0] != float("inf")
            lines.append(f"== {case.label}")
            lines += [f"   {str(cfg):<18} {med / 1e3:8.2f} µs {note}" for med, cfg, note in reversed(rows)]
    finally:
        runner.close()
    return "\n".join(lines), ok


if __name__ == "__main__":
    from eval.cli import main as cli

    sys.exit(cli(["tune", *sys.argv[1:]]))
