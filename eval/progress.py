"""Progress on long work, on stderr: a rich progress bar on a terminal, one plain line per phase
otherwise (CI logs, pipes). Off unless a command turns it on (the command line does; library callers
of eval.api see nothing unless they call enable()).

    progress.phase("warm-up")                      # one line: "[  12s] warm-up"
    with progress.steps(3, "benchmark") as step:   # a bar over the cases, with an ETA
        step("7168x2048x4")                        # before each case
"""
from __future__ import annotations

import contextlib
import sys
import time

_STATE = {"on": False, "start": None, "bar": None, "plain": False}


def enable(on: bool = True) -> None:
    _STATE["on"] = on
    _STATE["start"] = time.monotonic()


def plain() -> None:
    """Plain lines even on a terminal (--no-tui)."""
    _STATE["plain"] = True


def enabled() -> bool:
    return bool(_STATE["on"])


def _elapsed() -> str:
    start = _STATE["start"] or time.monotonic()
    return f"[{time.monotonic() - start:5.0f}s]"


def _tty() -> bool:
    if _STATE["plain"]:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def phase(text: str) -> None:
    """One phase of the work begins (a build, the warm-up, a rerun...)."""
    if not _STATE["on"]:
        return
    bar = _STATE["bar"]
    if bar is not None:
        bar[0].console.print(f"{_elapsed()} {text}", markup=False, highlight=False)
        return
    print(f"{_elapsed()} {text}", file=sys.stderr, flush=True)


def eta(done: int, total: int, started: float) -> str:
    """What is left at the mean pace of the steps done since `started` (time.monotonic())."""
    if done == 0:
        return "ETA ?"
    left = (time.monotonic() - started) / done * (total - done)
    return f"ETA {left:.0f}s"


@contextlib.contextmanager
def steps(total: int, what: str):
    """A count of steps (cases, submissions, candidates): yields step(label), called before each
    one. A bar on a terminal; otherwise a line per step with its index, the time so far and an ETA
    from the steps done."""
    if not _STATE["on"] or total <= 0:
        yield lambda label="": None
        return
    started = time.monotonic()
    count = {"done": -1}
    if _tty() and _STATE["bar"] is None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        # the ETA from the steps done so far (rich's own estimate needs several steps within 30 s: a
        # bar over three cases of a minute each showed none)
        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("{task.fields[eta]}"), console=Console(file=sys.stderr), transient=True)
        task = bar.add_task(what, total=total, eta="ETA ?")
        _STATE["bar"] = (bar, task)

        def step(label: str = "") -> None:
            count["done"] += 1
            bar.update(task, completed=count["done"], description=f"{what} {label}".strip(),
                       eta=eta(count["done"], total, started))

        try:
            with bar:
                yield step
                bar.update(task, completed=total)
        finally:
            _STATE["bar"] = None
        return

    def step(label: str = "") -> None:
        count["done"] += 1
        phase(f"{what} {count['done'] + 1}/{total} {label} ({eta(count['done'], total, started)})".replace("  ", " "))

    yield step
