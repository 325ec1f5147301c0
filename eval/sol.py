"""Speed of light: what the memory allows on this GPU, and where a result stands against it.

The floor of a case is the time a plain streaming-read kernel (eval/baselines.py) takes to read the
bytes the GEMV must move (A, SFA, b, SFB once; c's write is under 0.1 % of it), timed exactly as
submissions are (the worker's compiled loop, in a worker holding no submission). Floors are
measured and cached by the judge only, per GPU, in results/sol-<gpu>.json (`python -m eval sol`).
"""
from __future__ import annotations

import json
from pathlib import Path

from eval import cases as case_files
from eval import results
from eval.records import Environment, RunRecord, Sol


def cache_path(gpu_name: str) -> Path:
    return results.RESULTS_DIR / f"sol-{results.slug(gpu_name)}.json"


def save_floors(environment: Environment, measured: dict) -> Path:
    """Cache floors for this GPU, keeping those of other shapes measured before."""
    earlier = (load_floors(environment.gpu) or {}).get("floors", {})
    measured = {**measured, "floors": {**earlier, **measured["floors"]}}
    payload = {"gpu": environment.gpu, "environment": environment.__dict__, "created": results.now_stamp(), **measured}
    return results.write_text_new(json.dumps(payload, indent=1), cache_path(environment.gpu))


def missing_floors(gpu_name: str | None, shapes: list) -> list:
    """The (m, k, l) shapes that have no cached floor on this GPU."""
    cached = (load_floors(gpu_name) or {}).get("floors", {})
    return [shape for shape in shapes if "x".join(map(str, shape)) not in cached]


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
    figures = case_files.gpu_figures(env.gpu) if env.cuda_available else None
    floors = cached_floors(env)
    b200 = case_files.b200_sol_us() if "B200" in env.gpu else {}
    record.sol_source = {"peak_tb_s": figures["peak_tb_s"] if figures else None,
                         "floors_from": str(cache_path(env.gpu)) if floors else None}
    for case in record.cases:
        if not case.passed or case.stats is None:
            continue
        m, k, l = case.args["m"], case.args["k"], case.args["l"]
        n = case_files.bytes_moved(m, k, l)
        mean = case.stats.mean
        sol = Sol(bytes=n, gb_s=n / mean)
        if figures:
            sol.pct_datasheet = 100.0 * (n / (figures["peak_tb_s"] * 1e3)) / mean
        floor = floors.get(f"{m}x{k}x{l}")
        if floor:
            sol.floor_ns = floor["median_ns"]
            sol.x_floor = mean / floor["median_ns"]
        if (m, k, l) in b200:
            sol.b200_sol_ns = b200[(m, k, l)] * 1e3
            sol.x_b200_sol = mean / sol.b200_sol_ns
        case.sol = sol
