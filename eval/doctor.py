"""`python -m eval doctor`: what a user runs first on a new machine (judge side: starts workers that
hold no submission, loads none).

It shows the GPU as a sandboxed worker sees it, every sandbox layer (on, or why not), the level this
machine reaches (eval/judge/levels.py; found again here, not read from the kept file), the time to
start a worker, and whether N workers side by side all reach that level. It exits 1 where the level
is below what the machine should reach (full), or where a side-by-side worker did not get there.

`--skip LAYER,...` (diagnosis only, never a way to judge) starts workers with layers left out;
`--bisect` tries every layer alone and every layer left out, one worker each, several at once, and
prints a table: layers, the driver's cuInit, CUDA after every layer, seconds.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from eval.judge import levels, worker_start
from eval.judge.channel import WorkerFailure, WorkerProcess
from eval.worker.sandbox import LAYERS

ZYGOTE_PHASE = worker_start.ZYGOTE_PHASE


@dataclasses.dataclass
class Start:
    """One worker's hello."""
    level: str
    skip: tuple[str, ...]
    cuda: bool
    seconds: float
    layers: dict
    error: str = ""
    gpu: str = ""
    phases: dict = dataclasses.field(default_factory=dict)
    started_by: str = ""

    @property
    def driver(self) -> str:
        return str(self.layers.get("cuda driver", "-"))

    def weak(self) -> list[str]:
        """Layers neither on nor not applicable (skipped ones included)."""
        return [f"{k}: {v}" for k, v in self.layers.items()
                if not str(v).startswith(("on", "one", "dropped", "n/a", "full")) and k != "sandbox level"]


def hello(level: str, skip: tuple[str, ...] = (), log_dir: Path | None = None) -> Start:
    """Start a worker (no submission) at `level` with `skip` left out; its signed hello."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="eval-doctor-"))
    name = "-".join(skip) or "all"
    worker = WorkerProcess(None, log_dir / f"{level}-{name}-{time.monotonic_ns()}.log", skip=skip)
    started = time.monotonic()
    try:
        info = worker._hello(level)
        phases = dict(info.get("start phases") or {})
        seconds = time.monotonic() - started - phases.get(ZYGOTE_PHASE, 0.0)  # the zygote's start: said apart
        error = "" if info.get("cuda") else str(info.get("cuda_error") or "no CUDA in the worker")
        return Start(level, skip, bool(info.get("cuda")), seconds, dict(info.get("sandbox") or {}), error,
                     str(info.get("gpu", "")), {k: v for k, v in phases.items() if k != ZYGOTE_PHASE},
                     str(info.get("started by", "")))
    except WorkerFailure as exc:
        return Start(level, skip, False, time.monotonic() - started, {}, f"{exc.reason} {exc.detail}".strip())
    finally:
        worker.close()


def find_level(log_dir: Path) -> tuple[str | None, list[Start], str | None]:
    """Every level best first until CUDA works, under the judges' lock: the level this machine
    reaches, each try, and why it was not kept (None: kept). It steps down only for a CUDA failure
    that is the sandbox's (not for want of GPU memory, a worker that did not start, or while other
    workers run: a neighbour could be the cause), as the judge does (eval/judge/levels.py)."""
    from eval.judge.channel import RESOURCE_ERRORS, _live_workers

    tried = []
    with levels.finding():
        for level in levels.LEVELS:
            tried.append(hello(level, log_dir=log_dir))
            last = tried[-1]
            if last.cuda or (not cuda_expected() and last.layers):
                break
            why = None
            if any(word in last.error.lower() for word in RESOURCE_ERRORS):
                why = "CUDA failed for want of GPU resources (another process holds the GPU?)"
            elif not last.layers:
                why = f"the worker did not start: {last.error[:200]}"
            elif _live_workers(None):
                why = f"{_live_workers(None)} other worker(s) ran: a neighbour could be the cause"
            if why:
                return None, tried, why
        else:
            return None, tried, "CUDA did not work in the worker at any level"
        if cuda_expected():
            levels.remember(level, [(t.level, t.error) for t in tried[:-1]], tried[-1].seconds)
        return level, tried, None


def side_by_side(level: str, count: int, log_dir: Path) -> list[Start]:
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: hello(level, log_dir=log_dir), range(count)))


def bisect_layers(level: str, jobs: int, log_dir: Path) -> list[tuple[str, Start]]:
    """All layers; each layer alone (every other left out); each layer left out."""
    plans = [("all layers", ())]
    plans += [(f"only {name}", tuple(n for n in LAYERS if n != name)) for name in LAYERS]
    plans += [(f"without {name}", (name,)) for name in LAYERS]
    plans.append(("no layer", LAYERS))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        starts = list(pool.map(lambda plan: hello(level, plan[1], log_dir), plans))
    return [(label, start) for (label, _), start in zip(plans, starts)]


def expected_level() -> str:
    return "full"  # root or not: full applies every layer the process can (the layers say which are n/a)


def cuda_expected() -> bool:
    import torch

    return torch.cuda.is_available()


def _remedy(weak: str) -> str:
    """What to do about a weak layer, where there is something to do."""
    if weak.startswith("uid: kept root"):
        return (f" (make the Python installation readable by every user, e.g. chmod -R o+rX {sys.base_prefix}, "
                f"or run as a user other than root)")
    return ""


def _line(start: Start) -> str:
    state = "CUDA works" if start.cuda else f"CUDA fails: {start.error[:300]}"
    return f"{start.seconds:5.1f} s  {state}"


def main(workers: int = 16, skip: tuple[str, ...] = (), bisect: bool = False, jobs: int = 8, fmt: str = "table",
         output: Path | None = None) -> int:
    import json
    import platform

    log_dir = Path(tempfile.mkdtemp(prefix="eval-doctor-"))
    os.chmod(log_dir, 0o700)
    report: dict = {"kernel": platform.release(), "driver": levels.driver_version(), "root": os.geteuid() == 0,
                    "cuda in the judge": cuda_expected(), "logs": str(log_dir)}
    say = (lambda *a: None) if fmt == "json" else print
    say(f"machine: kernel {report['kernel']}; NVIDIA driver: {report['driver']}; "
        f"{'root' if report['root'] else 'not root'}; CUDA in the judge: {'yes' if report['cuda in the judge'] else 'no'}")
    problems = []
    began = time.monotonic()
    forks = worker_start.warm_zygote()
    if forks is not None and forks.ready():
        report["zygote s"] = round(time.monotonic() - began, 2)
        say(f"zygote (Python and import torch, once per judge; each worker is forked from it): {report['zygote s']:.1f} s")
    else:
        report["zygote s"] = None
        say("zygote: " + (f"could not start ({forks.failure}): " if forks is not None else "off (EVAL_ZYGOTE=0): ")
            + "each worker starts Python and torch anew")
    if bisect:
        bisect_level = "full"
        rows = bisect_layers(bisect_level, jobs, log_dir)
        report["bisect"] = [{"plan": label, "cuInit": s.driver, "cuda": s.cuda, "seconds": round(s.seconds, 2),
                             "error": s.error} for label, s in rows]
        say(f"\nbisect at level {bisect_level} (one worker each, {jobs} at once): layers, cuInit, CUDA, seconds")
        for label, s in rows:
            say(f"  {label:28s} {s.driver[:40]:40s} {'yes' if s.cuda else 'NO ':3s} {s.seconds:5.1f}"
                + ("" if s.cuda else f"  {s.error[:160]}"))
    elif skip:
        s = hello("full", skip, log_dir)
        report["diagnosis"] = dataclasses.asdict(s)
        say(f"\ndiagnosis: level full with {', '.join(skip)} left out: {_line(s)}")
        for k, v in s.layers.items():
            say(f"  {k:22s} {v}")
    else:
        level, tried, unkept = find_level(log_dir)
        best = tried[-1]
        report["level"] = level
        report["tried"] = [dataclasses.asdict(t) for t in tried]
        if unkept:
            problems.append(f"no level kept: {unkept}")
        say(f"\nGPU as the worker sees it: {best.gpu or 'none'}")
        gaps = [k for k, v in best.layers.items() if not str(v).startswith(("on", "one", "dropped", "n/a"))]
        say(f"level this machine reaches: {level or 'none with CUDA'}"
            + (f", incomplete: {', '.join(gaps)} could not be applied here (below)" if level and gaps else "")
            + (f" (kept in {levels.cache_file()})" if level and cuda_expected() else ""))
        for t in tried[:-1]:
            say(f"  tried {t.level}: {_line(t)}")
        say(f"worker start at {best.level}: {best.seconds:.1f} s, {best.started_by or 'python'} ("
            + ", ".join(f"{k} {v:.2f}" for k, v in best.phases.items()) + ")")
        say("layers:")
        width = max((len(k) for k in best.layers), default=22)
        for k, v in best.layers.items():
            say(f"  {k:{width}s} {v}")
        if cuda_expected() and level != expected_level():
            problems.append(f"the level is {level or 'none'}, below {expected_level()}")
        if cuda_expected() and not best.cuda:
            problems.append("CUDA does not work in the worker")
        problems += [f"layer {w}" + _remedy(w) for w in best.weak()]
        if workers and level:
            many = side_by_side(level, workers, log_dir)
            ok = [m for m in many if m.cuda or not cuda_expected()]
            times = sorted(m.seconds for m in many)
            report["side by side"] = {"workers": workers, "reached": len(ok), "start s median": round(statistics.median(times), 2),
                                      "start s max": round(times[-1], 2),
                                      "errors": sorted({m.error[:200] for m in many if m.error and cuda_expected()})}
            say(f"side by side: {len(ok)}/{workers} workers at {level} "
                f"{'with CUDA' if cuda_expected() else '(no CUDA on this machine)'}; start median "
                f"{statistics.median(times):.1f} s, max {times[-1]:.1f} s")
            for error in report["side by side"]["errors"][:3]:
                say(f"  {error}")
            if len(ok) < workers:
                problems.append(f"{workers - len(ok)} of {workers} side-by-side workers did not reach {level}")
    report["problems"] = problems
    if not bisect and not skip:
        say("verdict: " + ("ok: every layer on, CUDA works in the worker" if not problems else "NOT OK: " + "; ".join(problems)))
    if output:
        Path(output).write_text(json.dumps(report, indent=1, default=str))
    if fmt == "json":
        print(json.dumps(report, indent=1, default=str))
    return 1 if problems else 0
