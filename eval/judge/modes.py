"""The leaderboard's modes, judged in this process: test, benchmark, leaderboard, profile, and the
interleaved samples that compare and tune use.

Each mode drives one submission's worker through a list of cases and returns a RunRecord. The
worker only runs the submission; every output it produced (the untimed checks and every timed run)
is checked here against this process's own inputs, reference and canaries. A failing case never
stops the record from being produced; the worker is restarted after any failure.
"""
from __future__ import annotations

import contextlib
import dataclasses
import platform
import secrets
import time
from pathlib import Path

import torch

from eval import problem_folder, progress, results, sol
from eval.cases import Case, ranking_by
from eval.judge import blackwell, static_check, verdict
from eval.judge.channel import DEFAULT_LOAD_TIMEOUT_S, Reply, WorkerFailure, WorkerProcess  # noqa: F401 (re-exported)
from eval.records import CaseResult, Environment, RunRecord, Timing
from eval.stats import calculate_stats, score, should_stop

# (max repeats, max summed kernel ns) for the warm-up and for each case: the problem's evaluator's own
# where its file is there to read (budgets()), else these, those of nvidia/eval.py and eval_better_bench.py
BENCHMARK_BUDGET = {"warmup": (200, 1e8), "case": (200, 10e9)}
LEADERBOARD_BUDGET = {"warmup": (1000, 5e8), "case": (1000, 30e9)}
from eval.worker.driver import FLUSH_L2_MULTIPLE  # noqa: E402 (the worker allocates its flush buffer at start)
HOST_CALLS = 20  # back-to-back calls per batch for the host cost column
HOST_BATCHES = 7  # batches of HOST_CALLS; the worker reports the median batch, the judge checks every output
NO_LIMIT = 1e30
FLOOR_FAIL_RATIO = 0.9  # a mean below this fraction of the measured floor fails


@dataclasses.dataclass
class Options:
    timeout: float = 600.0  # per case, seconds
    load_timeout: float = DEFAULT_LOAD_TIMEOUT_S  # the build limit (the import is bounded by timeout otherwise)
    method: str = "per-call"  # or "batched"
    batch: int = 50
    gap_us: float = 500.0
    dist: str | None = None  # data distribution override for every case
    wall_cap_s: float = 120.0
    baseline: bool = True  # time the problem module's baseline kernel on each case too (GPU only)
    # a kernel right on the cases' own data but wrong on full-range data: the leaderboard passes it
    # (a warning names what full-range data showed); True fails it (search loops that must not
    # reward data specialisation)
    fail_narrow: bool = False
    emulate_blackwell: bool = False  # exact stand-ins for Blackwell-only calls (eval/worker/emulation.py)
    log_dir: Path = results.RESULTS_DIR / "logs"
    budget: dict | None = None  # {"warmup": (runs, ns), "case": (runs, ns)} instead of the evaluator's (`run` on CPU)
    host_cost: bool = True  # the back-to-back calls of the host-cost column


SNAPSHOT_SLACK = 16  # an output may be a view into a buffer this many times its size (or 1 MiB)


def reply_limit(op: str, payload: dict) -> int:
    """The most output bytes a request can bring back: snapshots (and their synced copies) of
    every call it makes, each at most SNAPSHOT_SLACK times the reference's output. A reply beyond
    that is refused before it is read."""
    params = payload.get("params") or {}
    if op == "trial":
        calls = len(params.get("steps", []))
    elif op == "runs" and params.get("check"):
        calls = int(params["max_repeats"]) * int(params["batch"]) + int(params.get("host_calls", 0)) * HOST_BATCHES
    else:
        return 0
    per_call = max(SNAPSHOT_SLACK * case_profile(payload["args"]).output_bytes, 1 << 20)
    return 2 * calls * per_call


def _say_if_building() -> None:
    """A progress line before the harness's compiled loop is built (once per machine, minutes)."""
    from eval.worker import build

    name = build.module_name()
    if progress.enabled() and not (build.cache_root() / "native" / name / f"{name}.so").is_file():
        progress.phase("building the harness's C++ timing loop (once per machine: 1-2 minutes on a small CPU)")


class Runner:
    """One submission's worker, restarted on demand after a failure."""

    def __init__(self, submission: Path | None, options: Options):
        self.submission = submission
        self.options = options
        name = Path(submission).stem if submission else "harness"
        self.log_path = options.log_dir / f"{results.now_stamp()}-{results.slug(name)}.log"
        self.worker = WorkerProcess(submission, self.log_path, emulate=options.emulate_blackwell)
        self.info: dict = {}

    def ensure(self) -> dict:
        if not self.worker.alive():
            _say_if_building()
            progress.phase(f"starting a worker: importing {Path(self.submission).name if self.submission else 'the harness'}"
                           " (builds included)")
            self.info = self.worker.start(self.options.load_timeout, import_timeout=self.options.timeout)
        return self.info

    def call(self, op: str, payload: dict, timeout: float | None = None) -> Reply:
        self.ensure()
        try:
            return self.worker.request(op, payload, timeout or self.options.timeout, blob_limit=reply_limit(op, payload))
        except WorkerFailure:
            self.worker.close()  # next call starts a fresh process
            raise

    def close(self) -> None:
        self.worker.close()


# -- the machine, seen from the judge -------------------------------------------------------------

def describe_environment(sandbox: dict | None = None) -> Environment:
    from importlib.metadata import PackageNotFoundError, version

    def package(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    env = Environment(python=platform.python_version(), torch=torch.__version__, host=platform.node(),
                      cutlass_dsl=package("nvidia-cutlass-dsl"), triton=package("triton"),
                      cuda_available=torch.cuda.is_available(), sandbox=dict(sandbox or {}))
    if env.cuda_available:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.gpu, env.sm_count, env.capability = props.name, props.multi_processor_count, f"{props.major}.{props.minor}"
        env.l2_bytes, env.memory_bytes, env.cuda_runtime = props.L2_cache_size, props.total_memory, torch.version.cuda
        env.driver, env.timer = _driver_version(), "cuda-events"
    else:
        env.gpu, env.timer = "CPU (no CUDA)", "host-clock (no CUDA)"
    return env


def _driver_version():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        return None


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


def explain_arch_failures(record: RunRecord) -> None:
    """On a GPU older than the contest's: name the Blackwell-only feature behind a failure (the
    original message moves to the detail)."""
    env = record.environment
    if not env.cuda_available and record.submission and not record.passed:
        _explain_missing_gpu(record)
    if not env.cuda_available or not record.submission:
        return
    try:
        source = Path(record.submission).read_text(errors="replace")
    except OSError:
        return
    emulated = bool(record.timing.emulated)
    if emulated:  # the flag is on: what failed under emulation is the reason, never "add the flag"
        feature = blackwell.find(source)
        seen = f" (the source uses {feature.what}, line {feature.line}" + (
            ", which emulation covers)" if feature.emulated else ", which emulation does not cover)") if feature else ""
    for holder in [record, *record.cases]:
        message = holder.error
        if emulated and message and not message.startswith(("under --emulate-blackwell",) + blackwell.RAN):
            holder.error = f"under --emulate-blackwell: {message}{seen}"
            continue
        reason = blackwell.explain(source, message or "", env.capability, env.gpu) if message else None
        if reason:
            holder.error = reason
            if hasattr(holder, "detail"):
                holder.detail = f"{message}\n{holder.detail}".strip()


def _explain_missing_gpu(record: RunRecord) -> None:
    """Without CUDA, a submission that needs a GPU (it builds CUDA, or imports Triton or the CuTe
    DSL) fails every case: the record says so in its first line, with the first case's own reason."""
    from eval.submissions import needs

    try:
        wanted = needs(Path(record.submission))
    except OSError:
        return
    if "cuda" not in wanted:
        return
    first = record.error or next((c.error for c in record.cases if c.error), None)
    uses = ", ".join(sorted(wanted - {"cuda"})) or "CUDA code"
    record.error = (f"this submission needs a CUDA GPU (it uses {uses}) and this machine has none"
                    + (f"; first failure: {first}" if first else ""))


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
            for case in cases if not record.error else []:
                step(case.label)
                result = new_case(case, options)
                try:
                    call(runner, result)
                except WorkerFailure as failure:
                    result.fail(failure.reason, failure.detail)
                record.cases.append(result)
        except (KeyboardInterrupt, SystemExit) as stop:
            mark_incomplete(record, stop, len(cases))
    record.passed = not record.incomplete and not record.error and bool(record.cases) and all(c.passed for c in record.cases)
    explain_arch_failures(record)
    return record


# -- test: the untimed anti-cheat calls -----------------------------------------------------------

def _random_seed() -> int:
    return secrets.randbits(47)


def canaries(args: dict) -> list:
    regions = problem_folder.current().hook("canary_regions")
    return regions(args) if regions else []


def trial_steps(args: dict) -> list[dict]:
    """The calls an honest kernel must survive: the case's own input (every input tensor hashed after
    it), new data in the same buffers, new buffers, and full-range data where the problem has it."""
    every = list(range(case_profile(args).items))
    steps = [
        {"seed": args["seed"], "reuse": False, "overrides": {}, "hash_args": every, "canary": canaries(args)},
        {"seed": _random_seed(), "reuse": True, "overrides": {}, "hash_args": [], "canary": canaries(args)},
        {"seed": _random_seed(), "reuse": False, "overrides": {}, "hash_args": [], "canary": canaries(args)},
    ]
    full = problem_folder.current().hook("FULL_RANGE")
    if full:
        steps.append({"seed": _random_seed(), "reuse": False, "overrides": dict(full), "hash_args": [],
                      "canary": canaries({**args, **full})})
    return steps


STEP_CONTEXT = (
    "",
    "wrong result when called again with new data in the same buffers (a result cached from an earlier call?): ",
    "wrong result when called a third time with new buffers (cached result?): ",
)


def check_trial(runner: Runner, result: CaseResult, options: Options, config=None) -> None:
    """Run the trial steps in the worker and judge each here; the first wrong one fails the case.
    config: a tunable submission's launch configuration (run_with) instead of custom_kernel."""
    steps = trial_steps(result.args)
    params = {"cuda": torch.cuda.is_available(), "flush_l2_multiple": FLUSH_L2_MULTIPLE, "steps": steps}
    payload = {"args": result.args, "params": params}
    if config is not None:
        payload["config"] = config
    reply = runner.call("trial", payload)
    for i, (step, done) in enumerate(zip(steps, reply.header.get("steps", []))):
        data = verdict.apply_canary(verdict.generate(result.args, step["seed"], step["overrides"]), step["canary"],
                                    done["canary"])
        reason = verdict.judge_output(data, done["out"], reply.blob, done.get("synced"))
        if reason is None and i == 0:
            reason = _modified_input(data, done.get("hashes", {}), result.args)
        if reason is None:
            continue
        if i == 3:
            note = problem_folder.current().hook("NARROW_NOTE", "correct only on the cases' own data distribution")
            narrow = f"{note}: {reason}"
            if options.fail_narrow:
                result.fail(narrow)
                return
            result.warnings.append(narrow)
            continue
        result.fail(STEP_CONTEXT[i] + reason)
        return
    if len(reply.header.get("steps", [])) < len(steps) and result.passed:
        result.fail("the worker stopped the checks early")


def _modified_input(data, hashes: dict, args: dict) -> str | None:
    """The first input tensor whose bytes changed in the call, other than its output buffers (see
    CaseProfile.outputs). Built to catch one cheat: work done on an input in place (decoded, reordered,
    partly reduced) that a later call on the same buffer would reuse; the reason says so."""
    problem = problem_folder.current()
    items, keys = problem_folder.flatten(data)
    writable = case_profile(args).outputs | set(problem.hook("WRITABLE_INPUTS", ()))
    for index, item in enumerate(items):
        if index in writable or not isinstance(item, torch.Tensor):
            continue
        if hashes.get(str(index)) != verdict.input_hash(item):
            return (f"modified its input `{problem.input_name(index, keys)}` (work done in place on an input "
                    f"carries over to the next call on that buffer): custom_kernel may write only its "
                    f"output{_writable_names(problem, writable, keys)}")
    return None


@dataclasses.dataclass(frozen=True)
class CaseProfile:
    """What the judge learns from the case's own input and one ref_kernel call on it."""
    items: int  # entries of generate_input's result (tuple/list items, dict values)
    reference_writes: frozenset  # the inputs ref_kernel writes (a pre-allocated output, as in vectoradd)
    output_bytes: int  # the size of ref_kernel's output
    # inputs a kernel may write: those ref_kernel writes; those whose contents generate_input leaves
    # undefined (torch.empty: they differ between two generations); and the leaderboard's convention
    # of a pre-allocated output passed last, shaped like ref_kernel's output (any dtype), which the reference
    # may ignore (matmul, prefixsum) while a solution writes it and returns it, or leaves it alone
    outputs: frozenset = frozenset()


_PROFILES: dict = {}


def case_profile(args: dict) -> CaseProfile:
    key = (problem_folder.current().root, tuple(sorted((k, repr(v)) for k, v in args.items())))
    if key not in _PROFILES:
        data = verdict.generate_undefined_filled(args, args["seed"])
        items = verdict.tensors_of(data)
        before = [verdict.input_hash(t) if isinstance(t, torch.Tensor) else None for t in items]
        again = verdict.tensors_of(verdict.generate_undefined_filled(args, args["seed"]))
        undefined = {i for i, t in enumerate(again) if before[i] is not None and isinstance(t, torch.Tensor)
                     and verdict.input_hash(t) != before[i]}
        del again
        out = verdict.reference().ref_kernel(data)
        written = frozenset(i for i, t in enumerate(items) if before[i] is not None and verdict.input_hash(t) != before[i])
        outputs = out if isinstance(out, (tuple, list)) else [out]
        shapes = {tuple(t.shape) for t in outputs if isinstance(t, torch.Tensor)}  # dtype may differ (prefixsum)
        tensors = [i for i, t in enumerate(items) if isinstance(t, torch.Tensor)]
        last = {tensors[-1]} if tensors and tuple(items[tensors[-1]].shape) in shapes else set()
        size = sum(t.numel() * t.element_size() for t in outputs if isinstance(t, torch.Tensor))
        _PROFILES[key] = CaseProfile(len(items), written, size, frozenset(written | undefined | last))
    return _PROFILES[key]


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

def runs_params(args: dict, options: Options, budget: tuple, fresh_seeds: bool, host_calls: int = 0,
                check: bool = True) -> dict:
    cuda = torch.cuda.is_available()
    max_repeats, max_time_ns = budget
    return {
        "cuda": cuda, "flush": cuda, "wait_ns": float(options.gap_us) * 1e3, "flush_l2_multiple": FLUSH_L2_MULTIPLE,
        "canary": canaries(args) if check else [], "check": check, "seed": int(args["seed"]),
        "fresh_seeds": fresh_seeds, "batch": options.batch if options.method == "batched" else 1,
        "max_repeats": int(max_repeats), "max_time_ns": float(max_time_ns), "wall_cap_ns": float(options.wall_cap_s) * 1e9,
        "host_calls": host_calls if options.host_cost else 0,
    }


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
    and every call of the host-cost batches."""
    regions = reply.header["params"]["canary"]
    inputs = Inputs(args, held=int(reply.header["params"]["batch"]))
    samples = []
    for i, run in enumerate(reply.header.get("runs", [])):
        samples.append(float(run["ns"]))
        for call in run["calls"]:
            data = inputs.after_canary(int(call["seed"]), regions, call["canary"])
            if "out" not in call:
                continue  # unchecked harness kernels (floors, baselines)
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
    return samples, None


def timed(runner: Runner, result: CaseResult, options: Options, budget: tuple, fresh_seeds: bool,
          host_calls: int = 0) -> list[float]:
    """The timed runs of one case, every output judged; raises WorkerFailure with the reason. One
    request, unless the outputs of all runs would not fit one reply (large outputs): then requests of
    as many runs as fit, with the leaderboard's stop rule applied again over all of them."""
    max_repeats, max_time_ns = budget
    chunk = runs_per_reply(result.args, options, max_repeats)
    samples: list[float] = []
    started = time.monotonic_ns()
    while len(samples) < max_repeats:
        n = min(chunk, max_repeats - len(samples))
        params = runs_params(result.args, options, (n, max(max_time_ns - sum(samples), 1.0)), fresh_seeds,
                             host_calls if not samples else 0)
        reply = runner.call("runs", {"args": result.args, "params": params})
        try:
            got, reason = judge_runs(reply, result.args)
        except verdict.Tampered as exc:
            runner.close()
            raise WorkerFailure(str(exc))
        if reason:
            raise WorkerFailure(reason)
        if reply.header.get("host_ns", -1) > 0:
            result.host_us = reply.header["host_ns"] / 1e3
        samples += got
        if chunk >= max_repeats or not got or should_stop(samples, time.monotonic_ns() - started, max_time_ns,
                                                          options.wall_cap_s * 1e9):
            break
    return samples


MAX_REPLY_BYTES = 256 << 20  # output snapshots one reply may carry


def runs_per_reply(args: dict, options: Options, max_repeats: int) -> int:
    """How many runs' output snapshots fit one reply (sized by the reference's own output)."""
    per_run = 2 * max(1, case_profile(args).output_bytes) * (options.batch if options.method == "batched" else 1)  # + synced
    return max(1, min(max_repeats, MAX_REPLY_BYTES // per_run))


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
        result.report = runner.call("profile", {"args": result.args, "ncu": ncu}).header.get("text", "")

    return run_each_case("profile", submission, cases, options, call)
