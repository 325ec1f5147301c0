"""Harness kernels timed by the worker's compiled loop exactly as submissions are (L2 flushed, head
start, events around the call), in a worker that holds no submission: the streaming read that sets
a case's floor (of the bytes the problem module says a kernel must move), and the problem module's
baseline (a library kernel). Judge side; it uses the modes' shared ground (eval/judge/runner.py),
never eval/judge/modes.py, which calls it (ensure_floors, baseline_for_cases)."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from eval import problem_folder, results
from eval.cases import Case
from eval.judge.runner import NO_LIMIT, Options, Runner, describe_environment, runs_params
from eval.judge.wire import WorkerFailure

PEAK_BUFFER_BYTES = 2 << 30
FLOOR_RUNS = 60
READ_CONFIGS = [(1024, 4, 4), (2048, 4, 8), (2048, 8, 8), (4096, 4, 8), (1024, 8, 4)]  # BLOCK, ITERS, warps
BASELINE_RUNS = 100


def _time(runner: Runner, baseline: dict, options: Options, runs: int) -> list[float]:
    params = runs_params({"seed": 0}, options, (runs, NO_LIMIT), fresh_seeds=False, check=False)
    params["wall_cap_ns"] = NO_LIMIT
    reply = runner.call("baseline", {"baseline": baseline, "params": params})
    return [float(run["ns"]) for run in reply.header.get("runs", [])]


def time_read(runner: Runner, n_bytes: int, options: Options, runs: int = FLOOR_RUNS) -> dict:
    """Median time (ns) to stream-read n_bytes of random data, best over READ_CONFIGS."""
    best = None
    for config in READ_CONFIGS:
        samples = _time(runner, {"kind": "read", "bytes": n_bytes, "config": list(config)}, options, runs)
        median = statistics.median(samples)
        if best is None or median < best["median_ns"]:
            best = {"median_ns": median, "best_ns": min(samples), "config": list(config)}
    return best


def measure_floors(cases: list[Case], options: Options) -> tuple[dict, dict]:
    """(environment, measured floors) for the cases, from one harness worker."""
    bytes_moved = problem_folder.current().hook("bytes_moved")
    if bytes_moved is None:
        raise WorkerFailure("this problem has no floor: its problem.py defines no bytes_moved(args)")
    runner = Runner(None, options)
    try:
        runner.ensure()
        env = describe_environment(runner.info.get("sandbox"))
        if not env.cuda_available:
            raise WorkerFailure("speed of light needs a CUDA GPU: there is none here")
        peak = time_read(runner, PEAK_BUFFER_BYTES, options, runs=20)
        floors = {}
        for case in cases:
            n = bytes_moved(case.args)
            read = time_read(runner, n, options)
            floors[case.key] = {"bytes": n, **read, "tb_s": n / read["median_ns"] / 1e3}
    finally:
        runner.close()
    return env, {"peak_read_tb_s": PEAK_BUFFER_BYTES / peak["median_ns"] / 1e3, "peak_config": peak["config"],
                 "floors": floors}


def ensure_floors(environment, cases: list[Case], options: Options) -> list[Case]:
    """Measure and cache this GPU's floors for the cases that have none (a GPU verdict needs them:
    "faster than memory allows"); returns the cases measured."""
    from eval import sol

    missing = sol.missing_floors(environment.gpu, cases) if environment.cuda_available else []
    if missing:
        env, measured = measure_floors(missing, options)
        sol.save_floors(env, measured)
    return missing


def baseline_path(gpu_name: str) -> Path:
    return results.RESULTS_DIR / f"baseline-{results.slug(gpu_name)}.json"


def _baseline_key(case_key: str, options: Options) -> str:
    """What a baseline time depends on: the problem folder, the case, how it is timed, and torch
    (the baseline is a library kernel)."""
    import torch

    method = f"{options.method}{options.batch if options.method == 'batched' else ''}"
    return f"{problem_folder.current().root}|{case_key}|{method}|gap{options.gap_us}|torch{torch.__version__}"


def _load_baselines(gpu_name: str) -> dict:
    try:
        return json.loads(baseline_path(gpu_name).read_text()).get("baselines", {})
    except (OSError, ValueError, AttributeError):
        return {}


def baseline_for_cases(cases: list, options: Options, gpu_name: str | None = None) -> None:
    """Fill result.baseline for each passing case: the problem's baseline kernel's median and mean time,
    timed once per GPU and kept in results/baseline-<gpu>.json (like the floors; delete it to time
    again): a batch of candidates does not time the same library kernel for each of them."""
    problem = problem_folder.current()
    if problem.hook("baseline") is None:
        return
    cached = _load_baselines(gpu_name) if gpu_name else {}
    todo = []
    for result in cases:
        if result.passed:
            found = cached.get(_baseline_key(result.key, options))
            if found:
                result.baseline = dict(found)
            else:
                todo.append(result)
    if not todo:
        return
    runner = Runner(None, options)
    measured = {}
    try:
        for result in todo:
            try:
                samples = _time(runner, {"kind": "problem", "args": result.args}, options, BASELINE_RUNS)
                result.baseline = {"median_ns": statistics.median(samples), "mean_ns": statistics.fmean(samples)}
                size = problem.hook("baseline_bytes")
                if size is not None:
                    result.baseline["bytes"] = size(result.args)
                measured[_baseline_key(result.key, options)] = result.baseline
            except WorkerFailure as failure:
                result.baseline = {"error": failure.reason}
    finally:
        runner.close()
    if measured and gpu_name:  # others' entries kept: a judge beside this one may have written some
        payload = {"gpu": gpu_name, "created": results.now_stamp(),
                   "baselines": {**_load_baselines(gpu_name), **measured}}
        results.write_text_new(json.dumps(payload, indent=1), baseline_path(gpu_name))
