"""The leaderboard's modes, judged in this process: test, benchmark, leaderboard, profile, and the
interleaved samples that compare and tune use.

Each mode drives one submission's worker through a list of cases and returns a RunRecord. The
worker only runs the submission; every output it produced (the untimed checks and every timed run)
is checked here against this process's own inputs, reference and canaries. A failing case never
stops the record from being produced; the worker is restarted after any failure.

What the modes share with the harness's own measurements (eval/baselines.py) lives in
eval/judge/runner.py (Options, Runner, case_profile, runs_params, describe_environment), imported
and re-exported here; baselines imports runner, never this module, so the two do not import each
other (tests/test_import_cycles.py).
"""
from __future__ import annotations

import contextlib
import secrets
import time
from pathlib import Path

import torch

from eval import needs, problem_folder, progress, results, sol
from eval.cases import Case, ranking_by
from eval.judge import static_check, verdict
from eval.judge.cannot_run import (  # noqa: F401
    _missing_blackwell, explain_arch_failures, lacking, mark_cannot_run, reference_lacks)
from eval.judge.runner import (  # noqa: F401 (re-exported: callers use modes.Options, modes.Runner, ...)
    HOST_BATCHES, HOST_CALLS, NO_LIMIT, SNAPSHOT_SLACK, CaseProfile, Options, Runner, canaries, case_outputs,
    case_profile, describe_environment, forget_profiles, max_span, reply_limit, runs_params, take_first_input)
from eval.judge.wire import Reply, WorkerFailure  # noqa: F401 (re-exported)
from eval.judge.lifecycle import _live_workers
from eval.judge.off_stream import (  # noqa: F401 (re-exported: tests and experiments read modes.STRADDLE_*, ...)
    L2_KEPT, OFF_STREAM, STRADDLE, STRADDLE_ALLOW_NS, STRADDLE_ALLOW_REL, STRADDLE_FAIL_FRACTION, STRADDLE_FAIL_MIN,
    STRADDLE_MIN_WAIT_NS, l2_kept_reason, log_straddle, off_stream_reason, straddle_excess, straddle_reason)
from eval.judge.worker_start import DEFAULT_LOAD_TIMEOUT_S, WorkerProcess  # noqa: F401 (re-exported)
from eval.records import CaseResult, RunRecord, Timing
from eval.stats import calculate_stats, score, should_stop

# (max repeats, max summed kernel ns) for the warm-up and for each case: the problem's evaluator's own
# where its file is there to read (budgets()), else these, those of nvidia/eval.py and eval_better_bench.py
BENCHMARK_BUDGET = {"warmup": (200, 1e8), "case": (200, 10e9)}
LEADERBOARD_BUDGET = {"warmup": (1000, 5e8), "case": (1000, 30e9)}
from eval.worker.driver import FLUSH_L2_MULTIPLE  # noqa: E402 (the worker allocates its flush buffer at start)
FLOOR_FAIL_RATIO = 0.9  # a mean below this fraction of the measured floor fails


# -- records --------------------------------------------------------------------------------------

def case_args(case: Case, options: Options) -> dict:
    args = dict(case.args)
    if options.dist:
        args["dist"] = options.dist
    return args


def new_case(case: Case, options: Options) -> CaseResult:
    return CaseResult(spec=case.spec, label=case.label, args=case_args(case, options))


def start_record(mode: str, submission: Path | None, runner: Runner, options: Options) -> RunRecord:
    """A record with the environment filled in, or its error set when the submission cannot be
    used (a failing static check, or it does not load)."""
    record = RunRecord(
        mode=mode, submission=str(submission) if submission else None, created=results.now_stamp(),
        submission_sha256=results.file_sha256(submission) if submission and Path(submission).is_file() else None,
        git_commit=results.git_commit(), log=str(runner.log_path),
        timing=Timing(options.method, options.batch if options.method == "batched" else None, options.gap_us),
    )
    if submission and not static_check.available():
        record.static = ["kernelguard is not installed: static pre-check skipped (pip install kernelguard)"]
    elif submission:
        findings = static_check.scan(Path(submission))
        failing = [f for f in findings if f.fails]
        record.static = [static_check.describe(f) for f in findings if not f.fails]
        if failing:
            record.error = static_check.describe(failing[0])
            record.environment = describe_environment()
            return record
    missing = reference_lacks()
    if missing:  # not the submission's fault: no worker is started to find it out
        record.cannot_run = missing
        record.error = f"{needs.PREFIX}needs {missing} (the problem's reference.py)"
        record.environment = describe_environment()
        return record
    try:
        info = runner.ensure()
    except WorkerFailure as failure:
        record.error = f"could not load {submission}: {failure.reason}"
        info = runner.worker.info or {}  # the signed hello, before the import: its sandbox, what is emulated
    record.import_s = runner.worker.import_s
    record.environment = describe_environment(info.get("sandbox"))
    record.timing.emulated = list(info.get("emulated") or [])
    record.timing.reference_emulated = verdict.reference_emulation()
    return record


@contextlib.contextmanager
def runner_for(submission: Path | None, options: Options, runner: Runner | None):
    """The given runner (the caller closes it: `make eval` tests and benchmarks in one worker), or
    a new one closed on exit."""
    if runner is not None:
        yield runner
        return
    own = Runner(submission, options)
    try:
        yield own
    finally:
        own.close()


def run_each_case(mode: str, submission: Path | None, cases: list[Case], options: Options, call,
                  runner: Runner | None = None) -> RunRecord:
    """call(runner, case_result) fills in one case; a failing case is recorded with its reason and
    the others still run. `passed` when every case passed."""
    with runner_for(submission, options, runner) as runner, progress.steps(len(cases), mode) as step:
        record = start_record(mode, submission, runner, options)
        record.specs = [c.spec for c in cases]
        try:
            for i, case in enumerate(cases if not record.error else []):
                step(case.label)
                result = new_case(case, options)
                try:
                    call(runner, result)
                except WorkerFailure as failure:
                    result.fail(failure.reason, failure.detail)
                record.cases.append(result)
                if result.passed:
                    continue
                missing = lacking(f"{result.error or ''} {result.detail or ''}", record)
                why = ("failed for want of Blackwell" if _missing_blackwell(record, result, options)
                       else f"needs {missing}" if missing else None)
                if why:  # the same build, the same machine: every case would fail alike (a worker each)
                    for rest in cases[i + 1:]:
                        skipped = new_case(rest, options)
                        skipped.fail(f"not run: {case.label} {why} (the same for every case)")
                        record.cases.append(skipped)
                    break
        except (KeyboardInterrupt, SystemExit) as stop:
            mark_incomplete(record, stop, len(cases))
    mark_cannot_run(record)
    record.passed = not record.incomplete and not record.error and bool(record.cases) and all(c.passed for c in record.cases)
    explain_arch_failures(record)
    return record


# -- test: the untimed anti-cheat calls -----------------------------------------------------------

def _random_seed() -> int:
    return secrets.randbits(47)


def trial_steps(args: dict) -> list[dict]:
    """The calls an honest kernel must survive: the case's own input (every input tensor hashed after
    it), new data in the same buffers, new buffers, and full-range data where the problem has it."""
    profile = case_profile(args)
    every = list(range(profile.items))
    steps = [
        {"seed": args["seed"], "reuse": False, "overrides": {}, "hash_args": every, "canary": canaries(args)},
        {"seed": _random_seed(), "reuse": True, "overrides": {}, "hash_args": [], "canary": canaries(args)},
        {"seed": _random_seed(), "reuse": False, "overrides": {}, "hash_args": [], "canary": canaries(args)},
    ]
    if profile.opaque:  # state beside the tensors the worker cannot refill: new data means a new input
        del steps[1]
    full = problem_folder.current().hook("FULL_RANGE")
    if full:
        steps.append({"seed": _random_seed(), "reuse": False, "overrides": dict(full), "hash_args": [],
                      "canary": canaries({**args, **full})})
    return steps


NO_INPUT_TENSOR = ("generate_input's result holds no tensor: no input is hashed or canaried for this case "
                   "(the output is still checked on every call)")

OPAQUE_INPUT = "generate_input's result holds objects with state of their own the worker cannot refill"

STEP_CONTEXT = (
    "",
    "wrong result when called again with new data in the same buffers (a result cached from an earlier call?): ",
    "wrong result when called a third time with new buffers (cached result?): ",
)


def check_trial(runner: Runner, result: CaseResult, options: Options, config=None) -> None:
    """Run the trial steps in the worker and judge each here; the first wrong one fails the case.
    config: a tunable submission's launch configuration (run_with) instead of custom_kernel."""
    steps = trial_steps(result.args)
    if not case_profile(result.args).items and NO_INPUT_TENSOR not in result.warnings:
        result.warnings.append(NO_INPUT_TENSOR)
    opaque = case_profile(result.args).opaque
    if opaque and not any(w.startswith(OPAQUE_INPUT) for w in result.warnings):
        result.warnings.append(f"{OPAQUE_INPUT} ({', '.join(opaque)}): the call with new data in the same buffers is "
                               f"not made (each call gets a new input)")
    params = {"cuda": torch.cuda.is_available(), "flush_l2_multiple": FLUSH_L2_MULTIPLE, "steps": steps,
              "max_span": max_span(result.args)}
    payload = {"args": result.args, "params": params}
    if config is not None:
        payload["config"] = config
    reply, inputs = _trial_inputs(runner, payload, result.args, steps)
    for i, (step, done) in enumerate(zip(steps, reply.header.get("steps", []))):
        data = verdict.apply_canary(inputs[i], step["canary"], done["canary"])
        reason = verdict.judge_output(data, done["out"], reply.blob, done.get("synced"))
        if reason is None and i == 0:
            reason = _modified_input(data, done.get("hashes", {}), result.args)
        if reason is None:
            continue
        if step["overrides"]:  # the full-range call
            note = problem_folder.current().hook("NARROW_NOTE", "correct only on the cases' own data distribution")
            narrow = f"{note}: {reason}"
            if options.fail_narrow:
                result.fail(narrow)
                return
            result.warnings.append(narrow)
            continue
        result.fail(("" if i == 0 else STEP_CONTEXT[1] if step["reuse"] else STEP_CONTEXT[2]) + reason)
        return
    if len(reply.header.get("steps", [])) < len(steps) and result.passed:
        result.fail("the worker stopped the checks early")


def _trial_inputs(runner: Runner, payload: dict, args: dict, steps: list[dict]) -> tuple:
    """The trial's reply and the judge's copy of each step's input. The copies
    are made while the worker runs the trial (for a large input, its generation is much of a case's
    time): in one thread, one step after another, all made before anything else here runs again, since
    a generate_input may draw from torch's global RNG (seeded per call), which nothing else uses
    meanwhile: this thread only waits on the worker. The first step's copy is the profile's own input
    (take_first_input) and this thread makes the profile's second generation (case_outputs) first."""
    from concurrent.futures import Future, ThreadPoolExecutor

    first = take_first_input(args)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-inputs")
    try:
        pending = [pool.submit(case_outputs, args)]
        for i, step in enumerate(steps):
            if i == 0 and first is not None and step["seed"] == args["seed"] and not step["overrides"]:
                pending.append(kept := Future())
                kept.set_result(first)
            else:
                pending.append(pool.submit(verdict.generate, args, step["seed"], step["overrides"]))
        reply = runner.call("trial", payload)
        made = [future.result() for future in pending][1:]  # every one before a check runs (the RNG)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return reply, made


def _modified_input(data, hashes: dict, args: dict) -> str | None:
    """The first input tensor whose bytes changed in the call, other than its output buffers (see
    case_outputs). Built to catch one cheat: work done on an input in place (decoded, reordered,
    partly reduced) that a later call on the same buffer would reuse; the reason says so."""
    problem = problem_folder.current()
    items, names = problem_folder.flatten(data)
    writable = case_outputs(args) | set(problem.hook("WRITABLE_INPUTS", ()))
    for index, item in enumerate(items):
        if index in writable or not isinstance(item, torch.Tensor):
            continue
        if hashes.get(str(index)) != verdict.input_hash(item):
            return (f"modified its input `{problem.input_name(index, names)}` (work done in place on an input "
                    f"carries over to the next call on that buffer): custom_kernel may write only its "
                    f"output{_writable_names(problem, writable, names)}")
    return None


def _writable_names(problem, writable: set, keys) -> str:
    names = [problem.input_name(i, keys) for i in sorted(writable)]
    return f" ({', '.join(names)})" if names else ""


def mark_incomplete(record: RunRecord, stop: BaseException, expected: int) -> None:
    """Ctrl-C or SIGTERM (a `timeout` around the command) mid-run: what was measured is kept, the
    record says it is incomplete, and the command exits with the signal's code after writing it."""
    how = "interrupted (Ctrl-C)" if isinstance(stop, KeyboardInterrupt) else f"stopped (exit {stop.code})"
    record.incomplete = f"{how} after {len(record.cases)} of {expected} case(s)"
    record.exit_code = 130 if isinstance(stop, KeyboardInterrupt) else int(stop.code or 1)


def run_tests(submission: Path, cases: list[Case], options: Options, runner: Runner | None = None) -> RunRecord:
    return run_each_case("test", submission, cases, options,
                         lambda runner, result: check_trial(runner, result, options), runner)


# -- timed runs -----------------------------------------------------------------------------------

class Inputs:
    """The judge's copy of each input the worker holds, keyed by seed, with the canaries of every
    run so far written in order (as they are in the worker's buffers)."""

    def __init__(self, args: dict, held: int):
        self.args = args
        self.held = held  # inputs the worker holds at once (the batch); fresh seeds replace them
        self.state: dict[int, tuple] = {}

    def after_canary(self, seed: int, regions: list, canary: dict) -> tuple:
        if seed not in self.state:
            if len(self.state) >= self.held:  # a fresh seed: the worker dropped the oldest input too
                self.state.pop(next(iter(self.state)))
            self.state[seed] = verdict.generate(self.args, seed)
        return verdict.apply_canary(self.state[seed], regions, canary)


def judge_runs(reply: Reply, args: dict) -> tuple[list[float], str | None]:
    """(samples in ns, the first wrong output's reason or None). Every call of every run is checked,
    and every call of the host-cost batches. A run's time includes its straddle_excess."""
    regions = reply.header["params"]["canary"]
    inputs = Inputs(args, held=int(reply.header["params"]["batch"]))
    samples = []
    ref_ns = float(reply.header.get("flush_ref_ns", -1))
    if float(reply.header["params"].get("wait_ns", 0)) < STRADDLE_MIN_WAIT_NS:
        ref_ns = -1.0
    excess = []
    log_straddle(reply, ref_ns)
    for i, run in enumerate(reply.header.get("runs", [])):
        excess.append(straddle_excess(run, ref_ns))
        samples.append(float(run["ns"]) + excess[-1])
        kept = l2_kept_reason(i, run) or off_stream_reason(i, run)
        if kept:
            return samples, kept
        for slot, call in enumerate(run["calls"]):
            data = inputs.after_canary(int(call["seed"]), regions, call["canary"])
            if "out" not in call:
                continue  # unchecked harness kernels (floors, baselines)
            if "same_as" in call["out"]:
                verdict.same_as_judged(reply, i, slot)
                continue
            reason = verdict.judge_output(data, call["out"], reply.blob, call.get("synced"))
            if reason:
                return samples, f"timed run {i + 1}: {reason}"
    batches = reply.header.get("host") or []
    own = Inputs(args, held=max((len(b.get("calls", [])) for b in batches), default=1))
    for b, batch in enumerate(batches):
        for call in batch.get("calls", []):
            data = own.after_canary(int(call["seed"]), regions, call["canary"])
            if "out" in call:
                reason = verdict.judge_output(data, call["out"], reply.blob)
                if reason:
                    return samples, f"back-to-back calls (host cost, batch {b + 1}): {reason}"
    return samples, straddle_reason(excess, ref_ns)


def timed(runner: Runner, result: CaseResult, options: Options, budget: tuple, fresh_seeds: bool,
          host_calls: int = 0) -> list[float]:
    """The timed runs of one case, every output judged; raises WorkerFailure with the reason. One
    request, unless the worker ended its reply early because the outputs it carries reached max_blob
    (large outputs that differ from run to run; an output the same as an earlier one of the reply
    carries no bytes): then more requests, with the leaderboard's stop rule applied again over all."""
    max_repeats, max_time_ns = budget
    samples: list[float] = []
    started = time.monotonic_ns()
    while len(samples) < max_repeats:
        n = max_repeats - len(samples)
        params = runs_params(result.args, options, (n, max(max_time_ns - sum(samples), 1.0)), fresh_seeds,
                             host_calls if not samples else 0)
        reply = runner.call("runs", {"args": result.args, "params": params})
        try:
            got, reason = judge_runs(reply, result.args)
        except verdict.Tampered as exc:
            runner.close()
            raise WorkerFailure(str(exc))
        if reason and reason.startswith(STRADDLE) and _live_workers(runner.worker.claim, same_gpu=True):
            # another judge's worker shares this GPU: its kernels lengthen the flush as well (the time
            # keeps what was counted; a timing beside a neighbour is no leaderboard timing anyway)
            if reason not in result.warnings:
                result.warnings.append(f"{reason} (or another worker that shared this GPU: not failed)")
            reason = None
        if reason:
            raise WorkerFailure(reason)
        if reply.header.get("host_ns", -1) > 0:
            result.host_us = reply.header["host_ns"] / 1e3
        samples += got
        # the first reply, ended by the worker's own stop rule, saw every sample; a later one saw its own only
        cut = len(got) < n and len(reply.blob) >= params["max_blob"]  # the reply's bytes ended it, not the stop rule
        whole = not cut and len(samples) == len(got)
        if not got or whole or should_stop(samples, time.monotonic_ns() - started, max_time_ns, options.wall_cap_s * 1e9,
                                           params["stop_rel_err"], params["stop_min_ns"]):
            break
    return samples


def run_benchmarks(submission: Path, cases: list[Case], options: Options, leaderboard: bool = False,
                   runner: Runner | None = None) -> RunRecord:
    """The leaderboard's benchmark (or leaderboard) mode. Leaderboard mode runs the anti-cheat
    checks on every case first and draws a new input every timed run; it stops at the first failure
    as the leaderboard does."""
    budget = options.budget or budgets(leaderboard)
    with runner_for(submission, options, runner) as runner:
        record = start_record("leaderboard" if leaderboard else "benchmark", submission, runner, options)
        record.specs = [c.spec for c in cases]
        if not record.error and record.environment.cuda_available:
            from eval import baselines

            try:  # a GPU verdict needs this GPU's floors ("faster than memory allows")
                baselines.ensure_floors(record.environment, cases, options)
            except WorkerFailure as failure:
                record.error = f"cannot measure this GPU's floors: {failure.reason}"
        if not record.error:
            try:
                _benchmark_cases(runner, record, cases, options, budget, leaderboard)
            except (KeyboardInterrupt, SystemExit) as stop:
                mark_incomplete(record, stop, len(cases))
    if not record.error and not record.incomplete and options.baseline and record.environment.cuda_available:
        _add_baseline(record, options)
    finish_record(record, len(cases))
    mark_cannot_run(record)
    explain_arch_failures(record)
    return record


def budgets(leaderboard: bool) -> dict:
    """The warm-up's and each case's (max repeats, max summed kernel ns) for this problem: its
    evaluator's own (pmpp_v2's eval.py stops at 100 runs, where nvidia's take 200 and 1000), else the
    defaults above."""
    declared = problem_folder.current().timing.budgets
    if not declared:
        return LEADERBOARD_BUDGET if leaderboard else BENCHMARK_BUDGET
    warmup, case = declared[2:] if leaderboard else declared[:2]
    return {"warmup": warmup, "case": case}


def _benchmark_cases(runner: Runner, record: RunRecord, cases: list[Case], options: Options, budget: dict,
                     leaderboard: bool) -> None:
    progress.phase(f"warm-up: untimed runs of {cases[0].label}")
    _warm_up(runner, new_case(cases[0], options), options, budget["warmup"])
    floors = sol.cached_floors(record.environment)
    with progress.steps(len(cases), "timed runs") as step:
        _time_cases(runner, record, cases, options, budget, leaderboard, floors, step)


def _time_cases(runner, record, cases, options, budget, leaderboard, floors, step) -> None:
    for case in cases:
        step(case.label)
        result = new_case(case, options)
        try:
            # the leaderboard's obligatory correctness call before each case's timing (benchmark and
            # leaderboard modes alike): first-call costs (a kernel's lazy load, a JIT compile) stay untimed
            check_trial(runner, result, options)
            if result.passed:
                result.samples = timed(runner, result, options, budget["case"], leaderboard, HOST_CALLS)
                result.stats = calculate_stats(result.samples)
                _check_floor(result, floors, record.environment.l2_bytes if options.method == "batched" else None)
        except WorkerFailure as failure:
            result.fail(failure.reason, failure.detail)
        record.cases.append(result)
        if leaderboard and not result.passed:
            break


def _check_floor(result: CaseResult, floors: dict, resident_l2_bytes: int | None = None) -> None:
    """Faster than memory allows is a failure (GPU only; floors measured by the judge's own run).
    resident_l2_bytes (batched timing: no flush between a batch's calls) skips a case whose bytes fit
    in that L2: there an honest kernel reads them from L2, below the DRAM floor."""
    if resident_l2_bytes:
        bytes_moved = problem_folder.current().hook("bytes_moved")
        if bytes_moved is not None and bytes_moved(result.args) <= resident_l2_bytes:
            return
    floor = floors.get(result.key)
    if floor and result.stats.mean < FLOOR_FAIL_RATIO * floor["median_ns"]:
        result.fail(f"faster than memory allows: mean {result.stats.mean / 1e3:.2f} µs is below "
                    f"{FLOOR_FAIL_RATIO}x this GPU's measured floor {floor['median_ns'] / 1e3:.2f} µs "
                    "(caching, skipped work or precomputation?)")


def _warm_up(runner: Runner, result: CaseResult, options: Options, budget: tuple) -> None:
    """The leaderboard's untimed warm-up benchmark of the first case (compiles, warms clocks); its
    outputs are checked too, and a failure shows on the case itself."""
    try:
        timed(runner, result, options, budget, fresh_seeds=False)
    except WorkerFailure:
        pass


def _add_baseline(record: RunRecord, options: Options) -> None:
    """The problem module's baseline kernel on each case, timed the same way, in a harness worker."""
    from eval import baselines

    baselines.baseline_for_cases(record.cases, options, record.environment.gpu)


def finish_record(record: RunRecord, expected_cases: int) -> None:
    means = [c.stats.mean for c in record.cases if c.passed and c.stats]
    record.passed = len(means) == expected_cases and expected_cases > 0 and not record.incomplete
    record.geomean_ns = score(means, ranking_by()) if record.passed else None  # the score (task.yml's ranking_by)


def samples(runner: Runner, result: CaseResult, options: Options, n: int) -> list[float]:
    """n timed runs of one case, no stop rule, every output checked (compare and tune)."""
    return timed(runner, result, options, (n, NO_LIMIT), fresh_seeds=False)[:n]


def run_profile(submission: Path, cases: list[Case], options: Options, ncu: bool = False) -> RunRecord:
    def call(runner, result):
        check_trial(runner, result, options)  # the case's outputs judged first, as in test: a profile of a wrong kernel says so
        if result.passed:
            result.report = runner.call("profile", {"args": result.args, "ncu": ncu}).header.get("text", "")

    return run_each_case("profile", submission, cases, options, call)
