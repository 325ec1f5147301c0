"""Turning a run record into text: a rich table, JSON, the leaderboard's popcorn lines, markdown."""
from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table

from eval.stats import Stats

FORMATS = ("table", "json", "popcorn", "markdown")


def render(record: dict, fmt: str = "table") -> str:
    if fmt == "json":
        return json.dumps(record, indent=1, default=str)
    if fmt == "popcorn":
        return popcorn(record)
    if fmt == "markdown":
        return markdown(record)
    return table(record)


def _us(ns) -> str:
    return "—" if ns is None else f"{ns / 1e3:.2f}"


def timer_note(record: dict) -> str:
    env = record.get("environment") or {}
    where = f"{env.get('gpu', '?')}"
    if env.get("sm_count"):
        where += f", {env['sm_count']} SMs, capability {env.get('capability')}"
    timer = env.get("timer", "?")
    note = f"device: {where}; timer: {timer}; method: {record.get('timing', {}).get('method')}"
    if env and not env.get("cuda_available", False):
        note += "  [HOST TIMER: CPU wall time, not GPU kernel time]"
    return note


# -- popcorn (the leaderboard's key: value lines) -------------------------------------------------

def popcorn(record: dict) -> str:
    lines = []
    if record.get("error"):
        lines += [f"error: {record['error']}", "check: fail"]
        return "\n".join(lines)
    if record["mode"] == "test":
        lines.append(f"test-count: {len(record['cases'])}")
        for i, case in enumerate(record["cases"]):
            lines.append(f"test.{i}.spec: {case['spec']}")
            lines.append(f"test.{i}.status: {case['status']}")
            if case["status"] != "pass":
                lines.append(f"test.{i}.error: {case.get('error')}")
    else:
        lines.append(f"benchmark-count: {len(record['cases'])}")
        for i, case in enumerate(record["cases"]):
            lines.append(f"benchmark.{i}.spec: {case['spec']}")
            if case["status"] == "pass" and "stats" in case:
                for name in Stats.POPCORN_FIELDS:
                    lines.append(f"benchmark.{i}.{name}: {case['stats'][name]}")
            elif case["status"] == "pass" and "report" in case:
                lines.append(f"benchmark.{i}.report: {case['report']!r}")
            else:
                lines.append(f"benchmark.{i}.status: fail")
                lines.append(f"benchmark.{i}.error: {case.get('error')}")
    lines.append(f"check: {'pass' if record.get('passed') else 'fail'}")
    return "\n".join(lines)


# -- rich table -----------------------------------------------------------------------------------

def table(record: dict) -> str:
    console = Console(file=io.StringIO(), width=160, force_terminal=False, color_system=None)
    title = f"{record['mode']}: {record.get('submission')}"
    if record.get("error"):
        console.print(f"{title}\nFAIL: {record['error']}")
        return console.file.getvalue()
    if record["mode"] == "test":
        tab = Table(title=title, title_justify="left")
        for col in ("case", "status", "reason"):
            tab.add_column(col)
        for case in record["cases"]:
            tab.add_row(case["label"], case["status"].upper(), case.get("error") or "")
        console.print(tab)
    elif record["mode"] == "profile":
        for case in record["cases"]:
            console.print(f"== {case['label']}: {case['status']}")
            console.print(case.get("report") or case.get("error") or "")
    else:
        console.print(benchmark_table(record, title))
        geo = record.get("geomean_ns")
        console.print(f"geomean: {_us(geo)} µs" if geo else "geomean: — (not every case passed)")
        for case in record["cases"]:
            flag = (case.get("sol") or {}).get("flag")
            if flag:
                console.print(f"WARNING {case['label']}: {flag}")
    console.print(timer_note(record))
    passed = record.get("passed")
    console.print(f"check: {'pass' if passed else 'fail'}")
    return console.file.getvalue()


def benchmark_table(record: dict, title: str) -> Table:
    tab = Table(title=title, title_justify="left")
    columns = ["case", "mean ± err µs", "median", "best", "worst", "runs", "GB/s", "% SOL", "× floor", "host µs/call"]
    b200 = any("b200_sol_ns" in (c.get("sol") or {}) for c in record["cases"])
    if b200:
        columns.append("× B200 SOL")
    bf16 = any("median_ns" in (c.get("bf16") or {}) for c in record["cases"])
    if bf16:
        columns += ["BF16 µs", "BF16 / this"]
    for col in columns:
        tab.add_column(col, justify="left" if col == "case" else "right")
    for case in record["cases"]:
        if case["status"] != "pass":
            tab.add_row(case["label"], f"FAIL: {case.get('error')}", *[""] * (len(columns) - 2))
            continue
        s, sol = case["stats"], case.get("sol") or {}
        row = [
            case["label"],
            f"{s['mean'] / 1e3:.2f} ± {s['err'] / 1e3:.2f}",
            _us(s["median"]),
            _us(s["best"]),
            _us(s["worst"]),
            str(s["runs"]),
            f"{sol['gb_s']:.0f}" if "gb_s" in sol else "—",
            f"{sol['pct_datasheet']:.1f}" if "pct_datasheet" in sol else "—",
            f"{sol['x_floor']:.2f}" if "x_floor" in sol else "—",
            f"{case['host_us']:.1f}" if case.get("host_us") is not None else "—",
        ]
        if b200:
            row.append(f"{sol['x_b200_sol']:.2f}" if "x_b200_sol" in sol else "—")
        if bf16:
            base = (case.get("bf16") or {}).get("median_ns")
            row += [_us(base), f"{base / s['median']:.2f}×" if base else "—"]
        tab.add_row(*row)
    return tab


# -- markdown -------------------------------------------------------------------------------------

def markdown(record: dict) -> str:
    lines = [f"**{record['mode']}** `{record.get('submission')}` — {timer_note(record)}", ""]
    if record.get("error"):
        return "\n".join(lines + [f"FAIL: {record['error']}"])
    if record["mode"] == "test":
        lines += ["| case | status | reason |", "|---|---|---|"]
        lines += [f"| {c['label']} | {c['status']} | {c.get('error') or ''} |" for c in record["cases"]]
        return "\n".join(lines)
    lines += ["| case | mean ± err µs | best µs | GB/s | % SOL | × floor |", "|---|---|---|---|---|---|"]
    for c in record["cases"]:
        if c["status"] != "pass":
            lines.append(f"| {c['label']} | FAIL: {c.get('error')} | | | | |")
            continue
        s, sol = c["stats"], c.get("sol") or {}
        lines.append(
            f"| {c['label']} | {s['mean'] / 1e3:.2f} ± {s['err'] / 1e3:.2f} | {_us(s['best'])} | "
            f"{sol.get('gb_s', 0):.0f} | {sol.get('pct_datasheet', float('nan')):.1f} | "
            f"{sol.get('x_floor', float('nan')):.2f} |"
        )
    geo = record.get("geomean_ns")
    lines.append(f"\ngeomean: {_us(geo)} µs")
    return "\n".join(lines)
