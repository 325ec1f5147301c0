"""A/B comparison of two submissions (or saved results): interleaved runs, bootstrap ratio, verdict."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from eval import modes, results
from eval.cases import Case
from eval.stats import bootstrap_ratio, verdict
from eval.worker import WorkerFailure


def _side(path: Path, options: modes.Options):
    """A saved result (samples per spec) or a live runner."""
    if path.suffix == ".json":
        record = results.load_record(path)
        samples = {c["spec"]: c.get("samples") for c in record["cases"] if c.get("status") == "pass"}
        return {"name": f"{record.get('submission')} ({path.name})", "saved": samples}
    return {"name": str(path), "runner": modes.Runner(path, options)}


def compare(a: Path, b: Path, cases: list[Case], options: modes.Options, rounds: int, per_round: int) -> dict:
    sides = [_side(a, options), _side(b, options)]
    outcome = {"a": sides[0]["name"], "b": sides[1]["name"], "method": options.method,
               "rounds": rounds, "per_round": per_round, "cases": [], "error": None}
    try:
        samples = [_collect(sides, case, options, rounds, per_round) for case in cases]
    except (WorkerFailure, KeyError) as exc:
        outcome["error"] = getattr(exc, "reason", None) or f"saved result has no samples for case {exc}"
        return outcome
    finally:
        for side in sides:
            if "runner" in side:
                side["runner"].close()
    per_case, geo = bootstrap_ratio([s[0] for s in samples], [s[1] for s in samples])
    for case, (sa, sb), (ratio, lo, hi) in zip(cases, samples, per_case):
        outcome["cases"].append({"case": case.label, "a_mean_ns": statistics.fmean(sa), "b_mean_ns": statistics.fmean(sb),
                                 "n_a": len(sa), "n_b": len(sb), "ratio": ratio, "lo": lo, "hi": hi,
                                 "verdict": verdict(ratio, lo, hi)})
    outcome["geomean"] = {"ratio": geo[0], "lo": geo[1], "hi": geo[2], "verdict": verdict(*geo)}
    return outcome


def _collect(sides: list, case: Case, options: modes.Options, rounds: int, per_round: int):
    """Samples of A and B for one case; live sides alternate A B A B ... so drift hits both."""
    collected = [[], []]
    for i, side in enumerate(sides):
        if "saved" in side:
            saved = side["saved"][case.spec]
            if not saved:
                raise KeyError(case.spec)
            collected[i] = list(saved)
    for _ in range(rounds):
        for i, side in enumerate(sides):
            if "runner" in side:
                payload = {"args": modes.case_args(case, options), "n": per_round, "method": options.method}
                collected[i] += side["runner"].call("samples", payload)
    return collected


def slower_beyond(outcome: dict, pct: float) -> bool:
    """True when B/A's 95 % interval lies wholly above 1 + pct/100 (geomean)."""
    return outcome["geomean"]["lo"] > 1.0 + pct / 100.0


def render(outcome: dict, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(outcome, indent=1)
    if outcome.get("error"):
        return f"compare failed: {outcome['error']}"
    head = f"A = {outcome['a']}\nB = {outcome['b']}\nratio = B/A mean time (below 1: B faster), 95 % bootstrap interval"
    rows = [f"{'case':<22} {'A µs':>9} {'B µs':>9} {'B/A':>7} {'95% CI':>17}  verdict"]
    for c in outcome["cases"]:
        rows.append(f"{c['case']:<22} {c['a_mean_ns'] / 1e3:9.2f} {c['b_mean_ns'] / 1e3:9.2f} {c['ratio']:7.3f} "
                    f"[{c['lo']:.3f}, {c['hi']:.3f}]  {c['verdict']}")
    g = outcome["geomean"]
    rows.append(f"{'geomean':<22} {'':>9} {'':>9} {g['ratio']:7.3f} [{g['lo']:.3f}, {g['hi']:.3f}]  {g['verdict']}")
    if fmt == "markdown":
        return head + "\n\n```\n" + "\n".join(rows) + "\n```"
    return head + "\n" + "\n".join(rows)
