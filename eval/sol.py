"""Speed of light: what the memory allows on this GPU, and where a result stands against it.

The floor of a case is the time a plain streaming-read kernel (eval/baselines.py) takes to read the
bytes the problem module says a kernel must move (`bytes_moved(args)`), timed exactly as
submissions are (the worker's compiled loop, in a worker holding no submission). Floors are
measured and cached by the judge only, per GPU, in results/sol-<gpu>.json (`python -m eval sol`).
"""
from __future__ import annotations

import json
from pathlib import Path

from eval import cases as case_files
from eval import problem_folder, results
from eval.records import Environment, RunRecord, Sol


def cache_path(gpu_name: str) -> Path:
    return results.RESULTS_DIR / f"sol-{results.slug(gpu_name)}.json"


def save_floors(environment: Environment, measured: dict) -> Path:
    """Cache floors for this GPU, keeping those of other shapes measured before."""
    earlier = (load_floors(environment.gpu) or {}).get("floors", {})
    measured = {**measured, "floors": {**earlier, **measured["floors"]}}
    payload = {"gpu": environment.gpu, "environment": environment.__dict__, "created": results.now_stamp(), **measured}
    return results.write_text_new(json.dumps(payload, indent=1), cache_path(environment.gpu))


def missing_floors(gpu_name: str | None, cases: list) -> list:
    """The cases whose size has no cached floor on this GPU (none where the problem has no floor)."""
    if problem_folder.current().hook("bytes_moved") is None:
        return []
    cached = (load_floors(gpu_name) or {}).get("floors", {})
    seen, missing = set(), []
    for case in cases:
        if case.key not in cached and case.key not in seen:
            seen.add(case.key)
            missing.append(case)
    return missing


def load_floors(gpu_name: str | None) -> dict | None:
    if not gpu_name:
        return None
    try:
        return json.loads(cache_path(gpu_name).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def cached_floors(environment: Environment) -> dict:
    """{"MxKxL": {"median_ns": ...}} for this GPU ({} without CUDA or without a cache)."""
    if not environment.cuda_available:
        return {}
    return (load_floors(environment.gpu) or {}).get("floors", {})


def annotate(record: RunRecord) -> None:
    """Add GB/s, % of datasheet SOL, time / floor and B200 SOL to each passing case (in place)."""
    env = record.environment
    problem = problem_folder.current()
    bytes_moved, task_sol = problem.hook("bytes_moved"), problem.hook("speed_of_light_ns")
    if bytes_moved is None:
        return  # the generic columns only
    figures = case_files.gpu_figures(env.gpu) if env.cuda_available else None
    floors = cached_floors(env)
    record.sol_source = {"peak_tb_s": figures["peak_tb_s"] if figures else None,
                         "floors_from": str(cache_path(env.gpu)) if floors else None}
    for case in record.cases:
        if not case.passed or case.stats is None:
            continue
        n = bytes_moved(case.args)
        mean = case.stats.mean
        sol = Sol(bytes=n, gb_s=n / mean)
        if figures:
            sol.pct_datasheet = 100.0 * (n / (figures["peak_tb_s"] * 1e3)) / mean
        floor = floors.get(case.key)
        if floor:
            sol.floor_ns = floor["median_ns"]
            sol.x_floor = mean / floor["median_ns"]
        target = task_sol(case.args, env.gpu) if task_sol and env.cuda_available else None
        if target:
            sol.b200_sol_ns = target  # the task's own speed-of-light figure for this GPU
            sol.x_b200_sol = mean / target
        case.sol = sol
