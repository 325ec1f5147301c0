"""The leaderboard's modes run from the parent process: test, benchmark, leaderboard, profile.

Each function drives one submission's worker through a list of cases and returns a plain record
(dict) that report.py formats and results.py stores. A failing case never stops the record from
being produced; the worker is restarted after any failure (a CUDA fault poisons its context).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from eval import results
from eval.cases import Case
from eval.stats import geomean
from eval.worker import DEFAULT_LOAD_TIMEOUT_S, Worker, WorkerFailure

# the leaderboard's budgets: (max repeats, max summed kernel ns) for the warm-up and for each case
BENCHMARK_BUDGET = {"warmup": (200, 1e8), "case": (200, 10e9)}
LEADERBOARD_BUDGET = {"warmup": (1000, 5e8), "case": (1000, 30e9)}


@dataclasses.dataclass
class Options:
    timeout: float = 600.0  # per case, seconds
    load_timeout: float = DEFAULT_LOAD_TIMEOUT_S
    method: str = "per-call"  # or "batched"
    batch: int = 50
    gap_us: float = 500.0
    dist: str | None = None  # data distribution override for every case
    wall_cap_s: float = 120.0
    bf16_baseline: bool = True  # time torch's BF16 GEMV on each case too (GPU only)
    log_dir: Path = results.RESULTS_DIR / "logs"


class Runner:
    """One submission's worker, restarted on demand after a failure."""

    def __init__(self, submission: Path | None, options: Options, env: dict | None = None):
        self.submission = submission
        self.options = options
        name = Path(submission).stem if submission else "harness"
        self.log_path = options.log_dir / f"{results.now_stamp()}-{results.slug(name)}.log"
        self.worker = Worker(submission, self.log_path, env)
        self.environment: dict | None = None

    def ensure(self) -> dict:
        if not self.worker.alive():
            self.environment = self.worker.start(self.options.load_timeout)
        return self.environment

    def call(self, op: str, payload: dict, timeout: float | None = None):
        self.ensure()
        try:
            return self.worker.call(op, payload, timeout or self.options.timeout)
        except WorkerFailure:
            self.worker.close()  # next call starts a fresh process
            raise

    def close(self) -> None:
        self.worker.close()


def case_args(case: Case, options: Options) -> dict:
    args = dict(case.args)
    if options.dist:
        args["dist"] = options.dist
    return args


def new_record(mode: str, submission: Path | None, runner: Runner, options: Options) -> dict:
    record = {
        "schema": results.SCHEMA_VERSION,
        "mode": mode,
        "submission": str(submission) if submission else None,
        "submission_sha256": results.file_sha256(submission) if submission and Path(submission).is_file() else None,
        "git_commit": results.git_commit(),
        "created": results.now_stamp(),
        "timing": {"method": options.method, "batch": options.batch if options.method == "batched" else None,
                   "gap_us": options.gap_us},
        "environment": {},
        "cases": [],
        "passed": False,
        "error": None,
        "log": str(runner.log_path),
    }
    try:
        record["environment"] = runner.ensure()
    except WorkerFailure as failure:
        record["error"] = f"could not load {submission}: {failure.reason}"
    return record


def run_each_case(mode: str, submission: Path | None, cases: list[Case], options: Options, call) -> dict:
    """Run call(runner, entry) -> dict for every case in one worker; a failing case is recorded with
    its reason and the others still run. `passed` when every case passed."""
    runner = Runner(submission, options)
    record = new_record(mode, submission, runner, options)
    try:
        if record["error"]:
            return record
        for case in cases:
            entry = {"spec": case.spec, "label": case.label, "args": case_args(case, options)}
            try:
                entry.update(call(runner, entry))
                entry.setdefault("status", "pass")
                if entry["status"] != "pass":
                    entry.setdefault("error", "failed")
            except WorkerFailure as failure:
                entry.update(status="fail", error=failure.reason, detail=failure.detail)
            record["cases"].append(entry)
        record["passed"] = all(c["status"] == "pass" for c in record["cases"])
        return record
    finally:
        runner.close()


def run_tests(submission: Path, cases: list[Case], options: Options, guarded: bool = True) -> dict:
    return run_each_case("test", submission, cases, options,
                         lambda runner, entry: runner.call("test", {"args": entry["args"], "guarded": guarded}))


def run_benchmarks(submission: Path, cases: list[Case], options: Options, leaderboard: bool = False) -> dict:
    """The leaderboard's benchmark (or leaderboard) mode. Leaderboard mode also runs the guard
    checks on every case and rechecks every timed run with a new seed; it stops at the first failure
    as the leaderboard does."""
    runner = Runner(submission, options)
    record = new_record("leaderboard" if leaderboard else "benchmark", submission, runner, options)
    budget = LEADERBOARD_BUDGET if leaderboard else BENCHMARK_BUDGET
    try:
        if record["error"]:
            return record
        _warm_up(runner, cases[0], options, budget["warmup"])
        for case in cases:
            entry = {"spec": case.spec, "label": case.label, "args": case_args(case, options)}
            try:
                if leaderboard:
                    runner.call("test", {"args": entry["args"], "guarded": True})
                entry.update(runner.call("benchmark", _bench_payload(entry["args"], options, leaderboard, budget["case"])))
                entry["status"] = "pass"
            except WorkerFailure as failure:
                entry.update(status="fail", error=failure.reason, detail=failure.detail)
            record["cases"].append(entry)
            if leaderboard and entry["status"] == "fail":
                break
        if options.bf16_baseline and record["environment"].get("cuda_available"):
            _add_bf16_baseline(runner, record, options)
        finish_record(record, len(cases))
        return record
    finally:
        runner.close()


def _add_bf16_baseline(runner: Runner, record: dict, options: Options) -> None:
    """The same GEMV through torch's BF16 path (cuBLAS), timed the same way: what NVFP4 replaces."""
    for entry in record["cases"]:
        if entry.get("status") == "pass":
            try:
                entry["bf16"] = runner.call("bf16", {"args": entry["args"], "gap_us": options.gap_us})
            except WorkerFailure as failure:
                entry["bf16"] = {"error": failure.reason}


def _bench_payload(args: dict, options: Options, recheck: bool, budget: tuple) -> dict:
    max_repeats, max_time_ns = budget
    return {
        "args": args,
        "recheck": recheck,
        "max_repeats": max_repeats,
        "max_time_ns": max_time_ns,
        "method": options.method,
        "batch": options.batch,
        "gap_us": options.gap_us,
        "wall_cap_ns": options.wall_cap_s * 1e9,
    }


def _warm_up(runner: Runner, case: Case, options: Options, budget: tuple) -> None:
    """The leaderboard's untimed warm-up benchmark of the first case (compiles, warms clocks)."""
    payload = _bench_payload(case_args(case, options), options, False, budget)
    payload["host_overhead"] = False
    try:
        runner.call("benchmark", payload)
    except WorkerFailure:
        pass  # the same failure is reported on the case itself


def finish_record(record: dict, expected_cases: int) -> None:
    means = [c["stats"]["mean"] for c in record["cases"] if c.get("status") == "pass"]
    record["passed"] = len(means) == expected_cases and expected_cases > 0
    record["geomean_ns"] = geomean(means) if record["passed"] else None


def run_profile(submission: Path, cases: list[Case], options: Options, ncu: bool = False) -> dict:
    return run_each_case("profile", submission, cases, options,
                         lambda runner, entry: {"report": runner.call("profile", {"args": entry["args"], "ncu": ncu})})
