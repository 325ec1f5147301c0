"""How one case is timed, inside the worker: L2 flush, CUDA events (host clock without CUDA), the
leaderboard's stop rule, the batched method, and the host cost per call.

Per-call (the leaderboard's eval.py): per iteration synchronize, flush L2, record an event, call
custom_kernel(data), record an event, synchronize. The flush runs on the GPU before the start event,
so the host's launch work overlaps it, as on the leaderboard; `gap_us` adds a GPU-side sleep after
the flush to give the host the head start the leaderboard's 4 GiB randn flush gives it.

Batched (the leaderboard's later eval_better_bench.py): N distinct inputs called back to back
between one pair of events, the time divided by N; every output checked.
"""
from __future__ import annotations

import time
from typing import Callable

import torch

from eval.stats import Stats, calculate_stats, should_stop

FLUSH_L2_MULTIPLE = 4  # the flush buffer is this many times the device's L2
DEFAULT_GAP_US = 500.0  # host head start after the flush; about what the leaderboard's flush takes


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class L2Flusher:
    """Evicts the L2 by reading and writing a buffer several times the L2's size (from the device)."""

    def __init__(self, gap_us: float = DEFAULT_GAP_US):
        self.enabled = torch.cuda.is_available()
        self.gap_cycles = 0
        if not self.enabled:
            return
        l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
        self.buffer = torch.zeros(FLUSH_L2_MULTIPLE * max(l2_bytes, 1 << 20) // 4, dtype=torch.int32, device="cuda")
        self.gap_cycles = int(gap_us * _cycles_per_us()) if gap_us > 0 else 0

    def flush(self) -> None:
        if self.enabled:
            self.buffer.add_(1)
            if self.gap_cycles:
                torch.cuda._sleep(self.gap_cycles)


_CYCLES_PER_US: list[float] = []


def _cycles_per_us() -> float:
    """Calibrate torch.cuda._sleep (which spins for a number of clock cycles) against events."""
    if not _CYCLES_PER_US:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # warm
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize()
        _CYCLES_PER_US.append(cycles / max(start.elapsed_time(end) * 1e3, 1e-3))
    return _CYCLES_PER_US[0]


class Timer:
    """CUDA events when CUDA is present, otherwise the host's perf_counter (after a sync)."""

    def __init__(self):
        self.cuda = torch.cuda.is_available()
        self.kind = "cuda-events" if self.cuda else "host-clock (no CUDA)"

    def start(self) -> None:
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter_ns()

    def record_end(self) -> None:
        """Mark the end on the current stream (host clock: read it now)."""
        if self.cuda:
            self._end.record()
        else:
            self._t1 = time.perf_counter_ns()

    def elapsed_ns(self) -> float:
        """Wait for the device; ns between start and record_end."""
        if self.cuda:
            torch.cuda.synchronize()
            return self._start.elapsed_time(self._end) * 1e6
        return float(self._t1 - self._t0)

    def stop(self) -> float:
        self.record_end()
        return self.elapsed_ns()


def event_samples(launch: Callable, flusher: L2Flusher, runs: int) -> list[float]:
    """ns of launch() per run, the harness's way (one untimed warm call first; then per run:
    synchronize, flush L2, events around the call). For the floor and the BF16 baseline."""
    launch()
    sync()
    timer = Timer()
    samples = []
    for _ in range(runs):
        sync()
        flusher.flush()
        timer.start()
        launch()
        samples.append(timer.stop())
    return samples


def clone_data(data):
    if isinstance(data, tuple):
        return tuple(clone_data(x) for x in data)
    if isinstance(data, list):
        return [clone_data(x) for x in data]
    if isinstance(data, dict):
        return {k: clone_data(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


class CaseFailed(Exception):
    """The submission produced a wrong result (the message is the checker's)."""


def time_per_call(
    kernel: Callable,
    make_input: Callable[[int], tuple],
    check: Callable,
    seed: int,
    recheck: bool,
    max_repeats: int,
    max_time_ns: float,
    flusher: L2Flusher,
    wall_cap_ns: float = 120e9,
) -> tuple[Stats, list[float]]:
    """The leaderboard's benchmark loop for one case. Raises CaseFailed on a wrong result."""
    data = make_input(seed)
    check_copy = clone_data(data)
    output = kernel(clone_data(data))
    _expect_good(check(check_copy, output))
    timer = Timer()
    durations: list[float] = []
    bench_start = time.perf_counter_ns()
    for _ in range(max_repeats):
        if recheck:
            seed += 13  # a new input every timed run, as the leaderboard's leaderboard mode does
            data = make_input(seed)
            check_copy = clone_data(data)
        sync()
        flusher.flush()
        timer.start()
        output = kernel(data)
        timer.record_end()
        # a copy queued on the current stream right after the end event: if the kernel left work
        # on another stream, the copy sees an unfinished output and the recheck fails
        snapshot = output.clone() if recheck and isinstance(output, torch.Tensor) else output
        durations.append(timer.elapsed_ns())
        if recheck:
            _expect_good(check(check_copy, snapshot))
        del output, snapshot
        if should_stop(durations, time.perf_counter_ns() - bench_start, max_time_ns, wall_cap_ns):
            break
    return calculate_stats(durations), durations


def time_batched(
    kernel: Callable,
    make_input: Callable[[int], tuple],
    check: Callable,
    seed: int,
    batch: int,
    max_repeats: int,
    max_time_ns: float,
    flusher: L2Flusher,
    wall_cap_ns: float = 120e9,
) -> tuple[Stats, list[float]]:
    """N distinct inputs back to back between one pair of events; time / N per sample. Every
    output of every timed run is checked."""
    inputs = []
    for _ in range(batch):
        seed += 42
        inputs.append(make_input(seed))
    copies = clone_data(inputs)
    for data, ref in zip(inputs, copies):
        _expect_good(check(ref, kernel(clone_data(data))))
    timer = Timer()
    durations: list[float] = []
    bench_start = time.perf_counter_ns()
    for _ in range(max_repeats):
        sync()
        flusher.flush()
        timer.start()
        outputs = [kernel(data) for data in inputs]
        durations.append(timer.stop() / batch)
        for ref, out in zip(copies, outputs):
            _expect_good(check(ref, out))
        del outputs
        if should_stop(durations, time.perf_counter_ns() - bench_start, max_time_ns, wall_cap_ns):
            break
    return calculate_stats(durations), durations


def host_overhead_us(kernel: Callable, data: tuple, calls: int = 20) -> float:
    """Host time per custom_kernel call, back to back with no sync in between (launch cost)."""
    sync()
    kernel(data)
    sync()
    start = time.perf_counter_ns()
    for _ in range(calls):
        kernel(data)
    elapsed = time.perf_counter_ns() - start
    sync()
    return elapsed / calls / 1e3


def _expect_good(result: tuple[bool, str]) -> None:
    good, message = result
    if not good:
        raise CaseFailed(message)
