"""Work off the timed stream (#40): what a run's record says about work the submission did outside the
timed window, judged from the worker's reply (eval/worker/native/timing.h, timed_calls; driver.h,
l2_undo). Used by eval/judge/modes.py judge_runs; never loads submission code."""
from __future__ import annotations

import json
import os

# Work off the timed stream (#40). The worker's last act before the start event is the L2 flush, in
# the kernel that has held every SM since the wait began (eval/worker/native.cpp, timed_calls): what a
# submission started on other streams, copy engines or threads when it was called, during the wait,
# is either done by then and flushed, or still running and sharing the GPU with the flush, which then
# takes longer than it did on the idle GPU before the submission was imported (flush_ref_ns). The part
# of that excess past the noise allowance is added to the run's time (what the work kept from the
# flush it could have saved the timed kernel, about the same bytes at the same bandwidth), and a case
# where more than STRADDLE_FAIL_FRACTION of the runs (at least STRADDLE_FAIL_MIN) show it fails,
# naming it.
STRADDLE_ALLOW_NS = 1500.0  # noise allowance: the larger of this and STRADDLE_ALLOW_REL x the idle flush
STRADDLE_ALLOW_REL = 0.015
STRADDLE_FAIL_FRACTION = 0.10
STRADDLE_FAIL_MIN = 3
STRADDLE_MIN_WAIT_NS = 30e3  # shorter gaps (--gap-us 0) put the canaries inside the flush's span: not judged


def straddle_excess(run: dict, ref_ns: float) -> float:
    """ns of a run's flush past the idle flush and the allowance (0: none; no flush or no reference: 0)."""
    pre = float(run.get("pre_ns", -1))
    if pre < 0 or ref_ns <= 0:
        return 0.0
    return max(0.0, pre - ref_ns - max(STRADDLE_ALLOW_NS, STRADDLE_ALLOW_REL * ref_ns))


STRADDLE = "work off the timed stream"


def straddle_reason(excess: list[float], ref_ns: float) -> str | None:
    hit = [e for e in excess if e > 0]
    if len(hit) < max(STRADDLE_FAIL_MIN, STRADDLE_FAIL_FRACTION * len(excess)):
        return None
    return (f"{STRADDLE}: the L2 flush before the start event ran up to {max(hit) / 1e3:.1f} us longer "
            f"than on the idle GPU ({ref_ns / 1e3:.1f} us) in {len(hit)} of {len(excess)} runs: something the "
            f"submission started outside the timed stream (another stream, a copy engine, a graph, a thread) "
            f"was still running on the GPU before the start event")


L2_KEPT = "L2 kept across the flush"


def l2_kept_reason(i: int, run: dict) -> str | None:
    """A run where the worker found L2 set aside for persisting lines or an access-policy window on the
    timed stream (eval/worker/native/driver.h, l2_undo): lines the flush before each run cannot evict."""
    kept, window = float(run.get("l2_kept", 0) or 0), float(run.get("l2_window", 0) or 0)
    if kept <= 0 and window <= 0:
        return None
    what = []
    if kept > 0:
        what.append(f"{kept / 2**20:.1f} MiB of L2 set aside for persisting lines (cudaLimitPersistingL2CacheSize)")
    if window > 0:
        what.append(f"an L2 access-policy window of {window / 2**20:.1f} MiB on the timed stream")
    return (f"{L2_KEPT}: timed run {i + 1} found {' and '.join(what)}; lines kept that way survive the L2 "
            f"flush before every run, and the timing assumes a cold L2 (the harness undid it)")


OFF_STREAM = "work queued off the timed stream"


def off_stream_reason(i: int, run: dict) -> str | None:
    """A run in which the submission queued GPU work on a stream the timed stream does not wait for, as
    the worker's off-stream watch saw it (eval/worker/native/watch.h: CUPTI's driver-API callbacks), or
    in which the watch stopped seeing calls (silenced from inside the process)."""
    if run.get("watch") == "blind":
        return (f"timing tampered: the off-stream watch (CUPTI callbacks on the calls that queue GPU work) "
                f"stopped seeing calls in timed run {i + 1}")
    n = int(run.get("off_stream", 0) or 0)
    if n <= 0:
        return None
    return (f"{OFF_STREAM}: timed run {i + 1} queued {run.get('off_what') or 'GPU work'} ({n} such call"
            f"{'s' if n > 1 else ''}); such work runs before the start event, outside the timed region, and "
            f"what it leaves survives the L2 flush. Make the side stream wait for the current one first "
            f"(side.wait_stream(torch.cuda.current_stream())), or use the current stream")


def log_straddle(reply, ref_ns: float) -> None:
    """EVAL_STRADDLE_LOG=<file> (the judge's environment; .ci/timing-attack-check): one line per
    reply with each run's time and flush span, to set the allowance from measurements."""
    path = os.environ.get("EVAL_STRADDLE_LOG")
    if path:
        runs = reply.header.get("runs", [])
        with open(path, "a") as f:
            f.write(json.dumps({"ref_ns": ref_ns, "ns": [r["ns"] for r in runs],
                                "pre_ns": [r.get("pre_ns", -1) for r in runs]}) + "\n")
