"""Command line: python -m eval {run,test,benchmark,leaderboard,profile,sol,compare,rank,accuracy,tune,batch,conform}.

Exit codes as the leaderboard's: 0 pass, 112 a check or case failed; 2 for a usage or input error
(bad option, missing file, malformed task.yml/shapes.yaml, invalid shape, a bad POPCORN_SEED or
POPCORN_FD), always one line on stderr and no traceback; 3 when a GPU-only command (sol) finds no
CUDA GPU; 113: cannot run here (a package that is not installed, no CUDA GPU...: eval/needs.py,
docs/record-schema.md); 130 / 143 when Ctrl-C / SIGTERM stopped a run (its record is written,
marked incomplete); doctor: 1 when the sandbox is below full on this machine.
"""
from __future__ import annotations

import functools
import math
import os
import re
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click

from eval import cases as case_files
from eval import api, needs, problem_folder, progress, report, results, sol
from eval.cases import ConfigError
from eval.judge.text import one_line
from eval.judge import modes
from eval.records import RunRecord
from eval.submissions import best_runnable

EXIT_FAIL, EXIT_USAGE = api.EXIT_FAIL, api.EXIT_USAGE
EXIT_NO_GPU = 3  # a GPU-only command (sol) on a machine without a CUDA GPU
POPCORN_FD_ENV = "POPCORN_FD"
_POPCORN_FD: list = []  # the leaderboard runner's descriptor for the key: value lines, when given
SUB = click.Path(exists=True, dir_okay=False, path_type=Path)


def writable_output(ctx, param, value: Path | None) -> Path | None:
    """-o FILE is checked before anything runs: its folder is made if missing and the file opened for
    writing once (a new one removed again), so that a path nothing can write fails now, not after the run."""
    if value is None:
        return None
    existed = os.path.lexists(value)
    try:
        if os.path.isdir(value):
            raise IsADirectoryError(21, "is a folder")
        folder = os.path.dirname(os.path.abspath(value))
        blocking = next((p for p in [*reversed(Path(folder).parents), Path(folder)]
                         if os.path.lexists(p) and not p.is_dir()), None)
        if blocking:  # makedirs would say "File exists"
            raise NotADirectoryError(20, f"{blocking} is not a folder")
        os.makedirs(folder, exist_ok=True)
        with open(value, "a"):
            pass
        if not existed:
            os.unlink(value)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {value}: {exc.strerror or exc}; choose another path",
                                 ctx=ctx, param=param)
    return value


def case_set_name(ctx, param, value):
    """--cases names a set: an empty name is a mistake, not the default."""
    if value is not None and not str(value).strip():
        raise click.BadParameter("an empty case set name: give tests, benchmarks, tests:I or a set of shapes.yaml",
                                 ctx=ctx, param=param)
    return value


def seconds(ctx, param, value):
    """A time limit in seconds: a positive, finite number (nan and inf are not limits)."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0:
        raise click.BadParameter(f"{value} is not a number of seconds above 0", ctx=ctx, param=param)
    return value


def fail_usage(message: str):
    click.echo(f"error: {one_line(message)}", err=True)
    sys.exit(EXIT_USAGE)


GLOBAL_OPTIONS = ("--problem", "--sandbox")  # the group's options that take a value


def global_options_first(argv: list[str]) -> list[str]:
    """--problem and --sandbox are the group's, but users write them after the command too
    (`python -m eval test sub.py --problem DIR`): moved before it, with their values."""
    head, i = [], 0
    while i < len(argv) and argv[i].startswith("-"):  # the group's own, before the command
        step = 2 if argv[i] in GLOBAL_OPTIONS else 1
        head += argv[i:i + step]
        i += step
    if i >= len(argv):
        return list(argv)
    moved, rest, j = [], [argv[i]], i + 1
    while j < len(argv):
        arg = argv[j]
        if arg == "--":
            rest += argv[j:]
            break
        if arg in GLOBAL_OPTIONS and j + 1 < len(argv):
            moved += argv[j:j + 2]
            j += 2
            continue
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS and "=" in arg:
            moved.append(arg)
        else:
            rest.append(arg)
        j += 1
    return head + moved + rest


def cli(argv: list[str] | None = None) -> None:
    """`python -m eval`: click's own error handling replaced, so that every usage or input error is
    one line on stderr (no usage block, no traceback) and exits 2."""
    argv = global_options_first(sys.argv[1:] if argv is None else list(argv))
    try:
        main.main(args=argv, prog_name="python -m eval", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help())
        sys.exit(0)
    except click.UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        fail_usage(f"{where}{exc.format_message()} (--help for usage)")
    except click.ClickException as exc:
        fail_usage(exc.format_message())
    except ConfigError as exc:
        fail_usage(str(exc))
    except (click.exceptions.Abort, KeyboardInterrupt):  # the run modes write their record first (modes.py)
        click.echo("interrupted (Ctrl-C)", err=True)
        sys.exit(130)
    sys.exit(0)


def handle_config_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            fail_usage(str(exc))
    return wrapper


def run_options(default_cases: str):
    def decorate(fn):
        options = [
            click.option("--cases", "case_set", callback=case_set_name, default=default_cases, show_default=True,
                         help="tests | benchmarks (task.yml) or a set from shapes.yaml (stress, sweep, quantized, smoke)."),
            click.option("--dist", default=None,
                         help="Data distribution for every case, one of the problem module's DISTRIBUTIONS; "
                              "default: each case's own."),
            click.option("--timing", "method", type=click.Choice(["per-call", "batched"]), default=None,
                         help="per-call: the leaderboard's eval.py; batched: eval_better_bench.py. "
                              "Default: what the folder's task.yml names as its evaluator."),
            click.option("--batch", default=None, type=int,
                         help="Distinct inputs per batched sample (default: the evaluator's, else 50)."),
            click.option("--gap-us", default=500.0, show_default=True,
                         help="GPU idle time after each L2 flush (host head start, as the leaderboard's flush gives)."),
            click.option("--timeout", default=600.0, show_default=True, callback=seconds, help="Seconds per case before the worker is killed."),
            click.option("--format", "fmt", type=click.Choice(report.FORMATS), default="table", show_default=True),
            click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
                         callback=writable_output, help="Also write the formatted report to this file."),
            click.option("--fail-narrow/--allow-narrow", "fail_narrow", default=False, show_default=True,
                         help="A kernel right on the leaderboard's data but wrong on full-range data: the "
                              "leaderboard's verdict (pass, with a warning) or a failure (for search loops)."),
            click.option("--emulate-blackwell", is_flag=True,
                         help="Exact stand-ins for Blackwell-only calls (torch._scaled_mm on FP4) on an older GPU: "
                              "a correctness verdict; times are labelled emulated."),
        ]
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


def make_options(method=None, batch=None, gap_us=500.0, timeout=600.0, dist=None, fail_narrow=False,
                 emulate_blackwell=False) -> modes.Options:
    try:
        return api.options(method, batch, gap_us, timeout, dist, fail_narrow, emulate_blackwell)
    except ValueError as exc:
        fail_usage(str(exc))


def one_report(texts: list[str], fmt: str) -> str:
    """The reports of one command (`run`: test, then benchmark) as one: JSON a list, else one after another."""
    return "[\n" + ",\n".join(texts) + "\n]" if fmt == "json" else "\n".join(texts)


def print_alone(text: str, fmt: str, output: Path | None) -> None:
    """`run --format json`'s test half when nothing follows it: its list of one, printed and written."""
    whole = one_report([text], fmt)
    click.echo(whole)
    write_output(whole, output)


def emit(record: RunRecord, fmt: str, output: Path | None, before: str | None = None, echo: bool = True) -> str:
    """Print the report (echo), write it to -o (after `before`, an earlier report of the same command:
    `run`'s test half; JSON: the two as one list, printed so too) and to POPCORN_FD; returns the report."""
    text = report.render(record, fmt)
    both = text if before is None else one_report([before, text], fmt)
    if echo:
        click.echo(both if fmt == "json" else text)
    write_output(both, output)
    to_popcorn_fd(report.popcorn(record))
    if record.cannot_run:  # not judged here (a missing package, no CUDA GPU): its own exit code, never a failure
        if not echo:  # `run --format json`'s test half: its list ends here
            print_alone(text, fmt, output)
        sys.exit(needs.EXIT_CANNOT_RUN)
    return text


def write_output(text: str, output: Path | None) -> None:
    """-o FILE, the same on every command: the report as printed, also written to FILE."""
    if output:
        try:
            results.write_text_new(text + "\n", output)
        except OSError as exc:  # checked before the run (writable_output); a folder that refuses files anyway
            fail_usage(f"cannot write {output}: {exc.strerror or exc}; the report above is complete, choose another -o path")


def to_popcorn_fd(text: str) -> None:
    """The leaderboard's key: value lines to POPCORN_FD, as its runner reads them (whatever --format)."""
    if _POPCORN_FD:
        _POPCORN_FD[0].write(text + "\n")
        _POPCORN_FD[0].flush()


def open_popcorn_fd() -> None:
    """POPCORN_FD=N: the descriptor the leaderboard's runner gives its evaluator; taken out of the
    environment and made non-inheritable, so no worker gets it."""
    raw = os.environ.pop(POPCORN_FD_ENV, None)
    if raw in (None, "") or _POPCORN_FD:
        return
    try:
        fd = int(raw)
        os.fstat(fd)
        os.set_inheritable(fd, False)
        _POPCORN_FD.append(os.fdopen(fd, "w", closefd=False))
    except (ValueError, OSError):
        fail_usage(f"{POPCORN_FD_ENV}={raw!r} is not an open file descriptor")


def save(record: RunRecord) -> Path:
    path = results.save_record(record)
    click.echo(f"result: {results.shown(path)}", err=True)
    return path


def finish(record: RunRecord) -> None:
    """Exit as the record says: its signal's code when Ctrl-C or SIGTERM stopped it (the record is
    written, marked incomplete), 0 pass, 112 fail."""
    if record.incomplete:
        click.echo(f"incomplete: {record.incomplete}; what was measured is in the record above", err=True)
        sys.exit(getattr(record, "exit_code", None) or 130)
    sys.exit(0 if record.passed else EXIT_FAIL)


def no_tui(fn):
    """--no-tui (popcorn-cli's flag): plain progress lines instead of a progress bar."""
    def disable(ctx, param, value):
        if value:
            progress.plain()
        return value
    return click.option("--no-tui", is_flag=True, expose_value=False, callback=disable, is_eager=True,
                        help="Plain progress lines, no progress bar (as popcorn-cli's --no-tui).")(fn)


def output_options(formats=("table", "json", "markdown")):
    """--format and -o, the same meaning on every command: how the report is printed, and a file it
    is also written to."""
    def decorate(fn):
        fn = click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
                          callback=writable_output, help="Also write the report, as printed, to this file.")(fn)
        return click.option("--format", "fmt", type=click.Choice(list(formats)), default="table",
                            show_default=True)(fn)
    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@no_tui
@click.option("--problem", "problem_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A problem folder in the leaderboard's layout (task.yml, task.py, reference.py); default: "
                   "the current directory if it is one, else this repository's own problem.")
@click.option("--sandbox", "sandbox_level", type=click.Choice(["full", "cuda-first", "no-uid", "none"]), default=None,
              help="Start workers at this sandbox level (as EVAL_SANDBOX) instead of the level this machine reaches "
                   "(python -m eval doctor finds it); leaderboard and batch judge below full only when chosen.")
@click.pass_context
def main(ctx, problem_dir, sandbox_level):
    """Local harness for GPU MODE leaderboard problems: same checks, same timing method.

    SUB is a submission file (e.g. submission/v5.py) defining custom_kernel(data). It runs in a
    sandboxed worker; every verdict and every checked output is decided in this process.
    """
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if sandbox_level:
        os.environ["EVAL_SANDBOX"] = sandbox_level
    elif os.environ.get("EVAL_SANDBOX") and os.environ["EVAL_SANDBOX"] not in ("full", "cuda-first", "no-uid", "none"):
        fail_usage(f"EVAL_SANDBOX={os.environ['EVAL_SANDBOX']} is not one of full, cuda-first, no-uid, none")
    if os.environ.get("EVAL_SANDBOX_SKIP") and ctx.invoked_subcommand != "doctor":
        fail_usage("EVAL_SANDBOX_SKIP leaves sandbox layers out for diagnosis (python -m eval doctor) only: unset it")
    signal.signal(signal.SIGTERM, _terminated)  # batch's --limit asks first: workers are closed on the way out
    try:
        case_files.secret_seed()  # taken from the environment before anything else starts
    except ConfigError as exc:
        fail_usage(str(exc))
    open_popcorn_fd()
    progress.enable()
    try:
        problem_folder.use(problem_dir)
    except problem_folder.ProblemError as exc:
        fail_usage(str(exc))
    except Exception as exc:  # problem.py itself does not import
        fail_usage(f"the problem's problem.py does not import: {type(exc).__name__}: {exc}")
    own = problem_folder.current().own_evaluator
    if own is not None and ctx.invoked_subcommand not in OWN_CONTRACT_COMMANDS:
        fail_usage(f"{problem_folder.current().root} has its own contract (no task.py; its evaluator is {own.name}): "
                   f"only {', '.join(sorted(OWN_CONTRACT_COMMANDS))} run it")


# what runs on a folder of its own contract (eval/judge/own_contract.py: its evaluator, in the sandbox)
OWN_CONTRACT_COMMANDS = {"test", "benchmark", "leaderboard", "batch", "conform", "doctor"}


def _terminated(signum, frame):
    """SIGTERM: leave through the usual exits, so that every worker is closed (killed whole, its
    folders deleted) on the way out."""
    raise SystemExit(128 + signum)


@main.command()
@click.argument("sub", type=SUB)
@run_options("tests")
@handle_config_errors
def test(sub, case_set, dist, method, batch, gap_us, timeout, fmt, output, fail_narrow, emulate_blackwell):
    """Correctness on task.yml's tests, with the anti-cheat checks (judged outside the worker)."""
    record = _judge(sub, "test", case_set, None, method=method, batch=batch, gap_us=gap_us, timeout=timeout,
                    dist=dist, fail_narrow=fail_narrow, emulate_blackwell=emulate_blackwell)
    save(record)
    emit(record, fmt, output)
    finish(record)


def _judge(sub, mode, case_set, runner, **option_values) -> RunRecord:
    """api.judge, with its option errors as one usage line."""
    try:
        return api.judge(sub, mode, cases=case_set, runner=runner, **option_values)
    except ValueError as exc:
        fail_usage(str(exc))


def _benchmark(sub, case_set, dist, method, batch, gap_us, timeout, fmt, output, fail_narrow, emulate_blackwell,
               leaderboard: bool, runner=None, options: modes.Options | None = None, before: str | None = None):
    """Benchmark (or leaderboard) mode, saved and printed. options: judge's options made by the
    caller (`run` on a CPU: its reduced budget), else made from the option values."""
    if options is not None:
        record = modes.run_benchmarks(sub, case_files.select_cases(case_set), options, leaderboard=leaderboard,
                                      runner=runner)
        sol.annotate(record)
    else:
        record = _judge(sub, "leaderboard" if leaderboard else "benchmark", case_set, runner, method=method,
                        batch=batch, gap_us=gap_us, timeout=timeout, dist=dist, fail_narrow=fail_narrow,
                        emulate_blackwell=emulate_blackwell)
    save(record)
    emit(record, fmt, output, before)
    return record


@main.command()
@click.argument("sub", type=SUB)
@run_options("benchmarks")
@handle_config_errors
def benchmark(**kwargs):
    """Time task.yml's benchmarks as the leaderboard's benchmark mode does."""
    finish(_benchmark(**kwargs, leaderboard=False))


@main.command()
@click.argument("sub", type=SUB)
@run_options("benchmarks")
@handle_config_errors
def leaderboard(**kwargs):
    """Leaderboard mode: anti-cheat checks, then every timed run on a new input, rechecked."""
    finish(_benchmark(**kwargs, leaderboard=True))


# `make eval` without CUDA: what a CPU answers usefully in about two minutes (every run's output is
# checked against the exact reference, which on a CPU costs more than the kernel): the full test set,
# then shapes.yaml's `cpu` set (else task.yml's benchmarks) with at most this many timed runs per case
CPU_SET = "cpu"
CPU_BUDGET = {"warmup": (2, 1e8), "case": (5, 1e9)}
CPU_WALL_CAP_S = 5.0


def reduce_for_cpu(options: modes.Options) -> None:
    """CPU_BUDGET's timed runs, no host-cost column, CPU_WALL_CAP_S a case (`run` and `rank` without CUDA)."""
    options.budget, options.host_cost, options.wall_cap_s = CPU_BUDGET, False, CPU_WALL_CAP_S


@main.command()
@click.argument("sub", type=SUB, required=False)
@run_options(None)
@click.option("--full", is_flag=True,
              help="Without CUDA too: task.yml's benchmarks with the leaderboard's run budget (tens of minutes "
                   "on a CPU); by default a CPU runs a reduced set.")
@handle_config_errors
def run(sub, case_set, dist, method, batch, gap_us, timeout, fmt, output, fail_narrow, emulate_blackwell, full):
    """`make eval`: test on task.yml's tests, then benchmark; SUB defaults to the best runnable here.
    Without CUDA the benchmark is reduced (at most 5 timed runs per case, on shapes.yaml's `cpu` set
    unless --cases picks others) unless --full is given."""
    sub = sub or _relative(best_runnable())
    click.echo(f"submission: {sub}", err=True)
    options = make_options(method, batch, gap_us, timeout, dist, fail_narrow, emulate_blackwell)
    reduced = not full and not _cuda()
    if not _cuda():
        what = ("task.yml's benchmarks with the leaderboard's run budget (--full: tens of minutes)" if full else
                f"a reduced benchmark (--cases {case_set or _cpu_set()}, at most {CPU_BUDGET['case'][0]} timed runs "
                f"per case, no host-cost column; --full for the leaderboard's budget)")
        click.echo(f"no CUDA GPU: every time below is a CPU host-timer number (wall time of the call on this CPU), "
                   f"not a GPU time. Running the full test set, then {what}.", err=True)
    with modes.runner_for(sub, options, None) as runner:  # one worker tests and benchmarks
        tested = modes.run_tests(sub, case_files.select_cases("tests"), options, runner)
        save(tested)
        # -o: the test half now (kept if the tests fail), both halves below; JSON: one list, printed at the end
        tested_text = emit(tested, fmt, output, echo=fmt != "json")
        if not tested.passed:
            if fmt == "json":
                print_alone(tested_text, fmt, output)
            finish(tested)
        if reduced and not tested.environment.cuda_available:
            case_set = case_set or _cpu_set()
            reduce_for_cpu(options)
        case_set = case_set or "benchmarks"
        ensure_floors(tested.environment, case_files.select_cases(case_set), options)
        record = _benchmark(sub, case_set, dist, method, batch, gap_us, timeout, fmt, output, fail_narrow,
                            emulate_blackwell, leaderboard=False, runner=runner, options=options, before=tested_text)
    finish(record)


def _cpu_set() -> str:
    return CPU_SET if CPU_SET in case_files.set_names() else "benchmarks"


@main.command()
@click.argument("sub", type=SUB)
@run_options("benchmarks")
@click.option("--ncu", is_flag=True, help="Run each case under Nsight Compute (ncu must be on PATH).")
@handle_config_errors
def profile(sub, case_set, dist, method, batch, gap_us, timeout, fmt, output, fail_narrow, emulate_blackwell, ncu):
    """Torch profiler table of the submission's kernels per case (or Nsight Compute with --ncu)."""
    options = make_options(method, batch, gap_us, timeout, dist, fail_narrow, emulate_blackwell)
    cases = case_files.select_cases(case_set)
    if ncu:
        sys.exit(_profile_ncu(sub, case_set, dist, timeout))
    record = modes.run_profile(sub, cases, options)
    save(record)
    emit(record, fmt, output)
    finish(record)


# what a memory-bound kernel needs to be judged by (the full set takes ~40 replays per kernel)
NCU_SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "SchedulerStats",
                "WarpStateStats")


def _profile_ncu(sub: Path, case_set: str, dist, timeout: float) -> int:
    ncu = shutil.which("ncu")
    if not ncu:
        fail_usage("ncu (Nsight Compute) is not on PATH; install it or run `profile` without --ncu")
    out_dir = results.RESULTS_DIR / "ncu"
    out_dir.mkdir(parents=True, exist_ok=True)
    report_base = out_dir / f"{results.now_stamp()}-{results.slug(sub.stem)}"
    sections = [arg for name in NCU_SECTIONS for arg in ("--section", name)]
    cmd = [ncu, "--nvtx", "--nvtx-include", "custom_kernel/", *sections, "--target-processes", "all",
           "-o", str(report_base), sys.executable, "-m", "eval.ncu_target", str(sub), case_set]
    if dist:
        cmd.append(dist)
    click.echo(" ".join(cmd), err=True)
    code = subprocess.call(cmd, timeout=timeout * 4)
    subprocess.call([ncu, "--import", f"{report_base}.ncu-rep", "--page", "details"])
    return code


def measure_floors(cases: list, options: modes.Options):
    """Measure and cache this GPU's floors for the cases (in a harness worker of the judge's)."""
    from eval import baselines

    env, measured = baselines.measure_floors(cases, options)
    return env, measured, sol.save_floors(env, measured)


def ensure_floors(environment, cases: list, options: modes.Options) -> None:
    """Measure this GPU's floors first when none are cached, so reports can show × floor and the
    judge can fail results faster than memory allows (benchmark and leaderboard measure them
    themselves too)."""
    from eval import baselines

    missing = sol.missing_floors(environment.gpu, cases) if environment.cuda_available else []
    if missing:
        click.echo(f"no floor cached on {environment.gpu} for {len(missing)} case(s): measuring first "
                   "(python -m eval sol)", err=True)
        baselines.ensure_floors(environment, missing, options)


@main.command(name="sol")
@click.option("--cases", "case_set", callback=case_set_name, default="benchmarks", show_default=True)
@click.option("--timeout", default=600.0, show_default=True, callback=seconds, help="Seconds per case before the worker is killed.")
@output_options(("table", "json"))
@handle_config_errors
def sol_command(case_set, timeout, fmt, output):
    """Measure this GPU's streaming-read peak and the floor of each case; cache under results/.
    Needs a CUDA GPU (exit 3 without one)."""
    cases = case_files.select_cases(case_set)
    if not _cuda():
        click.echo("error: sol measures a GPU's memory bandwidth and needs a CUDA GPU; none is visible here "
                   "(torch.cuda.is_available() is False)", err=True)
        sys.exit(EXIT_NO_GPU)
    try:
        env, measured, path = measure_floors(cases, make_options(timeout=timeout))
    except modes.WorkerFailure as exc:
        click.echo(f"error: speed-of-light measurement failed: {one_line(exc.reason)}", err=True)
        sys.exit(EXIT_FAIL)
    figures = case_files.gpu_figures(env.gpu) or {}
    if fmt == "json":
        import json

        text = json.dumps({"gpu": env.gpu, **measured}, indent=1, default=str)
    else:
        lines = [f"{env.gpu}: streaming read {measured['peak_read_tb_s']:.2f} TB/s "
                 f"(datasheet {figures.get('peak_tb_s', '?')} TB/s)"]
        for name, floor in measured["floors"].items():
            lines.append(f"  floor {name:>16}: {floor['median_ns'] / 1e3:7.2f} µs  ({floor['bytes'] / 1e6:.1f} MB, "
                         f"{floor['tb_s']:.2f} TB/s)")
        text = "\n".join(lines)
    click.echo(text)
    write_output(text, output)
    click.echo(f"saved: {results.shown(path)}", err=True)


@main.command()
@click.argument("a", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("b", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--cases", "case_set", callback=case_set_name, default="benchmarks", show_default=True)
@click.option("--rounds", default=10, show_default=True, help="A/B alternations per case.")
@click.option("--per-round", default=20, show_default=True, help="Timed runs per submission per round.")
@click.option("--timing", "method", type=click.Choice(["per-call", "batched"]), default=None)
@click.option("--fail-if-slower", type=float, default=None, metavar="PCT",
              help="Exit 1 when B is slower than A by more than PCT percent, with 95 % confidence.")
@click.option("--timeout", default=600.0, show_default=True, callback=seconds, help="Seconds per case before the worker is killed.")
@output_options(("table", "json", "markdown", "popcorn"))
@handle_config_errors
def compare(a, b, case_set, rounds, per_round, method, fail_if_slower, timeout, fmt, output):
    """Is B faster than A? Interleaved runs, ratio B/A with a 95 % bootstrap interval.

    A and B are submission files or result JSONs from earlier runs."""
    from eval import compare as comparing

    if rounds < 1 or per_round < 2:
        fail_usage("--rounds must be >= 1 and --per-round >= 2")
    if fail_if_slower is not None and not (math.isfinite(fail_if_slower) and fail_if_slower >= 0):
        fail_usage(f"--fail-if-slower {fail_if_slower}: a percentage of 0 or more")
    try:
        outcome = comparing.compare(a, b, case_files.select_cases(case_set),
                                    make_options(method=method, timeout=timeout), rounds, per_round)
    except ValueError as exc:
        fail_usage(str(exc))
    text = comparing.render(outcome, fmt)
    click.echo(text)
    write_output(text, output)
    to_popcorn_fd(comparing.popcorn(outcome))
    if outcome.error:
        sys.exit(EXIT_FAIL)
    if fail_if_slower is not None and comparing.slower_beyond(outcome, fail_if_slower):
        click.echo(f"regression: B is slower than A by more than {fail_if_slower} % (95 % confidence)", err=True)
        sys.exit(1)


@main.command()
@click.argument("subs", nargs=-1, type=SUB)
@click.option("--cases", "case_set", callback=case_set_name, default=None,
              help="Case set (default: benchmarks; without CUDA a reduced `cpu` set, as `make eval`).")
@click.option("--timing", "method", type=click.Choice(["per-call", "batched"]), default=None)
@click.option("--timeout", default=600.0, show_default=True, callback=seconds, help="Seconds per case before the worker is killed.")
@click.option("--fail-narrow/--allow-narrow", "fail_narrow", default=False, show_default=True,
              help="Narrow-data specialisation: the leaderboard's pass with a warning, or a failure.")
@output_options(("table", "json", "markdown"))
@handle_config_errors
def rank(subs, case_set, method, timeout, fail_narrow, fmt, output):
    """Local leaderboard: test and benchmark each submission (default: all in submission/)."""
    from eval import rank as ranking
    from eval.submissions import all_submissions

    subs = list(subs) or all_submissions()
    options = make_options(method=method, timeout=timeout, fail_narrow=fail_narrow)
    if case_set is None and not _cuda():  # the leaderboard's budget on a CPU: tens of minutes a submission
        case_set = _cpu_set()
        reduce_for_cpu(options)
        click.echo(f"no CUDA GPU: CPU host-timer numbers on a reduced benchmark (--cases {case_set}, at most "
                   f"{CPU_BUDGET['case'][0]} timed runs per case; --cases benchmarks for the leaderboard's)", err=True)
    case_set = case_set or "benchmarks"
    ensure_floors(modes.describe_environment(), case_files.select_cases(case_set), options)
    outcome = ranking.rank(subs, case_files.select_cases("tests"), case_files.select_cases(case_set), options)
    if fmt == "json":
        text = ranking.as_json(outcome)
    else:  # the table is the markdown table
        text = outcome.text + (f"\n[{report.HOST_TIMER}]" if not _cuda() else "")
    click.echo(text)
    write_output(text, output)
    stopped = next((r.incomplete for r in outcome.rows if r.incomplete), None)
    if stopped:
        sys.exit(143 if "exit 143" in stopped else 130)
    sys.exit(0 if outcome.ranked else EXIT_FAIL)


@main.command()
@click.argument("candidates", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--mode", type=click.Choice(["test", "benchmark", "leaderboard"]), default="benchmark", show_default=True)
@click.option("--cases", "case_set", callback=case_set_name, default=None, help="Case set (default: the mode's own).")
@click.option("--timeout", default=600.0, show_default=True, callback=seconds, help="Seconds per case before a worker is killed.")
@click.option("--limit", default=1800.0, show_default=True, callback=seconds, help="Seconds per candidate before its judge is killed.")
@click.option("--jobs", type=int, default=None, help="Judges at once (default: one per GPU; 1 without CUDA).")
@click.option("--fail-narrow/--allow-narrow", "fail_narrow", default=False, show_default=True)
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Judge on a Ray cluster, one actor per GPU: local (start one here), auto, host:port or "
                   "ray://host:port (join one; the harness is shipped to it). Needs `pip install ray`.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              callback=writable_output,
              help="The JSONL of verdicts (default: results/batch.jsonl); a rerun skips what it holds.")
def batch(candidates, mode, case_set, timeout, limit, jobs, fail_narrow, ray_address, output):
    """Judge many candidates (files, folders, JSONL of {"id", "source"}) with the same options, one
    judge per GPU at a time (here, or on a Ray cluster with --ray); one JSON line per candidate as it
    finishes; standings at the end."""
    from eval import batch as batching
    from eval import batch_view

    if jobs is not None and jobs < 1:
        fail_usage("--jobs must be at least 1")
    if jobs and jobs > 1 and batching.cpu_jobs(mode, jobs) == 1 and ray_address is None and not _cuda():
        click.echo(f"note: {mode} without CUDA judges one candidate at a time (the cores are what is timed); "
                   "--jobs applies to --mode test", err=True)
    judge_all = _batch_runner(ray_address)
    output = output or results.RESULTS_DIR / "batch.jsonl"
    args = ["--timeout", str(timeout)] + (["--cases", case_set] if case_set else []) + \
        (["--fail-narrow"] if fail_narrow else [])
    try:
        found = batching.collect(list(candidates), output.parent / "batch-sources")
    except (ValueError, OSError) as exc:
        fail_usage(str(exc))
    if not found:
        fail_usage(f"no candidates in {', '.join(map(str, candidates))}: give .py files, folders holding them, "
                   "or a JSONL of {\"id\", \"source\"} lines")
    key = batching.options_key(mode, args)
    started = time.monotonic()
    todo = len(batching.pending(found, key, output))
    if todo < len(found):
        click.echo(f"{len(found) - todo} of {len(found)} candidates already judged with these options in {output}: "
                   f"kept, not judged again (another -o, or delete the file, to judge them anew)")
    with batch_view.progress(todo) as progress:
        try:
            lines = judge_all(found, mode, args, output, jobs=jobs, limit=limit, progress=progress)
        except (ConnectionError, ValueError) as exc:
            fail_usage(str(exc))
    wall = time.monotonic() - started
    devices = batching.slots(jobs, mode)
    share = batching.busy_share(lines or [], wall, len(devices))
    if share is not None and ray_address is None:
        ahead = "builds ran ahead on the CPU cores" if batching.builds_ahead(mode, devices) else \
            "no builds ahead: on a CPU the cores are what is timed"
        click.echo(f"slots busy: {share:.0%} of {wall:.0f} s ({'GPU' if _cuda() else 'CPU'} slots held by a judge; {ahead})")
    board = [e for e in batching.standings(output, key) if e["sha256"] in {c.sha256 for c in found}]
    click.echo(batch_view.standings(board))
    if mode != "test" and not _cuda() and ray_address is None:
        from eval import compare as comparing

        load, cpus = comparing.machine_load(), os.cpu_count() or 1
        if comparing.busy(load, cpus):
            click.echo(f"warning: the machine was busy (load average {load:.1f} on {cpus} CPUs): host-timer times "
                       "of candidates judged at different moments are not comparable; `compare A B` interleaves two")
        click.echo(f"[{report.HOST_TIMER}]")
    click.echo(f"{sum(e['passed'] for e in board)} of {len(board)} passed; verdicts: {output}")
    sys.exit(0 if board and all(e["passed"] for e in board) else EXIT_FAIL)


def _relative(path: Path) -> Path:
    """A path under the current folder as a relative one (shorter titles)."""
    try:
        return Path(path).resolve().relative_to(Path.cwd())
    except ValueError:
        return Path(path)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _batch_runner(ray_address: str | None):
    """batch.run, or batch_ray.run on the cluster at ray_address (a usage error when Ray is missing)."""
    from eval import batch as batching

    if ray_address is None:
        return batching.run
    from eval import batch_ray

    why = batch_ray.missing()
    if why:
        fail_usage(why)
    return functools.partial(batch_ray.run, address=ray_address)


@main.command()
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--timing", is_flag=True,
              help="Both evaluators' benchmark mode instead of test: ours/official per case, one row per GPU at once.")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(1, 20),
              help="With --timing: runs of each side, the order swapped every round; means over the rounds.")
@click.option("--only", default=None, metavar="REGEX", help="Only problem folders whose path matches.")
@click.option("--solutions", default=None, metavar="REGEX", help="Only solutions whose path in the folder matches.")
@click.option("--add", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A solution of your own, judged in every folder selected as if shipped there (repeatable).")
@click.option("--jobs", default=1, show_default=True, help="Evaluators at once (verdicts: from 2, a solution's two sides side by side, jobs//2 solutions at once; timing runs one at a time).")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown"]), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              callback=writable_output,
              help="Also write the table to this file (markdown: each row as it is decided, the whole table at the end).")
@click.option("--limit", default=300.0, show_default=True, callback=lambda c, p, v: v if v == 0 else seconds(c, p, v),
              help="Seconds per side and solution: a hang costs its own row only (0: the task's own timeouts).")
@click.option("--jsonl", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Rows as they are decided, one JSON line each; a rerun reuses the rows it holds (resume). "
                   "Default: beside -o (its name with .jsonl).")
def conform(path, timing, rounds, only, solutions, add, jobs, fmt, output, limit, jsonl):
    """Our verdict beside the leaderboard's own evaluator on every problem folder and shipped solution
    under PATH (a reference-kernels checkout, a series folder, or one problem). Exit 1 on a verdict
    that differs where both ran. The official evaluator runs solutions unsandboxed, as its runner does."""
    from eval import conform as conformance

    for name, pattern in (("--only", only), ("--solutions", solutions)):
        try:
            re.compile(pattern or "")
        except re.error as exc:
            fail_usage(f"{name} {pattern!r} is not a regular expression: {exc}")
    if jobs < 1:
        fail_usage("--jobs must be >= 1")
    if not conformance.find_problems(path):
        fail_usage(f"{path} holds no problem folder (task.yml, task.py, reference.py); "
                   "give a checkout of gpu-mode/reference-kernels or a folder in it")
    jsonl = jsonl or (output.with_suffix(".jsonl") if output else None)
    if output and fmt == "markdown":  # streamed: a stopped run keeps the rows decided so far
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(conformance.markdown_header() + "\n")

    def progress(row):
        click.echo(f"  {row.problem}/{row.solution}: official {conformance.verdict_text(row.official)}, "
                   f"ours {conformance.verdict_text(row.ours)}", err=True)
        if output and fmt == "markdown":
            with open(output, "a") as out:
                out.write(conformance.markdown_row(row) + "\n")

    rows = conformance.conform(path, timing, only, progress, jobs, solutions, tuple(add), limit or None, jsonl,
                               rounds)
    text = (conformance.render(rows, fmt) + "\n" + conformance.summary(rows) + "\n\n"
            + conformance.series_table(rows, fmt))
    click.echo(text)
    write_output(text, output)
    sys.exit(1 if any(r.agree is False for r in rows) else 0)


@main.command()
@click.argument("sub", type=SUB)
@click.option("--cases", "case_set", callback=case_set_name, default="quantized", show_default=True)
@click.option("--timeout", default=600.0, show_default=True, callback=seconds, help="Seconds per case before the worker is killed.")
@output_options(("table", "json", "markdown"))
@handle_config_errors
def accuracy(sub, case_set, timeout, fmt, output):
    """Accuracy on realistic data against the exact product; needs the problem module's accuracy()."""
    from eval import accuracy as acc

    acc.require()
    record = acc.run(sub, case_files.select_cases(case_set), make_options(timeout=timeout))
    save(record)
    text = report.render(record, "json") if fmt == "json" else acc.render(record, fmt)
    if fmt != "json" and not record.environment.cuda_available:
        text += f"\n[{report.HOST_TIMER}]"
    if fmt != "json" and report.log_line(record):
        text += "\n" + report.log_line(record)
    click.echo(text)
    write_output(text, output)
    finish(record)


@main.command()
@click.argument("sub", type=SUB)
@click.option("--cases", "case_set", callback=case_set_name, default="benchmarks", show_default=True)
@click.option("--runs", default=100, show_default=True, help="Timed runs per configuration and case.")
@click.option("--write", is_flag=True, help="Put the row found into the submission's TUNED table (this GPU's row).")
@click.option("--timeout", default=600.0, show_default=True, callback=seconds)
@handle_config_errors
def tune(sub, case_set, runs, write, timeout):
    """Time every launch configuration a submission exposes (CONFIGS, run_with); outputs checked.
    Prints the TUNED table row found for this GPU; --write puts it into the submission."""
    from eval import tune as tuning

    if runs < 2:
        fail_usage("--runs must be >= 2")
    missing = _tunable_names_missing(sub)
    if missing:
        fail_usage(f"{sub} defines no {' and no '.join(missing)}: tune times the launch configurations a "
                   "submission lists in CONFIGS through run_with(data, config) (docs/modes.md)")
    try:
        result = tuning.run(sub, case_files.select_cases(case_set), make_options(timeout=timeout), runs, write,
                            click.echo)
    except tuning.TableError as exc:
        fail_usage(f"{exc}: copy the row above by hand")
    sys.exit(0 if result.ok else EXIT_FAIL)


def _tunable_names_missing(sub: Path) -> list[str]:
    """The names tune needs that the file does not define at its top level (read, never run; a file
    that does not parse is left to the worker, which says why)."""
    import ast

    try:
        tree = ast.parse(Path(sub).read_text())
    except (SyntaxError, ValueError, OSError, UnicodeDecodeError):
        return []
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif not isinstance(node, ast.Expr):
            return []  # names made under if/try/with/for: left to the worker
    return [n for n in ("CONFIGS", "run_with") if n not in names]


def _disable_tui(ctx, param, value):
    if value:
        progress.plain()
    return value


@main.command()
@click.option("--workers", default=16, show_default=True, help="Workers started side by side at the machine's level.")
@click.option("--skip", default=lambda: os.environ.get("EVAL_SANDBOX_SKIP", ""),
              help="Diagnosis: layers to leave out (comma-separated; default EVAL_SANDBOX_SKIP). Judges nothing.")
@click.option("--bisect", is_flag=True, help="Diagnosis: every layer alone and every layer left out, one worker each.")
@click.option("--jobs", default=8, show_default=True, help="Workers at once for --bisect.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              callback=writable_output,
              help="Also write the findings as JSON here.")
def doctor(workers, skip, bisect, jobs, fmt, output):
    """Run first on a new machine: the GPU as a sandboxed worker sees it, each sandbox layer, the level
    this machine reaches (found again and kept), worker start time, N workers side by side.
    Exit 0 when every worker reaches full with CUDA working, 1 when not."""
    from eval import doctor as checks
    from eval.worker.sandbox import LAYERS

    names = tuple(n.strip() for n in skip.split(",") if n.strip())
    unknown = [n for n in names if n not in LAYERS]
    if unknown:
        fail_usage(f"--skip {','.join(unknown)}: not a layer (layers: {', '.join(LAYERS)})")
    if workers < 1 or jobs < 1:
        fail_usage("--workers and --jobs must be >= 1")
    sys.exit(checks.main(workers=workers, skip=names, bisect=bisect, jobs=jobs, fmt=fmt, output=output))


for _command in main.commands.values():  # --no-tui after any command too (popcorn-cli's habit)
    _command.params.append(click.Option(["--no-tui"], is_flag=True, expose_value=False, is_eager=True,
                                        callback=_disable_tui, help="Plain progress lines, no progress bar."))


if __name__ == "__main__":
    cli()
