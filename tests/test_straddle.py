"""#40: work the submission left running off the timed stream, seen as a longer L2 flush before the
start event (eval/judge/modes.py straddle_*; the GPU side is tests/adversarial/l2_*.py). CPU only."""
import os

from eval.judge import modes

REF = 100_000.0  # an idle flush of 100 us
ALLOW = max(modes.STRADDLE_ALLOW_NS, modes.STRADDLE_ALLOW_REL * REF)


def test_no_flush_or_no_reference_counts_nothing():
    assert modes.straddle_excess({"ns": 1.0}, REF) == 0.0  # a worker without pre_ns
    assert modes.straddle_excess({"ns": 1.0, "pre_ns": -1}, REF) == 0.0  # no flush asked (CPU)
    assert modes.straddle_excess({"ns": 1.0, "pre_ns": 5 * REF}, -1) == 0.0  # no reference (CPU)


def test_noise_within_the_allowance_is_free_and_the_rest_is_counted():
    assert modes.straddle_excess({"pre_ns": REF + ALLOW}, REF) == 0.0
    assert modes.straddle_excess({"pre_ns": REF - 3000}, REF) == 0.0
    assert modes.straddle_excess({"pre_ns": REF + ALLOW + 2500}, REF) == 2500.0


def test_a_few_slow_flushes_pass_many_fail_naming_it():
    runs = 100
    few = [0.0] * (runs - 2) + [800.0, 900.0]
    assert modes.straddle_reason(few, REF) is None
    many = [0.0] * (runs - 20) + [4000.0] * 20
    reason = modes.straddle_reason(many, REF)
    assert reason and "work off the timed stream" in reason and "20 of 100 runs" in reason
    assert modes.straddle_reason([4000.0] * 2, REF) is None  # fewer runs than STRADDLE_FAIL_MIN
    assert modes.straddle_reason([4000.0] * 3, REF)


class _Reply:
    def __init__(self, runs, ref, wait=500e3):
        self.header = {"params": {"canary": [], "batch": 1, "wait_ns": wait}, "runs": runs, "flush_ref_ns": ref,
                       "host": []}
        self.blob = b""


def test_judge_runs_adds_the_excess_to_the_samples():
    runs = [{"ns": 20_000.0, "pre_ns": REF, "calls": []}, {"ns": 20_000.0, "pre_ns": REF + ALLOW + 1000, "calls": []}]
    samples, reason = modes.judge_runs(_Reply(runs, REF), {"m": 1})
    assert samples == [20_000.0, 21_000.0] and reason is None
    samples, reason = modes.judge_runs(_Reply(runs, -1.0), {"m": 1})  # CPU: no reference
    assert samples == [20_000.0, 20_000.0]
    samples, reason = modes.judge_runs(_Reply(runs, REF, wait=0.0), {"m": 1})  # --gap-us 0: not judged
    assert samples == [20_000.0, 20_000.0]


def test_l2_kept_across_the_flush_fails_the_case_naming_it():
    """A run in which the worker found a persisting L2 set-aside or a window on the timed stream
    (driver.h l2_undo; the GPU side is tests/adversarial/l2_persisting.py) fails, whatever its time."""
    clean = {"ns": 20_000.0, "pre_ns": REF, "l2_kept": 0, "l2_window": 0, "calls": []}
    assert modes.judge_runs(_Reply([clean, clean], REF), {"m": 1})[1] is None
    kept = {**clean, "l2_kept": float(30 << 20)}
    reason = modes.judge_runs(_Reply([clean, kept], REF), {"m": 1})[1]
    assert reason.startswith(modes.L2_KEPT) and "timed run 2" in reason and "30.0 MiB" in reason
    window = {**clean, "l2_window": float(1 << 20)}
    reason = modes.judge_runs(_Reply([window], -1.0), {"m": 1})[1]  # judged with no flush reference too
    assert reason.startswith(modes.L2_KEPT) and "access-policy window of 1.0 MiB" in reason
    assert modes.l2_kept_reason(0, {"ns": 1.0}) is None  # an older worker's run: nothing to say


def test_work_queued_off_the_timed_stream_fails_the_case_naming_the_call():
    """A run in which the worker's off-stream watch (watch.h: CUPTI callbacks) saw the submission queue
    work on a stream the timed stream does not wait for fails, naming the call; a watch that stopped
    seeing calls is tampering; a watch that is off (no libcupti) judges nothing."""
    clean = {"ns": 20_000.0, "pre_ns": REF, "l2_kept": 0, "l2_window": 0, "off_stream": 0, "watch": "on", "calls": []}
    assert modes.judge_runs(_Reply([clean, clean], REF), {"m": 1})[1] is None
    off = {**clean, "off_stream": 2, "off_what": "cuMemcpyDtoDAsync_v2 on a non-blocking stream that did not wait"}
    reason = modes.judge_runs(_Reply([clean, off], REF), {"m": 1})[1]
    assert reason.startswith(modes.OFF_STREAM) and "timed run 2" in reason and "cuMemcpyDtoDAsync_v2" in reason
    assert "2 such calls" in reason and "wait_stream" in reason
    blind = {**clean, "watch": "blind"}
    reason = modes.judge_runs(_Reply([blind], REF), {"m": 1})[1]
    assert reason.startswith("timing tampered") and "timed run 1" in reason
    assert modes.off_stream_reason(0, {**clean, "watch": "off"}) is None
    assert modes.off_stream_reason(0, {"ns": 1.0}) is None  # an older worker's run


def test_only_workers_that_may_share_this_gpu_are_neighbours(monkeypatch, tmp_path):
    """A neighbour on another GPU (its own CUDA_VISIBLE_DEVICES) does not excuse a flush that ran long
    here; one on the same GPU, or one that sees every GPU, does."""
    from eval.judge import lifecycle

    monkeypatch.setenv("EVAL_CACHE", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    other = lifecycle.Claim()
    other.started(os.getpid(), None, True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert lifecycle._live_workers(None, same_gpu=True) == 0 and lifecycle._live_workers(None) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert lifecycle._live_workers(None, same_gpu=True) == 1
    other.release()
