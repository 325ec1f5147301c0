"""The harness as a library: a submission (a path or its source text) in, a typed RunRecord out.

    from eval import api
    record = api.judge("submission/v5.py", "benchmark")               # this repository's problem
    record = api.judge(source_text, "test", problem="path/to/folder", cases="smoke", fail_narrow=True)
    record.passed, record.geomean_ns, [c.stats.mean for c in record.cases if c.stats]
    for line in api.judge_many(["cand1.py", source_text], "test", ["--cases", "smoke"]):
        line["id"], line["passed"], line["record"]           # as each is judged (batch's JSONL lines)

The command line (`python -m eval test|benchmark|leaderboard`) and `batch` are callers of this
module; options are checked here (ValueError with a one-line message). Same judging as the command
line: the judge outside the worker, every output checked, the sandbox, secret seeds (POPCORN_SEED)
and the faster-than-memory failure on a GPU.
"""
from __future__ import annotations

import dataclasses
import os
import queue
import tempfile
import threading
from pathlib import Path
from typing import Iterable, Iterator

from eval import cases as case_files
from eval import problem_folder, sol
from eval.judge import modes
from eval.records import RunRecord

MODES = ("test", "benchmark", "leaderboard")
EXIT_FAIL = 112  # the leaderboard's exit codes, for every command-line front end: 112 a check or case failed
EXIT_USAGE = 2  # a usage or input error (bad option, missing file, malformed task.yml or shapes.yaml)


def options(method: str | None = None, batch: int | None = None, gap_us: float = 500.0, timeout: float = 600.0,
            dist: str | None = None, fail_narrow: bool = False, emulate_blackwell: bool = False) -> modes.Options:
    """The judge's options, checked; method and batch default to what the problem's evaluator does."""
    declared = problem_folder.current().timing
    method = method or declared.method
    batch = batch if batch is not None else declared.batch
    if method not in ("per-call", "batched"):
        raise ValueError(f"timing method {method!r}: choose per-call or batched")
    if batch < 1:
        raise ValueError("--batch must be at least 1")
    if timeout <= 0:
        raise ValueError("--timeout must be positive")
    if gap_us < 0:
        raise ValueError("--gap-us must be >= 0")
    if dist is not None:
        choices = problem_folder.current().hook("DISTRIBUTIONS")
        if not choices:
            raise ValueError(f"--dist {dist}: this problem defines no data distributions (DISTRIBUTIONS in its problem.py)")
        if dist not in choices:
            raise ValueError(f"--dist {dist}: choose one of {', '.join(choices)}")
    return modes.Options(timeout=timeout, method=method, batch=batch, gap_us=gap_us, dist=dist,
                         fail_narrow=fail_narrow, emulate_blackwell=emulate_blackwell)


def judge(submission: str | Path, mode: str = "test", problem: str | Path | None = None,
          cases: str | list | None = None, runner: modes.Runner | None = None, **option_values) -> RunRecord:
    """Judge one submission. submission: a file, or the source text of one (anything containing a
    newline); a relative path is looked up in the current folder, then in the problem folder. cases: a set name (tests, benchmarks, or one of shapes.yaml's), a list of case dicts,
    or the mode's own set. Benchmark records carry where each case stands against the memory."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
    if problem is not None:
        problem_folder.use(problem)
    if problem_folder.current().own_evaluator is not None:  # a folder of its own contract (princeton's)
        return _own_contract(submission, mode, cases, options(**option_values))
    chosen = _cases(cases, "tests" if mode == "test" else "benchmarks")
    judged_options = options(**option_values)
    if isinstance(submission, str) and "\n" in submission:
        with tempfile.TemporaryDirectory(prefix="eval-api-") as folder:
            os.chmod(folder, 0o755)  # readable by the worker's own uid (else the judge keeps it root)
            path = Path(folder) / "submission.py"
            path.write_text(submission)
            path.chmod(0o644)
            return _judge(path, mode, chosen, judged_options, runner)
    return _judge(_locate(Path(submission)), mode, chosen, judged_options, runner)


def judge_many(submissions: Iterable[str | Path], mode: str = "test", args: Iterable[str] = (),
               jsonl: str | Path | None = None, jobs: int | None = None, limit: float = 1800.0) -> Iterator[dict]:
    """Judge many candidates as `batch` does (one judge process kept per GPU slot across its
    candidates, fresh workers for each, every record at full sandbox unless a level is chosen) and yield each one's line as soon
    as it is judged, in finishing order: batch's JSONL line (id, sha256, passed, reason, geomean_ns,
    seconds, device, record: the record `judge` would give as JSON). submissions: paths or source
    texts; args: the command line's options for `mode` (e.g. ["--cases", "smoke"]); jsonl: where the
    lines are kept (a resume judges only candidates not there yet; default: a temporary file). Read
    it to the end: leaving early waits for the candidates already started."""
    from eval import batch

    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
    with tempfile.TemporaryDirectory(prefix="eval-many-") as scratch:
        os.chmod(scratch, 0o711)
        sources = Path(scratch) / "sources"
        candidates: list = []
        for number, item in enumerate(submissions):
            if isinstance(item, str) and "\n" in item:
                path = batch._store_source(sources, item.encode())
                candidates.append(batch.Candidate(f"source-{number}", path, batch._sha(item.encode())))
            else:
                candidates += batch.collect([_locate(Path(item))], sources)
        out = Path(jsonl) if jsonl else Path(scratch) / "lines.jsonl"
        lines: queue.Queue = queue.Queue()
        end = object()

        def judge_all():
            try:
                batch.run(candidates, mode, list(args), out, jobs, limit, progress=lines.put)
            finally:
                lines.put(end)

        thread = threading.Thread(target=judge_all, name="eval-judge-many", daemon=True)
        thread.start()
        try:
            while (line := lines.get()) is not end:
                yield line
        finally:
            thread.join()


def _own_contract(submission, mode: str, cases, judged_options: modes.Options) -> RunRecord:
    """A folder without task.py, judged by its own evaluator in a sandboxed worker (own_contract.py)."""
    from eval.judge import own_contract

    if isinstance(submission, str) and "\n" in submission:
        raise ValueError("a folder of its own contract judges a file: give the submission's path")
    last = cases == "benchmarks:-1"  # conform: the ranked case only, where ranking_by is last
    cases = "benchmarks" if last else cases
    if cases not in (None, "tests", "benchmarks") and not isinstance(cases, list):
        raise ValueError(f"--cases {cases}: a folder of its own contract runs its task.yml's tests or benchmarks only")
    path = _locate(Path(submission))
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    chosen = own_contract.cases_of("test" if cases == "tests" else "benchmark" if cases == "benchmarks" else mode) \
        if not isinstance(cases, list) else [dict(c) for c in cases]
    chosen = chosen[-1:] if last else chosen
    if mode == "leaderboard":  # never judged below full unless the user chose the level
        judged_options = dataclasses.replace(judged_options, require_full_sandbox=True)
    return own_contract.judge(path, mode, judged_options, chosen)


def _locate(path: Path) -> Path:
    """A submission path as given (relative to the current folder), else relative to the problem
    folder (`submission/v5.py` from any folder)."""
    if path.is_absolute() or path.exists():
        return path
    inside = problem_folder.current().root / path
    return inside if inside.exists() else path


def _cases(cases, default: str) -> list:
    if cases is None or isinstance(cases, str):
        return case_files.select_cases(cases or default)
    return [case_files.make_case(dict(c)) for c in cases]


def _judge(path: Path, mode: str, chosen: list, judged_options: modes.Options, runner) -> RunRecord:
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    if mode == "test":
        return modes.run_tests(path, chosen, judged_options, runner)
    if mode == "leaderboard":  # never judged below full unless the user chose the level
        judged_options = dataclasses.replace(judged_options, require_full_sandbox=True)
    record = modes.run_benchmarks(path, chosen, judged_options, leaderboard=mode == "leaderboard", runner=runner)
    sol.annotate(record)
    return record
