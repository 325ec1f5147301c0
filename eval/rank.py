"""Local leaderboard: test and benchmark several submissions, one table ordered by geomean, a
markdown copy and a PNG chart (per case, each submission's time against the floor)."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from eval import problem_folder, progress, results, sol
from eval.cases import Case
from eval.judge import modes
from eval.judge.text import for_markdown, one_line
from eval.records import CaseResult

MARKDOWN_PATH = results.RESULTS_DIR / "leaderboard.md"
CHART_PATH = results.RESULTS_DIR / "leaderboard.png"
BASELINE = "torch_ref"


@dataclasses.dataclass
class Row:
    name: str
    path: str
    gpu: str = "?"
    geomean_ns: float | None = None
    cases: list[CaseResult] = dataclasses.field(default_factory=list)
    reason: str | None = None
    speedup: float | None = None
    incomplete: str | None = None  # Ctrl-C or SIGTERM stopped this submission's judging


@dataclasses.dataclass
class Ranking:
    rows: list[Row]
    ranked: list[Row]
    failed: list[Row]
    text: str


def rank(subs: list[Path], tests: list[Case], benches: list[Case], options: modes.Options) -> Ranking:
    rows, stopped = [], None
    with progress.steps(len(subs), "rank") as step:
        for sub in subs:
            step(Path(sub).name)
            try:
                row = _evaluate(Path(sub), tests, benches, options)
            except KeyboardInterrupt:  # between its judged parts (its worker's start): rank what was judged
                row = Row(name=Path(sub).stem, path=str(sub), gpu=rows[0].gpu if rows else "?",
                          reason="not judged: interrupted (Ctrl-C)",
                          incomplete=f"interrupted (Ctrl-C) while judging {Path(sub).name}")
            rows.append(row)
            if row.incomplete:  # Ctrl-C or SIGTERM: rank what was judged, say so
                stopped = row.incomplete
                break
    ranked = sorted((r for r in rows if r.geomean_ns), key=lambda r: r.geomean_ns)
    failed = [r for r in rows if not r.geomean_ns]
    base = next((r.geomean_ns for r in ranked if r.name == BASELINE), None)
    for r in ranked:
        r.speedup = base / r.geomean_ns if base else None
    labels = [c.label for c in benches]
    md = markdown(ranked, failed, labels, rows[0].gpu if rows else "?")
    results.write_text_new(md + "\n", MARKDOWN_PATH)
    chart = chart_png(ranked, labels, CHART_PATH)
    text = md + f"\n\nwritten: {MARKDOWN_PATH}" + (f", {chart}" if chart else "")
    if stopped:
        text += f"\nINCOMPLETE: {stopped}: {len(rows)} of {len(subs)} submission(s) judged"
    return Ranking(rows, ranked, failed, text)


def _first_failure(record) -> str:
    return one_line(record.error or next((f"{c.label}: {c.error}" for c in record.cases if not c.passed), None)
                    or record.incomplete or "failed")


def _evaluate(sub: Path, tests: list[Case], benches: list[Case], options: modes.Options) -> Row:
    """Tests (with the anti-cheat checks), then the benchmark; every timed output is judged."""
    row = Row(name=sub.stem, path=str(sub))
    tested = modes.run_tests(sub, tests, options)
    row.gpu = tested.environment.gpu
    row.incomplete = tested.incomplete
    if not tested.passed:
        row.reason = (one_line(tested.error) if tested.cannot_run else f"test failed: {_first_failure(tested)}") + _log(tested)
        return row
    record = modes.run_benchmarks(sub, benches, options)
    row.incomplete = record.incomplete
    sol.annotate(record)
    results.write_new(record.to_json(), results.record_stem("rank", str(sub)))
    row.cases = record.cases
    if record.passed:
        row.geomean_ns = record.geomean_ns
    else:
        row.reason = f"benchmark failed: {_first_failure(record)}" + _log(record)
    return row


def _log(record) -> str:
    """Where the failing worker's log is (its traceback), as every failure names it."""
    from eval.report import log_line

    line = log_line(record)
    return f" ({line})" if line else ""


HOST_TIMER = "HOST TIMER: CPU wall time, not GPU kernel time"


def _host(gpu: str | None) -> bool:
    """Standings timed with the host clock (no CUDA): every output says so."""
    return "no CUDA" in (gpu or "")


def _cell(case: CaseResult) -> str:
    x = case.sol.x_floor if case.sol else None
    return f"{case.stats.mean / 1e3:.2f}" + (f" ({x:.2f}×)" if x else "")


def as_json(outcome: Ranking) -> str:
    """The standings as data: each submission in rank order (then the failed), its geomean, speed-up,
    reason and each case's mean."""
    import json

    def row(r: Row, place: int | None) -> dict:
        return {"rank": place, "name": r.name, "path": r.path, "gpu": r.gpu, "geomean_ns": r.geomean_ns,
                "speedup": r.speedup, "reason": r.reason, "incomplete": r.incomplete,
                "cases": [{"case": c.label, "passed": c.passed, "mean_ns": c.stats.mean if c.stats else None}
                          for c in r.cases], **({"host_timer": HOST_TIMER} if _host(r.gpu) else {})}

    return json.dumps([row(r, i) for i, r in enumerate(outcome.ranked, 1)] + [row(r, None) for r in outcome.failed],
                      indent=1)


def markdown(ranked: list[Row], failed: list[Row], labels: list, gpu: str) -> str:
    head = ["#", "submission", *[f"{l} µs (× floor)" for l in labels], "geomean µs", f"speed-up vs {BASELINE}"]
    lines = [f"Local leaderboard on {for_markdown(gpu)}", *([f"[{HOST_TIMER}]"] if _host(gpu) else []), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(ranked, 1):
        speed = f"{r.speedup:.1f}×" if r.speedup else "—"
        lines.append("| " + " | ".join([str(i), for_markdown(r.name), *[_cell(c) for c in r.cases], f"{r.geomean_ns / 1e3:.2f}",
                                         speed]) + " |")
    for r in failed:
        lines.append(f"| — | {for_markdown(r.name)} | skipped: {for_markdown(r.reason)} |")
    return "\n".join(lines)


def chart_png(ranked: list[Row], labels: list, path: Path) -> Path | None:
    """Grouped bars (µs, log scale) per case, one colour per submission, the floor as a black line."""
    if not ranked:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(labels)), 4.5))
    width = 0.8 / len(ranked)
    for j, r in enumerate(ranked):
        xs = [i + (j - (len(ranked) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, [c.stats.mean / 1e3 for c in r.cases], width, label=r.name)
    for i, case in enumerate(ranked[0].cases):
        floor = case.sol.floor_ns if case.sol else None
        if floor:
            ax.hlines(floor / 1e3, i - 0.45, i + 0.45, colors="black", linewidth=2,
                      label="memory floor" if i == 0 else None)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yscale("log")
    host = _host(ranked[0].gpu)
    ax.set_ylabel("mean time per call (µs, log)" + ("\nHOST TIMER: CPU wall time" if host else ""))
    ax.set_title(f"{problem_folder.current().name}: local leaderboard")
    ax.legend(fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    return results.write_text_new(image.getvalue(), path)  # the mode every result file gets
