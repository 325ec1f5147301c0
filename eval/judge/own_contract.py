"""A problem folder of its own contract (no task.py, no custom_kernel(data): princeton's
cross_entropy_py, whose submission defines cross_entropy_forward/backward and whose eval.py checks
them): judged by the folder's own evaluator, run inside a sandboxed worker the way the leaderboard's
runner runs it (eval/worker/driver.py op_evaluate), its key: value lines read back here into a record.

What the verdict rests on is that evaluator's own checks: the harness's (input hashing, canaries,
every timed output checked, the off-stream watch) need the custom_kernel(data) contract and do not
apply; the record says so in a warning on every case. The sandbox does apply. Judge side: never
loads submission code.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from eval import problem_folder, results
from eval.judge.cannot_run import mark_cannot_run
from eval.judge.runner import Options, Runner, describe_environment
from eval.judge.wire import WorkerFailure, _parse_info
from eval.records import CaseResult, RunRecord, Timing
from eval.stats import Stats

WARNING = ("judged by the folder's own evaluator ({evaluator}, its own contract: no task.py), inside the worker's "
           "sandbox; the harness's own checks need custom_kernel(data) and did not run")


def spec_line(case: dict) -> str:
    """One case as the runner writes it: "key: value; ..." in task.yml's order."""
    return "; ".join(f"{k}: {v}" for k, v in case.items())


def cases_of(mode: str) -> list[dict]:
    """task.yml's tests (test) or benchmarks (benchmark, leaderboard), as the runner passes them."""
    task = yaml.safe_load(problem_folder.current().task_file.read_text()) or {}
    return [dict(c) for c in (task.get("tests" if mode == "test" else "benchmarks") or []) if isinstance(c, dict)]


def judge(submission: Path, mode: str, options: Options, cases: list[dict] | None = None) -> RunRecord:
    """The folder's own evaluator on submission, in a sandboxed worker; its verdict as a record."""
    problem = problem_folder.current()
    evaluator = problem_folder.staging(problem.root).evaluator
    cases = cases_of(mode) if cases is None else cases
    runner = Runner(submission, options)
    runner.worker.defer_import = True
    record = RunRecord(mode=mode, submission=str(submission), created=results.now_stamp(),
                       submission_sha256=results.file_sha256(submission), git_commit=results.git_commit(),
                       log=str(runner.log_path), timing=Timing(options.method, None, options.gap_us),
                       specs=[spec_line(c) for c in cases])
    info: dict = {}
    fields: dict = {}
    code = None
    try:
        info = runner.ensure()
        reply = runner.call("evaluate", {"mode": mode, "cases": "".join(spec_line(c) + "\n" for c in cases)})
        answer = _parse_info(reply.header.get("text"))
        code, fields = answer.get("exit"), popcorn_fields(str(answer.get("popcorn") or ""))
    except WorkerFailure as failure:
        record.error = f"the folder's evaluator ({evaluator}) did not finish: {failure.reason}"
    finally:
        runner.close()
    record.import_s = runner.worker.import_s
    record.environment = describe_environment(info.get("sandbox"))
    if record.error is None:
        fill(record, fields, code, cases, WARNING.format(evaluator=evaluator))
    mark_cannot_run(record)
    record.passed = not record.error and fields.get("check") == "pass" and code in (0, None) and not record.cannot_run
    return record


def popcorn_fields(text: str) -> dict:
    """The evaluator's "key: value" lines (the last of a key wins, as the runner reads them)."""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip():
            fields[key.strip()] = value.strip()
    return fields


def fill(record: RunRecord, fields: dict, code, cases: list[dict], warning: str) -> None:
    """Cases and the verdict from the evaluator's lines (test.N.* or benchmark.N.*, times in ns)."""
    prefix = "test" if record.mode == "test" else "benchmark"
    count = _int(fields.get(f"{prefix}-count"))
    count = len(cases) if count is None else count
    for i in range(count):
        spec = fields.get(f"{prefix}.{i}.spec") or (spec_line(cases[i]) if i < len(cases) else f"case {i}")
        case = CaseResult(spec=spec, label=spec, args=dict(cases[i]) if i < len(cases) else {})
        case.warnings.append(warning)
        status = fields.get(f"{prefix}.{i}.status", "pass" if f"{prefix}.{i}.mean" in fields else "")
        if status != "pass":
            case.fail(fields.get(f"{prefix}.{i}.error") or fields.get(f"{prefix}.{i}.message")
                      or f"the evaluator reported no result for this case (status {status or 'missing'})")
        else:
            case.detail = fields.get(f"{prefix}.{i}.message", "")
        mean = _float(fields.get(f"{prefix}.{i}.mean"))
        if mean is not None:
            case.stats = Stats(runs=_int(fields.get(f"{prefix}.{i}.runs")) or 0, mean=mean,
                               std=_float(fields.get(f"{prefix}.{i}.std")) or 0.0,
                               err=_float(fields.get(f"{prefix}.{i}.err")) or 0.0,
                               best=_float(fields.get(f"{prefix}.{i}.best")) or mean,
                               worst=_float(fields.get(f"{prefix}.{i}.worst")) or mean, median=mean)
        record.cases.append(case)
    if fields.get("check") != "pass":
        failed = next((c.error for c in record.cases if c.error), None)
        record.error = (fields.get("error") or failed
                        or f"the folder's evaluator exited with code {code} without check: pass")


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
