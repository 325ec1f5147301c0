"""In-process timing for the trusted probe scripts in docs/experiments (they time kernels of their own,
with no submission and no verdict). The harness itself times in the worker's compiled loop
(eval/worker/native.cpp); this mirrors its method: L2 flush, a head-start wait, CUDA events.
"""
from __future__ import annotations

import time
from typing import Callable

import torch


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
