"""Why a run was not judged here, or failed for want of what this GPU lacks (judge side; reads a
submission's source only as text): a missing package or CUDA GPU (eval/needs.py) is "cannot run
here: needs ...", never a failing verdict; on a GPU older than the contest's, a failure explained by
a Blackwell-only feature is named with its line and the way out (eval/judge/blackwell.py), and after
the first such case the rest are not run (the same build fails alike on every case).
Owns those decisions over a finished record; runs nothing.
"""
from __future__ import annotations

from pathlib import Path

import torch

from eval import needs
from eval.judge import blackwell
from eval.judge.runner import Options
from eval.records import CaseResult, RunRecord


def explain_arch_failures(record: RunRecord) -> None:
    """On a GPU older than the contest's: name the Blackwell-only feature behind a failure (the
    original message moves to the detail)."""
    env = record.environment
    if not env.cuda_available and record.submission and not record.passed and not record.cannot_run:
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
        if emulated and message and not message.startswith(("under --emulate-blackwell", needs.PREFIX) + blackwell.RAN):
            holder.error = f"under --emulate-blackwell: {message}{seen}"
            continue
        reason = blackwell.explain(source, message or "", env.capability, env.gpu) if message else None
        if reason:
            holder.error = reason
            if hasattr(holder, "detail"):
                holder.detail = f"{message}\n{holder.detail}".strip()
            _blackwell_cannot_run(record, source)
    if emulated:
        _uncovered_cannot_run(record, source)


def _uncovered_cannot_run(record: RunRecord, source: str) -> None:
    """Under --emulate-blackwell, a file built on a Blackwell-only feature that emulation does not
    cover (CuTe DSL tcgen05 atoms, CUTLASS SM100 kernels) that failed without running: not a verdict
    either ("cannot run here: needs a Blackwell GPU ..."), as on the leaderboard's own evaluator here."""
    feature = blackwell.find(source)
    if record.cannot_run or feature is None or feature.emulated:
        return
    failures = [h.error for h in [record, *record.cases] if h.error]
    if not failures or any(f.removeprefix("under --emulate-blackwell: ").startswith(blackwell.RAN) for f in failures):
        return
    record.cannot_run = (f"a Blackwell GPU ({feature.needs}) for {feature.what}, line {feature.line}, "
                         f"which --emulate-blackwell does not cover")
    record.error = f"{needs.PREFIX}needs {record.cannot_run}"
    record.passed = False


def _blackwell_cannot_run(record: RunRecord, source: str) -> None:
    """A failure explained by a Blackwell-only feature on an older GPU, with no emulation on: not a
    verdict ("cannot run here: needs a Blackwell GPU ..."); the explanation stays in the case."""
    feature = blackwell.find(source)
    if record.cannot_run or feature is None:
        return
    record.cannot_run = (f"a Blackwell GPU ({feature.needs}) for {feature.what}, line {feature.line}"
                         + (", or --emulate-blackwell, which covers it" if feature.emulated else ""))
    record.error = f"{needs.PREFIX}needs {record.cannot_run}"
    record.passed = False


def _missing_blackwell(record: RunRecord, result: CaseResult, options: Options) -> bool:
    """A case failed the way a Blackwell-only file fails on an older GPU without the flag."""
    env = record.environment
    if options.emulate_blackwell or not env.cuda_available or not record.submission or not result.error:
        return False
    try:
        source = Path(record.submission).read_text(errors="replace")
    except OSError:
        return False
    return blackwell.explain(source, result.error, env.capability, env.gpu or "") is not None and \
        blackwell.ARCH_FAILURE.search(result.error) is not None


def lacking(text: str, record: RunRecord) -> str | None:
    """What this machine lacks for the run, read from one failure's text (None: a real failure)."""
    if needs.PREFIX + "needs " in text:
        return text.split(needs.PREFIX + "needs ", 1)[1].split(" (the problem's", 1)[0]
    beside = Path(record.submission).parent if record.submission else None
    return needs.what_is_missing(text, torch.cuda.is_available(), beside)


def mark_cannot_run(record: RunRecord) -> None:
    """Where the load or a case failed for want of what this machine lacks (a package that is not
    installed, a CUDA GPU: eval/needs.py), the run was not judged: record.cannot_run says what it
    needs and record.error says "cannot run here: needs ..." (never a failing verdict)."""
    if record.cannot_run:
        return
    texts = [record.error or ""] + [f"{c.error or ''} {c.detail or ''}" for c in record.cases if not c.passed]
    for text in texts:
        missing = lacking(text, record)
        if missing:
            record.cannot_run = missing
            record.error = f"{needs.PREFIX}needs {missing}"
            record.passed = False
            return


def reference_lacks() -> str | None:
    """What this machine lacks to import the problem's reference.py (the problem's code, imported in
    the judge as it is for every case: a package it imports, e.g. amd_202602's aiter), or None. Any
    other failure is left to the run, which reports it."""
    from eval import problem_folder

    try:
        problem_folder.current().reference
    except Exception as exc:  # noqa: BLE001 - the problem's code, whatever it raises
        return needs.what_is_missing(f"{type(exc).__name__}: {exc}", torch.cuda.is_available())
    return None


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
