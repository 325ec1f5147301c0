"""Harness kernels timed by the worker's compiled loop exactly as submissions are (L2 flushed, head
start, events around the call), in a worker that holds no submission: the streaming read that sets
a case's floor, and the BF16 GEMV (cuBLAS through torch) that NVFP4 replaces. Judge side."""
from __future__ import annotations

import statistics

from eval import cases as case_files
from eval.judge import modes

PEAK_BUFFER_BYTES = 2 << 30
FLOOR_RUNS = 60
READ_CONFIGS = [(1024, 4, 4), (2048, 4, 8), (2048, 8, 8), (4096, 4, 8), (1024, 8, 4)]  # BLOCK, ITERS, warps
BF16_RUNS = 100


def _time(runner: modes.Runner, baseline: dict, options: modes.Options, runs: int) -> list[float]:
    params = modes.runs_params({"seed": 0}, options, (runs, modes.NO_LIMIT), fresh_seeds=False, check=False)
    params["wall_cap_ns"] = modes.NO_LIMIT
    reply = runner.call("baseline", {"baseline": baseline, "params": params})
    return [float(run["ns"]) for run in reply.header.get("runs", [])]


def time_read(runner: modes.Runner, n_bytes: int, options: modes.Options, runs: int = FLOOR_RUNS) -> dict:
    """Median time (ns) to stream-read n_bytes of random data, best over READ_CONFIGS."""
    best = None
    for config in READ_CONFIGS:
        samples = _time(runner, {"kind": "read", "bytes": n_bytes, "config": list(config)}, options, runs)
        median = statistics.median(samples)
        if best is None or median < best["median_ns"]:
            best = {"median_ns": median, "best_ns": min(samples), "config": list(config)}
    return best


def measure_floors(shapes: list[tuple[int, int, int]], options: modes.Options) -> tuple[dict, dict]:
    """(environment, measured floors) for the shapes, from one harness worker."""
    runner = modes.Runner(None, options)
    try:
        runner.ensure()
        env = modes.describe_environment(runner.info.get("sandbox"))
        if not env.cuda_available:
            raise modes.WorkerFailure("speed of light needs a CUDA GPU: there is none here")
        peak = time_read(runner, PEAK_BUFFER_BYTES, options, runs=20)
        floors = {}
        for m, k, l in shapes:
            n = case_files.bytes_moved(m, k, l)
            read = time_read(runner, n, options)
            floors[f"{m}x{k}x{l}"] = {"bytes": n, **read, "tb_s": n / read["median_ns"] / 1e3}
    finally:
        runner.close()
    return env, {"peak_read_tb_s": PEAK_BUFFER_BYTES / peak["median_ns"] / 1e3, "peak_config": peak["config"],
                 "floors": floors}


def bf16_for_cases(results: list, options: modes.Options) -> None:
    """Fill result.bf16 for each passing case: the BF16 GEMV's median and mean time."""
    runner = modes.Runner(None, options)
    try:
        for result in results:
            if not result.passed:
                continue
            try:
                samples = _time(runner, {"kind": "bf16", "args": result.args}, options, BF16_RUNS)
                m, k, l = (result.args[x] for x in ("m", "k", "l"))
                result.bf16 = {"median_ns": statistics.median(samples), "mean_ns": statistics.fmean(samples),
                               "bytes": (m * k + k + m) * l * 2}
            except modes.WorkerFailure as failure:
                result.bf16 = {"error": failure.reason}
    finally:
        runner.close()
