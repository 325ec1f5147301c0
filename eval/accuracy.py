"""Realistic data: a submission's accuracy against the exact (unquantized) product, with metrics the
problem module computes (`accuracy(args, output)`, on its ACCURACY_OVERRIDES data, e.g. quantized
Gaussian inputs). The worker only runs the kernel (one untimed call, no canary); the
judge regenerates the data and computes every number here."""
from __future__ import annotations

import torch

from eval import problem_folder
from eval.cases import Case, ConfigError
from eval.judge import modes, verdict
from eval.records import CaseResult, RunRecord


def measure_case(runner: modes.Runner, result: CaseResult) -> None:
    problem = problem_folder.current()
    args = {**result.args, **problem.hook("ACCURACY_OVERRIDES", {})}
    step = {"seed": args["seed"], "reuse": False, "overrides": {}, "hash_args": [], "canary": []}
    params = {"cuda": torch.cuda.is_available(), "flush_l2_multiple": modes.FLUSH_L2_MULTIPLE, "steps": [step]}
    reply = runner.call("trial", {"args": args, "params": params})
    data = verdict.generate(args, args["seed"])
    done = reply.header["steps"][0]
    out = verdict.rebuild(done["out"], reply.blob, verdict.input_device(data))
    if out.problem:
        result.fail(out.problem)
        return
    passed, message = verdict.check(data, out.tensor)
    if not passed and not isinstance(out.tensor, torch.Tensor):  # a wrong structure: nothing to take statistics of
        result.fail(message)
        return
    metrics = problem.hook("accuracy")(args, out.tensor)
    result.accuracy = {**metrics, "exact_check": {"passed": passed, "message": message}}
    if not passed:
        result.fail(message)


def require() -> None:
    if problem_folder.current().hook("accuracy") is None:
        raise ConfigError("this problem has no accuracy mode: its problem.py defines no accuracy(args, output)")


def run(submission, cases: list[Case], options: modes.Options) -> RunRecord:
    require()
    return modes.run_each_case("accuracy", submission, cases, options, measure_case)


def _rows(record: RunRecord) -> list[tuple[str, list[str] | None, str]]:
    """Per case: its label, its four numbers as text (None: not measured) and its check (or error)."""
    rows = []
    for c in record.cases:
        if not c.accuracy:
            rows.append((c.label, None, f"FAIL: {c.error or ''}"))
            continue
        v, q, check = c.accuracy["vs_fp32"], c.accuracy["reference_vs_fp32"], c.accuracy["exact_check"]
        rows.append((c.label, [f"{v['rel_err']:.4f}", f"{v['pearson']:.5f}", f"{v['max_abs_err']:.3f}", f"{q['rel_err']:.4f}"],
                     "pass" if check["passed"] else f"FAIL {check['message'][:80]}"))
    return rows


def render(record: RunRecord, fmt: str = "table") -> str:
    """The table (or markdown): each case's error against the exact product, and the reference's check."""
    from eval.judge.text import for_markdown

    md = fmt == "markdown"
    text = for_markdown if md else str
    if record.error:
        return f"accuracy: FAIL: {text(record.error)}"
    note = problem_folder.current().hook("ACCURACY_NOTE", "vs fp32 = against the exact product")
    head = f"accuracy of {text(str(record.submission))} ({text(record.environment.gpu)}) {note}"
    if md:
        lines = [head, "", "| case | rel err | pearson | max abs | quant. rel | reference check |", "|---|---|---|---|---|---|"]
        for label, numbers, check in _rows(record):
            cells = numbers or [text(check), "", "", ""]
            lines.append(f"| {text(label)} | " + " | ".join(cells) + f" | {'' if numbers is None else text(check)} |")
        return "\n".join(lines)
    lines = [head, f"{'case':<22} {'rel err':>9} {'pearson':>9} {'max abs':>9} {'quant. rel':>10}  reference check"]
    for label, numbers, check in _rows(record):
        if numbers is None:
            lines.append(f"{label:<22} {check}")
            continue
        lines.append(f"{label:<22} {numbers[0]:>9} {numbers[1]:>9} {numbers[2]:>9} {numbers[3]:>10}  {check}")
    return "\n".join(lines)
