"""A/B comparison of two submissions (or saved results): interleaved runs, bootstrap ratio, verdict.
Live sides run in their own workers; every timed output is judged, so a kernel right only when
checked cannot win."""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
from pathlib import Path

from eval import progress, results
from eval.cases import Case, ConfigError
from eval.judge import modes
from eval.judge.text import one_line
from eval.stats import bootstrap_ratio, verdict

# CPU time the stopped side may show for one timed round of the other (the stop's delivery, the
# reaper's bookkeeping); more is a process that continued itself
FREEZE_SLACK_NS = 50e6


@dataclasses.dataclass
class Side:
    name: str
    saved: dict | None = None  # spec -> samples, from a result file
    runner: modes.Runner | None = None
    host_timer: bool = False  # a saved record measured with the host clock


@dataclasses.dataclass
class CaseRatio:
    case: str
    a_mean_ns: float
    b_mean_ns: float
    n_a: int
    n_b: int
    ratio: float
    lo: float
    hi: float
    verdict: str


@dataclasses.dataclass
class Outcome:
    a: str
    b: str
    method: str
    rounds: int
    per_round: int
    cases: list[CaseRatio] = dataclasses.field(default_factory=list)
    geomean: dict | None = None
    error: str | None = None
    host_timer: bool = False  # no CUDA: CPU wall times
    load: dict | None = None  # the machine's load average before and after, and its CPU count
    logs: dict = dataclasses.field(default_factory=dict)  # each live side's worker log
    warning: str | None = None  # the machine was busy (host timer): no verdict is given


# a load average above this fraction of the CPUs: the ratio is reported with a warning (other work
# on the cores stretches the two sides unequally; an identical pair has read 1.28 on a busy 2-core machine)
BUSY_LOAD_PER_CPU = 0.5


def machine_load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def busy(load: float | None, cpus: int) -> bool:
    """A load average past BUSY_LOAD_PER_CPU of the CPUs: host-timer times are not comparable."""
    return load is not None and load > BUSY_LOAD_PER_CPU * cpus


def load_note(outcome: Outcome) -> str | None:
    """A warning when the machine was busy while the comparison ran (CPU timing only)."""
    load = outcome.load or {}
    worst = max([v for v in (load.get("before"), load.get("after")) if v is not None], default=None)
    cpus = load.get("cpus") or 1
    if not outcome.host_timer or not busy(worst, cpus):
        return None
    return (f"warning: the machine was busy (load average {worst:.1f} on {cpus} CPUs): other work on the cores "
            "stretches the two sides unequally, so a ratio away from 1 may be the load; rerun on an idle machine")


def _side(path: Path, options: modes.Options) -> Side:
    if path.suffix == ".json":
        record = results.load_record(path)
        if record.timing.emulated:
            raise ConfigError(f"{path.name} was measured with --emulate-blackwell: emulated times are not compared")
        samples = {c.spec: c.samples for c in record.cases if c.passed}
        return Side(name=f"{record.submission} ({path.name})", saved=samples,
                    host_timer=not record.environment.cuda_available)
    return Side(name=str(path), runner=modes.Runner(path, options))


def compare(a: Path, b: Path, cases: list[Case], options: modes.Options, rounds: int, per_round: int) -> Outcome:
    import torch

    sides = [_side(a, options), _side(b, options)]
    live = any(side.runner for side in sides)
    outcome = Outcome(a=sides[0].name, b=sides[1].name, method=options.method, rounds=rounds, per_round=per_round,
                      host_timer=any(s.host_timer for s in sides) or (live and not torch.cuda.is_available()))
    outcome.load = {"before": machine_load() if live else None, "cpus": os.cpu_count()}
    outcome.logs = {side.name: results.shown(side.runner.log_path) for side in sides if side.runner}  # as log: lines show it
    try:
        samples = []
        with progress.steps(len(cases), "compare") as step:
            for case in cases:
                step(case.label)
                samples.append(_collect(sides, case, options, rounds, per_round))
    except modes.WorkerFailure as exc:
        outcome.error = exc.reason
        return outcome
    except KeyError as exc:
        outcome.error = f"saved result has no samples for case {exc}"
        return outcome
    finally:
        outcome.load["after"] = machine_load() if live else None
        for side in sides:
            if side.runner:
                side.runner.close()
    per_case, geo = bootstrap_ratio([s[0] for s in samples], [s[1] for s in samples])
    for case, (sa, sb), (ratio, lo, hi) in zip(cases, samples, per_case):
        outcome.cases.append(CaseRatio(case.label, statistics.fmean(sa), statistics.fmean(sb), len(sa), len(sb),
                                       ratio, lo, hi, verdict(ratio, lo, hi)))
    outcome.geomean = {"ratio": geo[0], "lo": geo[1], "hi": geo[2], "verdict": verdict(*geo)}
    outcome.warning = load_note(outcome)
    if outcome.warning:  # CPU times on a busy machine: the interval does not hold the load's share
        for c in outcome.cases:
            c.verdict = INCONCLUSIVE
        outcome.geomean["verdict"] = INCONCLUSIVE
    return outcome


INCONCLUSIVE = "inconclusive (busy machine)"


def _collect(sides: list[Side], case: Case, options: modes.Options, rounds: int, per_round: int):
    """Samples of A and B for one case; live sides alternate A B A B ... so drift hits both."""
    collected = [[], []]
    for i, side in enumerate(sides):
        if side.saved is not None:
            if not side.saved.get(case.spec):
                raise KeyError(case.spec)
            collected[i] = list(side.saved[case.spec])
    for side in sides:  # the same untimed checks as `test`, before any time is taken
        if side.runner:
            result = modes.new_case(case, options)
            try:
                modes.check_trial(side.runner, result, options)
            except modes.WorkerFailure as failure:
                result.fail(failure.reason)
            if not result.passed:
                raise modes.WorkerFailure(f"{side.name} on {case.label} fails the checks: {result.error}")
    # one discarded run per live side first (as the leaderboard's untimed call before a case): a
    # kernel's first launch (lazy load, JIT) is not part of either side's samples
    for round_size, keep in [(1, False)] + [(per_round, True)] * rounds:
        for i, side in enumerate(sides):
            if side.runner:
                others = [s for s in sides if s is not side and s.runner]
                escaped = []
                try:
                    for other in others:  # the side not timed now cannot run (its threads included)
                        other.runner.worker.freeze(True)
                    got = modes.samples(side.runner, modes.new_case(case, options), options, round_size)
                except modes.WorkerFailure as failure:
                    raise modes.WorkerFailure(f"{side.name} on {case.label}: {failure.reason}")
                finally:
                    for other in others:
                        ran = other.runner.worker.freeze(False)
                        escaped += [(other, ran)] if ran > FREEZE_SLACK_NS else []
                if escaped:
                    other, ran = escaped[0]
                    raise modes.WorkerFailure(
                        f"{other.name} ran {ran / 1e6:.0f} ms on a CPU while it was stopped and {side.name} was timed "
                        "(a process that continues itself escapes the freeze): the comparison is void")
                collected[i] += got if keep else []
    return collected


def slower_beyond(outcome: Outcome, pct: float) -> bool:
    """True when B/A's 95 % interval lies wholly above 1 + pct/100 (geomean)."""
    return not outcome.warning and outcome.geomean["lo"] > 1.0 + pct / 100.0


HOST_TIMER = "HOST TIMER: CPU wall time, not GPU kernel time"


def render(outcome: Outcome, fmt: str = "table") -> str:
    if fmt == "json":
        data = dataclasses.asdict(outcome)
        data["host_timer"] = HOST_TIMER if outcome.host_timer else None  # as every record's JSON says it
        return json.dumps(data, indent=1)
    if fmt == "popcorn":
        return popcorn(outcome)
    if outcome.error:
        failed = [log for name, log in outcome.logs.items() if outcome.error.startswith(name)] or list(outcome.logs.values())
        notes = [f"log: {log}" for log in failed] + ([f"[{HOST_TIMER}]"] if outcome.host_timer else [])
        return "\n".join(notes + [f"compare failed: {one_line(outcome.error)}"])
    head = f"A = {outcome.a}\nB = {outcome.b}\nratio = B/A mean time (below 1: B faster), 95 % bootstrap interval"
    rows = [f"{'case':<22} {'A µs':>9} {'B µs':>9} {'B/A':>7} {'95% CI':>17}  verdict"]
    for c in outcome.cases:
        rows.append(f"{c.case:<22} {c.a_mean_ns / 1e3:9.2f} {c.b_mean_ns / 1e3:9.2f} {c.ratio:7.3f} "
                    f"[{c.lo:.3f}, {c.hi:.3f}]  {c.verdict}")
    g = outcome.geomean
    rows.append(f"{'geomean':<22} {'':>9} {'':>9} {g['ratio']:7.3f} [{g['lo']:.3f}, {g['hi']:.3f}]  {g['verdict']}")
    notes = [line for line in (load_note(outcome),) if line] + ([f"[{HOST_TIMER}]"] if outcome.host_timer else [])
    head += "".join(f"\n{line}" for line in notes)  # the verdict stays the last line
    if fmt == "markdown":
        return head + "\n\n```\n" + "\n".join(rows) + "\n```"
    return head + "\n" + "\n".join(rows)


def popcorn(outcome: Outcome) -> str:
    """The leaderboard's key: value style: compare.N.* per case, then the geomean and check."""
    lines = [f"# {HOST_TIMER}"] if outcome.host_timer else []
    lines += [f"# {line}" for line in (load_note(outcome),) if line]
    if outcome.error:
        return "\n".join(lines + [f"error: {one_line(outcome.error)}", "check: fail"])
    lines.append(f"compare-count: {len(outcome.cases)}")
    for i, c in enumerate(outcome.cases):
        lines += [f"compare.{i}.spec: {one_line(c.case)}", f"compare.{i}.a_mean: {c.a_mean_ns}",
                  f"compare.{i}.b_mean: {c.b_mean_ns}", f"compare.{i}.ratio: {c.ratio}",
                  f"compare.{i}.lo: {c.lo}", f"compare.{i}.hi: {c.hi}", f"compare.{i}.verdict: {c.verdict}"]
    g = outcome.geomean
    lines += [f"geomean.ratio: {g['ratio']}", f"geomean.lo: {g['lo']}", f"geomean.hi: {g['hi']}",
              f"geomean.verdict: {g['verdict']}", "check: pass"]
    return "\n".join(lines)
