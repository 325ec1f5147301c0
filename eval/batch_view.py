"""What `python -m eval batch` shows: while it runs, a progress bar (rich, when stdout is a terminal)
with one line per finished candidate above it, else those lines alone on stderr; at the end, the
standings (passed candidates by geomean, then the failures with their reasons). Text only: the
verdicts themselves are the JSONL's."""
from __future__ import annotations

import contextlib
import sys
import time

import click

from eval.judge.text import one_line
from eval.progress import eta as pace_eta  # this module's progress() is the batch's bar


def line_text(line: dict) -> str:
    """One finished candidate, one line."""
    verdict = "pass" if line["passed"] else f"FAIL: {one_line(line['reason'] or '')[:120]}"
    if line.get("infrastructure"):  # no verdict: the judge failed, a resume judges it again
        verdict = f"NOT JUDGED (not saved, a resume retries it): {one_line(line['reason'] or '')[:120]}"
    where = line.get("device") or "cpu"
    host = f"{line['host']}:" if line.get("host") else ""
    return f"  {line['id']}: {verdict} ({line['seconds']:.0f} s, device {host}{where})"


@contextlib.contextmanager
def progress(total: int):
    """Yields the callback a batch calls with each finished line."""
    if total and sys.stdout.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[passed]} passed"),
                   TimeElapsedColumn(), TextColumn("{task.fields[eta]}"))
        with Progress(*columns) as bar:
            task = bar.add_task("judging", total=total, passed=0, eta="ETA ?")
            passed, done, started = [0], [0], time.monotonic()

            def tick(line: dict) -> None:
                passed[0] += bool(line["passed"])
                done[0] += 1
                bar.console.print(line_text(line), markup=False, highlight=False, no_wrap=True, overflow="ellipsis")
                bar.update(task, advance=1, passed=passed[0], eta=_eta(done[0], total, started))
            yield tick
    else:
        started, done = time.monotonic(), [0]

        def plain(line: dict) -> None:
            done[0] += 1
            click.echo(f"[{done[0]}/{total}, {_eta(done[0], total, started)}]{line_text(line)}", err=True)
        yield plain


def _eta(done: int, total: int, started: float) -> str:
    """eval.progress.eta, or the whole time once every candidate is judged."""
    return f"done in {time.monotonic() - started:.0f} s" if done >= total else pace_eta(done, total, started)


def standings(board: list[dict]) -> str:
    """Passed candidates ranked by geomean, then every failure with its reason; a summary last."""
    passed = [e for e in board if e.get("passed")]
    failed = [e for e in board if not e.get("passed")]
    rows = []
    if passed:
        rows.append("standings:")
        for place, entry in enumerate(passed, 1):
            score = f"{entry['geomean_ns'] / 1e3:.2f} µs" if entry.get("geomean_ns") else "—"
            rows.append(f"{place:>4}  {score:>12}  {entry['id']}")
    if failed:
        rows.append("failed:")
        rows += [f"   -  {entry['id']}: {one_line(entry.get('reason') or 'no reason')[:160]}" for entry in failed]
    return "\n".join(rows)
