"""Time every launch configuration a submission offers on each case (`python -m eval tune SUB`).

A tunable submission exposes CONFIGS (a list) and run_with(data, config); its worker reports the list.
Each configuration runs in the submission's worker through the same compiled loop as a benchmark
(L2 flushed, events around the call), and every timed output is judged; a configuration that does
not fit a shape or gives a wrong result is listed with its reason. Prints every configuration per
case, the best last, then the table row it found: this GPU's key (the submission's device_key(), when
it has one) mapped to the best configuration per shape. `--write` puts that row into the
submission's `TUNED = {...}` table (a dict literal keyed by device, then by shape), replacing the
device's old row, so retuning on a new GPU is one command.
"""
from __future__ import annotations

import ast
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from eval.cases import Case
from eval.judge import modes
from eval.judge.text import one_line
from eval.records import size_values


@dataclass
class TuneResult:
    text: str                      # every configuration per case, the best last
    ok: bool                       # every case has a configuration that runs and is right
    device_key: tuple | None       # the submission's device_key() on this GPU
    best: dict = field(default_factory=dict)  # shape (the case's sized keywords) -> best configuration

    def row(self) -> str:
        """The TUNED entry for this device, as Python source."""
        return render_row(self.device_key if self.device_key is not None
                          else "this GPU (the submission has no device_key())", self.best)


def render_row(key, row: dict) -> str:
    """One device's entry of a TUNED literal, as Python source (no trailing newline)."""
    return "\n".join([f"    {key!r}: {{"] + [f"        {shape!r}: {cfg!r}," for shape, cfg in row.items()] + ["    },"])


def tune(sub: Path, cases: list[Case], options: modes.Options, runs: int = 100) -> TuneResult:
    runner = modes.Runner(sub, options)
    lines, ok, best = [], True, {}
    try:
        try:
            offer = json.loads(runner.call("configs", {}).header.get("text") or "{}")
        except (modes.WorkerFailure, ValueError) as exc:
            return TuneResult(f"error: {getattr(exc, 'reason', exc)}", False, None)
        configs, key = offer.get("configs") or [], offer.get("device_key")
        for case in cases:
            rows = []
            for config in configs:
                result = modes.new_case(case, options)
                try:
                    modes.check_trial(runner, result, options, config)  # the untimed checks of `test`
                    if not result.passed:
                        rows.append((float("inf"), config, f"WRONG: {one_line(result.error)}"[:90]))
                        continue
                    params = modes.runs_params(result.args, options, (runs, modes.NO_LIMIT), fresh_seeds=False)
                    reply = runner.call("runs", {"args": result.args, "params": params, "config": config})
                    samples, reason = modes.judge_runs(reply, result.args)
                    rows.append((float("inf"), config, f"WRONG: {one_line(reason)}"[:90]) if reason
                                else (statistics.median(samples), config, ""))
                except modes.WorkerFailure as failure:
                    rows.append((float("inf"), config, f"skip: {one_line(failure.reason)}"[:90]))
            rows.sort(key=lambda r: r[0])
            if rows and rows[0][0] != float("inf"):
                best[size_values(case.args)] = tuple(rows[0][1]) if isinstance(rows[0][1], list) else rows[0][1]
            else:
                ok = False
            lines.append(f"== {case.label}")
            lines += [f"   {str(cfg):<18} {med / 1e3:8.2f} µs {note}" for med, cfg, note in reversed(rows)]
    finally:
        runner.close()
    return TuneResult("\n".join(lines), ok, tuple(key) if key is not None else None, best)


class TableError(ValueError):
    """The submission has no TUNED dict literal to write into."""


def assigned_node(path: Path, name: str) -> ast.Assign | None:
    """The module-level `NAME = ...` of a Python file, if there is one."""
    return next((n for n in ast.parse(path.read_text()).body if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)), None)


def assigned_literal(path: Path, name: str, node: ast.Assign | None = None):
    """The value of the module-level `NAME = <literal>` of a Python file."""
    node = node or assigned_node(path, name)
    if node is None:
        raise TableError(f"{path} has no `{name} = ...` at module level")
    try:
        return ast.literal_eval(node.value)
    except ValueError as exc:
        raise TableError(f"{path}: {name} is not a plain literal ({exc})") from None


def write_row(sub: Path, result: TuneResult) -> None:
    """Replace (or add) this device's row in the submission's `TUNED = {...}` literal, keeping the
    other devices' rows and the shapes this run did not tune (a row under the same name and SM count
    is this device's, whatever bandwidth or L2 it was listed with)."""
    if result.device_key is None:
        raise TableError(f"{sub} has no device_key(): the row cannot be keyed by device")
    source = sub.read_text()
    node = assigned_node(sub, "TUNED")
    if node is None or not isinstance(node.value, ast.Dict):
        raise TableError(f"{sub} has no `TUNED = {{...}}` table (device key -> shape -> configuration)")
    table = assigned_literal(sub, "TUNED", node)
    # the same GPU (name and SM count) keeps one row, whatever bandwidth or L2 a driver reported before
    same = [key for key in table if tuple(key[:2]) == tuple(result.device_key[:2])]
    row = {shape: cfg for key in same for shape, cfg in table.pop(key).items()}
    table[result.device_key] = {**row, **result.best}
    text = "TUNED = {\n" + "\n".join(render_row(key, row) for key, row in table.items()) + "\n}"
    lines = source.splitlines(keepends=True)
    new = "".join(lines[:node.lineno - 1]) + text + "\n" + "".join(lines[node.end_lineno:])
    tmp = sub.with_name(sub.name + ".tune-tmp")
    tmp.write_text(new)
    tmp.replace(sub)


def run(sub: Path, cases: list[Case], options: modes.Options, runs: int, write: bool, echo=print) -> TuneResult:
    """`tune SUB`'s work for a caller (the command line, `python -m eval.tune`): tune, echo every
    configuration and the row found, and with write put that row into the submission's table.
    Raises TableError when it cannot be written (the row was echoed: the user can copy it by hand)."""
    result = tune(sub, cases, options, runs)
    echo(result.text)
    if result.best:
        echo(f"\n# TUNED row for this GPU ({sub}):\n{result.row()}")
    if write and result.best:
        write_row(sub, result)
        echo(f"wrote this GPU's row into {sub}'s TUNED table")
    return result


def main(argv: list[str]) -> int:
    """`python -m eval.tune SUB [--cases SET] [--runs N] [--write] [--timeout S]`: the same as
    `python -m eval tune` (whose options these are), through eval/api.py, not the command line's
    module (which imports this one). Exit codes as the command line's (eval/api.py)."""
    import argparse

    from eval import api
    from eval.cases import ConfigError, select_cases

    parser = argparse.ArgumentParser(prog="python -m eval.tune", description=__doc__.splitlines()[0])
    parser.add_argument("sub", type=Path)
    parser.add_argument("--cases", dest="case_set", default="benchmarks")
    parser.add_argument("--runs", type=int, default=100, help="Timed runs per configuration and case.")
    parser.add_argument("--write", action="store_true", help="Put the row found into the submission's TUNED table.")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    try:
        if not args.sub.is_file():
            raise ValueError(f"{args.sub} is not a file")
        if args.runs < 2:
            raise ValueError("--runs must be >= 2")
        result = run(args.sub, select_cases(args.case_set), api.options(timeout=args.timeout), args.runs, args.write)
    except TableError as exc:
        print(f"error: {exc}: copy the row above by hand", file=sys.stderr)
        return api.EXIT_USAGE
    except (ConfigError, ValueError) as exc:
        print(f"error: {one_line(str(exc), 500)}", file=sys.stderr)
        return api.EXIT_USAGE
    return 0 if result.ok else api.EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
