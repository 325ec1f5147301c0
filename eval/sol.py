"""Speed of light: what the memory allows on this GPU, and where a result stands against it.

The floor of a case is the time a plain streaming-read kernel (Triton, best of a few block shapes)
takes to read the bytes the GEMV must move (A, SFA, b, SFB once; c's write is under 0.1 % of it),
timed exactly as submissions are (L2 flushed, events around the Python call, median of many runs).
Floors are cached per GPU in results/sol-<gpu>.json; `python -m eval sol` measures them.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from eval import cases as case_files
from eval import results
from eval.timing import event_samples

PEAK_BUFFER_BYTES = 2 << 30
FLOOR_RUNS = 60
FASTER_THAN_FLOOR = "faster than memory allows: check for caching or skipped work"


# -- measuring (inside the worker) ----------------------------------------------------------------

def _read_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def read_all(src, dst, n_words, BLOCK: tl.constexpr, ITERS: tl.constexpr):
        pid = tl.program_id(0)
        base = pid.to(tl.int64) * BLOCK * ITERS
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in tl.static_range(ITERS):
            offs = base + i * BLOCK + tl.arange(0, BLOCK)
            acc += tl.load(src + offs, mask=offs < n_words, other=0, eviction_policy="evict_first")
        tl.store(dst + pid, tl.sum(acc, 0))

    return read_all


CONFIGS = [(1024, 4, 4), (2048, 4, 8), (2048, 8, 8), (4096, 4, 8), (1024, 8, 4)]  # BLOCK, ITERS, warps


def time_read(n_bytes: int, flusher, runs: int = FLOOR_RUNS) -> dict:
    """Median time (ns) to stream-read n_bytes, best over CONFIGS; the buffer is random, not zeros."""
    import torch

    kernel = _read_kernel()
    words = (n_bytes + 3) // 4
    src = torch.randint(-(2**31), 2**31 - 1, (words,), dtype=torch.int32, device="cuda")
    best = None
    for block, iters, warps in CONFIGS:
        grid = (triton_cdiv(words, block * iters),)
        dst = torch.empty(grid[0], dtype=torch.int32, device="cuda")
        launch = lambda: kernel[grid](src, dst, words, BLOCK=block, ITERS=iters, num_warps=warps)
        samples = event_samples(launch, flusher, runs)
        median = statistics.median(samples)
        if best is None or median < best["median_ns"]:
            best = {"median_ns": median, "best_ns": min(samples), "config": [block, iters, warps]}
    return best


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def measure_floors(shapes: list[tuple[int, int, int]], flusher) -> dict:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("speed of light needs a CUDA GPU: there is none here")
    peak = time_read(PEAK_BUFFER_BYTES, flusher, runs=20)
    floors = {}
    for m, k, l in shapes:
        n = case_files.bytes_moved(m, k, l)
        read = time_read(n, flusher)
        floors[f"{m}x{k}x{l}"] = {"bytes": n, **read, "tb_s": n / read["median_ns"] / 1e3}
    return {
        "peak_read_tb_s": PEAK_BUFFER_BYTES / peak["median_ns"] / 1e3,
        "peak_config": peak["config"],
        "floors": floors,
    }


# -- using them (parent) --------------------------------------------------------------------------

def cache_path(gpu_name: str) -> Path:
    return results.RESULTS_DIR / f"sol-{results.slug(gpu_name)}.json"


def save_floors(environment: dict, measured: dict) -> Path:
    """Cache floors for this GPU, keeping those of other shapes measured before."""
    earlier = (load_floors(environment.get("gpu")) or {}).get("floors", {})
    measured = {**measured, "floors": {**earlier, **measured["floors"]}}
    payload = {"gpu": environment.get("gpu"), "environment": environment, "created": results.now_stamp(), **measured}
    return results.write_text_new(json.dumps(payload, indent=1), cache_path(environment.get("gpu", "unknown")))


def missing_floors(gpu_name: str | None, shapes: list) -> list:
    """The (m, k, l) shapes that have no cached floor on this GPU."""
    cached = (load_floors(gpu_name) or {}).get("floors", {})
    return [shape for shape in shapes if "x".join(map(str, shape)) not in cached]


def load_floors(gpu_name: str | None) -> dict | None:
    if not gpu_name:
        return None
    path = cache_path(gpu_name)
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def annotate(record: dict) -> None:
    """Add GB/s, % of datasheet SOL, time / floor, B200 SOL and the faster-than-floor flag to each
    passing case of a benchmark record (in place)."""
    env = record.get("environment") or {}
    gpu = env.get("gpu") or ""
    figures = case_files.gpu_figures(gpu) if env.get("cuda_available") else None
    floors = (load_floors(gpu) or {}).get("floors", {}) if env.get("cuda_available") else {}
    b200 = case_files.b200_sol_us() if "B200" in gpu else {}
    record["sol"] = {"peak_tb_s": figures["peak_tb_s"] if figures else None,
                     "floors_from": str(cache_path(gpu)) if floors else None}
    for case in record.get("cases", []):
        if case.get("status") != "pass" or "stats" not in case:
            continue
        m, k, l = case["args"]["m"], case["args"]["k"], case["args"]["l"]
        n = case_files.bytes_moved(m, k, l)
        mean = case["stats"]["mean"]
        sol = {"bytes": n, "gb_s": n / mean}
        if figures:
            sol["pct_datasheet"] = 100.0 * (n / (figures["peak_tb_s"] * 1e3)) / mean
        floor = floors.get(f"{m}x{k}x{l}")
        if floor:
            sol["floor_ns"] = floor["median_ns"]
            sol["x_floor"] = mean / floor["median_ns"]
            noise = 3 * case["stats"]["err"] + 0.02 * floor["median_ns"]
            if mean < floor["median_ns"] - noise:
                sol["flag"] = FASTER_THAN_FLOOR
        if (m, k, l) in b200:
            sol["b200_sol_ns"] = b200[(m, k, l)] * 1e3
            sol["x_b200_sol"] = mean / sol["b200_sol_ns"]
        case["sol"] = sol
