"""Text that came from a worker, made safe to print as data. Judge side.

Everything a submission can influence (an exception message, a type name, a reason built from the
worker's reply) passes through `from_worker` / `one_line` where the judge first takes it, and the
renderers flatten and escape every reason again for their format (`one_line`, `for_rich`,
`for_markdown`). Worker text can then never become markup, a second
line, or a line of the leaderboard's output format (`check: pass`, `benchmark.0.mean: ...`).
"""
from __future__ import annotations

import re

MAX_CHARS = 600
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # terminal colour codes (compiler diagnostics)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")
# a line that starts like a verdict line of any output format (popcorn keys, our own table/report lines)
_VERDICT = re.compile(r"^\s*(check|test|benchmark|leaderboard|error|result|geomean|score|status|runs|mean|"
                      r"test-count|benchmark-count|[#|>*_-])", re.I)


def one_line(value, limit: int = MAX_CHARS) -> str:
    """One printable line of at most `limit` characters (what a report prints inside its own line)."""
    flat = _CONTROL.sub(" ", _ANSI.sub("", str(value))).strip()
    return flat[:limit - 1] + "…" if len(flat) > limit else flat


def from_worker(value, limit: int = MAX_CHARS) -> str:
    """A text the worker sent (its error message): one line that never starts like a verdict line,
    wherever a consumer of the record may print it."""
    flat = one_line(value, limit)
    return "» " + flat if _VERDICT.match(flat) else flat


def for_rich(value: str) -> str:
    """Escaped for rich markup (a '[/]' in a reason must print, not close a style)."""
    from rich.markup import escape

    return escape(str(value))


def for_markdown(value: str) -> str:
    """Escaped for a markdown table cell: no cell breaks, no emphasis, no code, no links or HTML
    (underscores inside words stay: GitHub's markdown does not emphasise them)."""
    return re.sub(r"([\\|`*\[\]<>])", r"\\\1", one_line(value))
