"""Turning a run record into text: a rich table, JSON, the leaderboard's popcorn lines, markdown.

Every text that may come from a submission (reasons, warnings, the profile table) is printed as data:
one line (eval/judge/text.py), escaped for the format; the profile table's lines are indented."""
from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table

from eval import problem_folder
from eval.judge.text import for_markdown, for_rich, one_line
from eval.records import RunRecord
from eval.stats import Stats

FORMATS = ("table", "json", "popcorn", "markdown")


def render(record: RunRecord, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(record.to_json(), indent=1, default=str)
    if fmt == "popcorn":
        return popcorn(record)
    if fmt == "markdown":
        return markdown(record)
    return table(record)


def _us(ns) -> str:
    return "—" if ns is None else f"{ns / 1e3:.2f}"


HOST_TIMER = "HOST TIMER: CPU wall time, not GPU kernel time"


def host_timer(record: RunRecord) -> bool:
    """Times taken with the host clock (no CUDA): every output says so."""
    return not record.environment.cuda_available


def gb_s(record: RunRecord, sol) -> str:
    """Bytes moved per second of a GPU time; none for a host-clock time (not the GPU's bandwidth)."""
    return f"{sol.gb_s:.0f}" if sol and not host_timer(record) else "—"


def log_line(record: RunRecord) -> str | None:
    """Where the worker's log is (its stderr, a traceback), for a record that failed."""
    from pathlib import Path

    if record.passed or not record.log or not Path(record.log).is_file():
        return None
    from eval.results import shown

    return f"log: {shown(record.log)}"


def _layer_on(value) -> bool:
    return str(value).startswith(("on", "one", "dropped", "n/a"))


def timer_note(record: RunRecord) -> str:
    env = record.environment
    where = env.gpu
    if env.sm_count:
        where += f", {env.sm_count} SMs, capability {env.capability}"
    method = record.timing.method + (f" ({record.timing.batch} inputs per sample)" if record.timing.method == "batched" and record.timing.batch else "")
    note = f"device: {where}; timer: {env.timer or '?'}; method: {method}"
    if record.import_s is not None:
        note += f"; import (builds included): {record.import_s:.1f} s"
    if env.sandbox:
        level = str(env.sandbox.get('sandbox level', 'off') if not env.sandbox.get('sandbox') else 'off').split(' ')[0].rstrip(':')
        gaps = [k for k, v in env.sandbox.items() if k != "sandbox level" and not _layer_on(v)]
        note += f"; sandbox: {level}" + (f", incomplete ({', '.join(gaps)}: see the warning)" if gaps else "")
    if env.timer and not env.cuda_available:
        note += f"\n[{HOST_TIMER}]"  # a line of its own: never cut by a narrow terminal's wrap
    return note


def notes(record: RunRecord) -> list[str]:
    """Warnings that belong under every format: sandbox gaps, static findings, narrow data."""
    lines = []
    if record.incomplete:
        lines.append(f"INCOMPLETE: {one_line(record.incomplete)}: the cases measured so far are kept")
    if record.timing.emulated:
        lines.append("EMULATED (--emulate-blackwell): " + "; ".join(map(one_line, record.timing.emulated))
                     + ": a correctness verdict; these times are emulated, not B200 times")
    if record.timing.reference_emulated:
        lines.append("REFERENCE EMULATED: " + "; ".join(map(one_line, record.timing.reference_emulated))
                     + ": outputs are checked against it")
    level = str(record.environment.sandbox.get("sandbox level", "full"))
    if level != "full":  # never silently below full (eval/judge/levels.py)
        lines.append(f"SANDBOX BELOW FULL: {one_line(level)}")
    missing = [f"{one_line(k)}: {one_line(v)}" for k, v in record.environment.sandbox.items()
               if k != "sandbox level" and not _layer_on(v)]
    if missing:  # the level's layers were asked for; this machine could not apply these (python -m eval doctor)
        lines.append(f"warning: worker sandbox incomplete at level {one_line(level)} (" + "; ".join(missing) + ")")
    lines += [f"warning: {one_line(finding)}" for finding in record.static]
    for case in record.cases:
        lines += [f"warning {case.label}: {one_line(w)}" for w in case.warnings]
    return lines


# -- popcorn (the leaderboard's key: value lines) -------------------------------------------------

def popcorn(record: RunRecord) -> str:
    lines = [f"# {line}" for line in notes(record) if line.startswith(("EMULATED", "SANDBOX", "INCOMPLETE"))]
    timer = [f"# {HOST_TIMER}"] if host_timer(record) else []  # before the check line, as the counts come first
    if record.error:  # the submission did not load: every case asked for fails with that reason
        kind = "test" if record.mode == "test" else "benchmark"
        status = "cannot run here" if record.cannot_run else "fail"  # no failing verdict (as the table says)
        lines.append(f"{kind}-count: {len(record.specs)}")
        for i, spec in enumerate(record.specs):
            lines += [f"{kind}.{i}.spec: {spec}", f"{kind}.{i}.status: {status}", f"{kind}.{i}.error: {one_line(record.error)}"]
        lines.append(f"error: {one_line(record.error)}")
        if log_line(record):
            lines.append(f"# {log_line(record)}")
        return "\n".join([*lines, *timer, f"check: {status}"])
    if record.mode == "test":
        lines.append(f"test-count: {len(record.cases)}")
        for i, case in enumerate(record.cases):
            lines.append(f"test.{i}.spec: {case.spec}")
            lines.append(f"test.{i}.status: {case.status}")
            if not case.passed:
                lines.append(f"test.{i}.error: {one_line(case.error)}")
    else:
        lines.append(f"benchmark-count: {len(record.cases)}")
        for i, case in enumerate(record.cases):
            lines.append(f"benchmark.{i}.spec: {case.spec}")
            if case.passed and case.stats:
                for name in Stats.POPCORN_FIELDS:
                    lines.append(f"benchmark.{i}.{name}: {getattr(case.stats, name)}")
            elif case.passed and case.report is not None:
                lines.append(f"benchmark.{i}.report: {case.report!r}")
            else:
                lines.append(f"benchmark.{i}.status: fail")
                lines.append(f"benchmark.{i}.error: {one_line(case.error)}")
    if log_line(record):
        lines.append(f"# {log_line(record)}")
    lines += timer
    lines.append(f"check: {'pass' if record.passed else 'fail'}")
    return "\n".join(lines)


# -- rich table -----------------------------------------------------------------------------------

def table(record: RunRecord) -> str:
    console = Console(file=io.StringIO(), width=160, force_terminal=False, color_system=None)
    title = for_rich(f"{record.mode}: {record.submission}")
    if record.error:
        console.print(f"{title}\n{'' if record.cannot_run else 'FAIL: '}{one_line(record.error)}", markup=False)
        for line in notes(record):
            console.print(line, markup=False)
        console.print(timer_note(record), markup=False)
        if log_line(record):
            console.print(log_line(record), markup=False)
        console.print("check: cannot run here" if record.cannot_run else "check: fail")
        return console.file.getvalue()
    if record.mode == "test":
        tab = Table(title=title, title_justify="left")
        for col in ("case", "status", "reason"):
            tab.add_column(col)
        for case in record.cases:
            tab.add_row(for_rich(case.label), case.status.upper(), for_rich(one_line(case.error or "")))
        console.print(tab)
    elif record.mode == "profile":
        for case in record.cases:
            console.print(f"== {case.label}: {case.status}", markup=False)
            body = case.report if case.report is not None else one_line(case.error or "")
            for line in str(body).splitlines():  # the worker's text, indented: never a line of ours
                console.print("  │ " + line.replace("\r", " "), markup=False, highlight=False)
    else:
        console.print(benchmark_table(record, title))
        label = score_label()
        console.print(f"{label}: {_us(record.geomean_ns)} µs" if record.geomean_ns else
                      f"{label}: — ({'not every case was measured' if record.incomplete else 'not every case passed'})")
    for line in notes(record):
        console.print(line, markup=False)
    console.print(timer_note(record), markup=False)
    if log_line(record):
        console.print(log_line(record), markup=False)
    console.print(f"check: {'pass' if record.passed else 'fail'}")
    return console.file.getvalue()


def score_label() -> str:
    """"geomean" (the leaderboard's ranking for these problems), else "score (mean|last)"."""
    from eval.cases import ConfigError, ranking_by

    try:
        how = ranking_by()
    except ConfigError:
        how = "geom"
    return "geomean" if how == "geom" else f"score ({how})"


def benchmark_table(record: RunRecord, title: str) -> Table:
    tab = Table(title=title, title_justify="left")
    memory = problem_folder.current().hook("bytes_moved") is not None  # bytes a case moves: GB/s, floor
    columns = ["case", "mean ± err µs", "median", "best", "worst", "runs",
               *(["GB/s", "% SOL", "× floor"] if memory else []), "host µs/call"]
    b200 = any(c.sol and c.sol.b200_sol_ns for c in record.cases)
    if b200:
        columns.append("× B200 SOL")
    has_baseline = any("median_ns" in (c.baseline or {}) for c in record.cases)
    name = problem_folder.current().hook("BASELINE_NAME", "baseline")
    if has_baseline:
        columns += [f"{name} µs", f"{name} / this"]
    for col in columns:
        tab.add_column(col, justify="left" if col == "case" else "right")
    for case in record.cases:
        if not case.passed:
            tab.add_row(for_rich(case.label), for_rich(f"FAIL: {one_line(case.error)}"), *[""] * (len(columns) - 2))
            continue
        s, sol = case.stats, case.sol
        row = [
            for_rich(case.label), f"{s.mean / 1e3:.2f} ± {s.err / 1e3:.2f}", _us(s.median), _us(s.best), _us(s.worst), str(s.runs),
            *([gb_s(record, sol),
               f"{sol.pct_datasheet:.1f}" if sol and sol.pct_datasheet is not None else "—",
               f"{sol.x_floor:.2f}" if sol and sol.x_floor is not None else "—"] if memory else []),
            f"{case.host_us:.1f}" if case.host_us is not None else "—",
        ]
        if b200:
            row.append(f"{sol.x_b200_sol:.2f}" if sol and sol.x_b200_sol else "—")
        if has_baseline:
            base = (case.baseline or {}).get("median_ns")
            row += [_us(base), f"{base / s.median:.2f}×" if base else "—"]
        tab.add_row(*row)
    return tab


# -- markdown -------------------------------------------------------------------------------------

def markdown(record: RunRecord) -> str:
    lines = [f"**{record.mode}** {for_markdown(record.submission)} — {for_markdown(timer_note(record))}",
             *[f"_{for_markdown(line)}_" for line in notes(record) if line.startswith("EMULATED")], ""]
    if record.error:
        return "\n".join(lines + [f"{'' if record.cannot_run else 'FAIL: '}{for_markdown(record.error)}",
                                  *([for_markdown(log_line(record))] if log_line(record) else [])])
    if record.mode == "test" or any(c.passed and c.stats is None for c in record.cases):  # test, profile
        lines += ["| case | status | reason |", "|---|---|---|"]
        lines += [f"| {for_markdown(c.label)} | {c.status} | {for_markdown(c.error or '')} |" for c in record.cases]
        lines += [f"\n{for_markdown(c.label)}:\n```\n{c.report.replace('```', '` ` `')}\n```" for c in record.cases
                  if c.report]
        lines += [""] * bool(notes(record)) + [for_markdown(line) for line in notes(record)]  # not a table row
        return "\n".join(lines)
    lines += ["| case | mean ± err µs | best µs | GB/s | % SOL | × floor |", "|---|---|---|---|---|---|"]
    for c in record.cases:
        if not c.passed:
            lines.append(f"| {for_markdown(c.label)} | FAIL: {for_markdown(c.error)} | | | | |")
            continue
        s, sol = c.stats, c.sol
        lines.append(
            f"| {for_markdown(c.label)} | {s.mean / 1e3:.2f} ± {s.err / 1e3:.2f} | {_us(s.best)} | "
            f"{gb_s(record, sol)} | {f'{sol.pct_datasheet:.1f}' if sol and sol.pct_datasheet is not None else '—'} | "
            f"{f'{sol.x_floor:.2f}' if sol and sol.x_floor is not None else '—'} |"
        )
    lines.append(f"\n{score_label()}: {_us(record.geomean_ns)} µs")
    lines += [for_markdown(line) for line in notes(record)]
    return "\n".join(lines)
