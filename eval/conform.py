"""`python -m eval conform PATH`: our verdict beside the leaderboard's own, on its own problem folders.

PATH is a checkout of gpu-mode/reference-kernels, a series folder in it (problems/pmpp_v2), or one
problem folder. For every problem folder found (task.yml, task.py, reference.py) and every solution it
ships (submission.py, solutions/**/*.py), two runs on this machine:
  official  the folder's own evaluator (task.yml `files` / `config.main`), staged and called the way
            the leaderboard's runner calls it: the files copied into a scratch folder, the cases
            written one per line as "key: value; ...", `python3 eval.py MODE CASES` with the write
            end of a pipe in POPCORN_FD, the pipe's "key: value" lines read back, check == pass.
  ours      `python -m eval --problem FOLDER MODE SOLUTION --format json` in its own process.
Where the official evaluator cannot run here (no GPU, or a Blackwell-only call on an older GPU) the
row says so and shows ours alone; ours then runs with --emulate-blackwell where the folder's reference
needs the FP4 GEMM this GPU lacks. With `--timing`, both run their benchmarks and the row gives
ours/official per case. Exit 1 when a verdict differs where both ran.

A side that needs what this machine lacks (a package that is not installed, a CUDA GPU) is "cannot
run" with what it needs (eval/needs.py), never a failure. Rows stream: each is written as it is
decided to the JSONL file (and the markdown/table file) and a rerun with the same JSONL skips the
rows it holds (resume); each solution has its own time limit (per side), so a hang costs its row only.
A folder in another layout (no task.py: its own contract) still gets a row: the official evaluator's
verdict beside ours "cannot run" with why.

The official evaluator runs the solutions unsandboxed (as the leaderboard's runner does): run conform
on code you trust, e.g. the checkout's own solutions. This module never imports solution code.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from eval import needs, problem_folder
from eval.batch import Candidate, judge_one, last_error

SUBMISSION_MARK = "@SUBMISSION@"  # task.yml's `files` source standing for the submission
DEFAULT_TIMEOUT = 180.0  # the runner's, where task.yml names none
PASSING_CODES = (0, 112)  # the evaluator's exit codes for "ran" (112: ran, a check failed)
PYTHONPATH_ENV = "EVAL_CONFORM_PYTHONPATH"  # PYTHONPATH for the official evaluator only
SOLUTION_LIMIT = 300.0  # seconds per side and solution (--limit): a hang costs its own row only


@dataclasses.dataclass
class Side:
    """One evaluator's outcome for one solution."""
    ran: bool  # False: could not run here (why in reason)
    passed: bool = False
    reason: str = ""
    means_ns: list = dataclasses.field(default_factory=list)  # per benchmark case, with --timing (mean of rounds)
    seconds: float = 0.0
    rounds_ns: list = dataclasses.field(default_factory=list)  # with --timing: each round's means_ns


@dataclasses.dataclass
class Row:
    problem: str
    solution: str
    evaluator: str
    official: Side
    ours: Side
    emulated: bool = False
    sha256: str = ""  # the solution's (resume: a row is reused only for the same file)
    timing: bool = False  # decided with --timing (resume reuses rows of the same kind)

    @property
    def series(self) -> str:
        """The folder holding the problem folder, e.g. problems/pmpp."""
        return str(Path(self.problem).parent)

    @property
    def key(self) -> tuple:
        return (self.problem, self.solution, self.sha256, self.timing)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Row":
        fields = {f.name for f in dataclasses.fields(Side)}
        sides = {k: Side(**{n: v for n, v in (d.get(k) or {}).items() if n in fields}) for k in ("official", "ours")}
        names = {f.name for f in dataclasses.fields(cls)} - {"official", "ours"}
        return cls(**{k: v for k, v in d.items() if k in names}, **sides)

    @property
    def agree(self) -> bool | None:
        return None if not self.official.ran or not self.ours.ran else self.official.passed == self.ours.passed

    @property
    def ratios(self) -> list:
        official = self.official.means_ns  # ranking_by "last": both time the last case only
        mine = self.ours.means_ns[-len(official):] if official else []
        return [o / f for o, f in zip(mine, official) if o and f]

    @property
    def ratio_ranges(self) -> list:
        """Per case, (lowest, highest) of ours/official over the rounds, round i against round i."""
        pairs = [Row(self.problem, self.solution, "", Side(True, means_ns=f), Side(True, means_ns=o)).ratios
                 for o, f in zip(self.ours.rounds_ns, self.official.rounds_ns)]
        return [(min(col), max(col)) for col in zip(*pairs)] if len(pairs) > 1 else []


# -- what a checkout holds --------------------------------------------------------------------------

def find_problems(path: Path) -> list[Path]:
    """Problem folders at or under path: a task.yml beside a reference.py (the leaderboard's layout
    adds task.py; a folder without one has its own contract, and gets a row all the same)."""
    path = path.resolve()
    found = [t.parent for t in sorted(path.rglob("task.yml")) if (t.parent / "reference.py").is_file()]
    return [p for p in found if not any(part.startswith(".") for part in p.relative_to(path).parts)]


def our_layout(folder: Path) -> str | None:
    """None where ours can judge the folder (task.py, reference.py with generate_input, ref_kernel and
    check_implementation, a custom_kernel submission; or a folder of its own contract, no task.py and
    its own evaluator, which ours runs in the sandbox); else why not (read from its files)."""
    try:
        task = load_task(folder)
    except (OSError, yaml.YAMLError) as exc:
        return f"task.yml cannot be read: {exc}"
    if task.get("multi_gpu"):
        return (f"a multi-GPU problem (task.yml multi_gpu: true, world_size {world_size(task) or '?'}): ours judges "
                f"one process on one GPU")
    if problem_folder.own_evaluator(folder) is not None:
        return None  # its own contract: ours runs its evaluator in the sandbox (eval/judge/own_contract.py)
    if not (folder / "task.py").is_file():
        return ("not the custom_kernel(data) layout: the folder has no task.py (its own evaluator's contract); "
                "ours judges folders with generate_input, ref_kernel and check_implementation")
    try:
        source = (folder / "reference.py").read_text(errors="replace")
    except OSError as exc:
        return f"reference.py cannot be read: {exc}"
    missing = [name for name in ("generate_input", "ref_kernel", "check_implementation")
               if not re.search(rf"\b{name}\b", source)]
    if missing:
        return f"not the custom_kernel(data) layout: reference.py defines no {', '.join(missing)}"
    return None


def world_size(task: dict) -> int:
    """The most processes (GPUs) a multi-GPU problem's cases ask for (their world_size), or 0."""
    return max([int(c.get("world_size") or 0) for c in [*(task.get("tests") or []), *(task.get("benchmarks") or [])]
                if isinstance(c, dict)] or [0])


def find_solutions(folder: Path) -> list[Path]:
    """The folder's submission.py and every file under solutions/."""
    found = [folder / "submission.py"] if (folder / "submission.py").is_file() else []
    return found + sorted((folder / "solutions").rglob("*.py")) if (folder / "solutions").is_dir() else found


def load_task(folder: Path) -> dict:
    return yaml.safe_load((folder / "task.yml").read_text()) or {}


def spec_lines(cases: list[dict]) -> str:
    """The runner's cases file: one case per line, its keys in task.yml order as "key: value"."""
    return "".join("; ".join(f"{k}: {v}" for k, v in case.items()) + "\n" for case in cases)


def mode_cases(task: dict, mode: str) -> list[dict]:
    if mode == "test":
        return list(task.get("tests") or [])
    benchmarks = list(task.get("benchmarks") or [])
    return benchmarks[-1:] if ranked_last(task) else benchmarks


def ranked_last(task: dict) -> bool:
    return task.get("ranking_by", "last") == "last"


# -- the official evaluator ---------------------------------------------------------------------------

def stage(folder: Path, solution: Path, dest: Path) -> str:
    """Copy what task.yml's `files` name into dest (the submission in its place); returns the
    evaluator's source as task.yml gives it."""
    staged = problem_folder.staging(folder)
    if staged is None:
        raise FileNotFoundError(f"{folder.name}/task.yml cannot be read")
    for name, source in staged.files:
        origin = solution if source == SUBMISSION_MARK else (folder / source)
        if not name or not origin.is_file():
            raise FileNotFoundError(f"{folder.name}/task.yml names {source or '(nothing)'}, which this checkout lacks")
        shutil.copyfile(origin, dest / name)
    return staged.evaluator


def _drain(fd: int, sink: list) -> None:
    with os.fdopen(fd, "r", errors="replace") as reader:
        sink.append(reader.read())


def run_popcorn(args: list[str], cwd: Path, timeout: float, after: tuple = (),
                device: str | None = None) -> tuple[int | None, dict, str]:
    """Run the evaluator with POPCORN_FD (`after`: folders appended to its PYTHONPATH; device: its
    CUDA_VISIBLE_DEVICES); (exit code or None on timeout, the pipe's key: value lines, stderr's tail)."""
    read_end, write_end = os.pipe()
    env = {**os.environ, "POPCORN_FD": str(write_end)}
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    env.pop("POPCORN_SEED", None)  # a public run
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)  # the user's, not the harness's
             if p and Path(p).resolve() != problem_folder.ROOT]
    paths[:0] = [os.environ[PYTHONPATH_ENV]] if os.environ.get(PYTHONPATH_ENV) else []  # e.g. a shim
    env["PYTHONPATH"] = os.pathsep.join([*paths, *map(str, after)])
    proc = subprocess.Popen(args, cwd=cwd, env=env, pass_fds=[write_end], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    os.close(write_end)
    sink: list = []
    reader = threading.Thread(target=_drain, args=(read_end, sink), daemon=True)
    reader.start()
    try:
        _, stderr = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        code = None
    reader.join(timeout=30)
    fields = {}
    for line in (sink[0] if sink else "").splitlines():
        key, _, value = line.partition(":")
        if key.strip():
            fields[key.strip()] = value.strip()
    return code, fields, stderr or ""


FP4_SHIM = '''"""conform: torch._scaled_mm on FP4 as the harness's exact software GEMM in every process of the
official evaluator (this GPU has no FP4 GEMM); then the next sitecustomize on sys.path, if any."""
import importlib.util as _util
import os as _os
import sys as _sys

_spec = _util.spec_from_file_location("_conform_scaled_mm", {module!r})
_emulation = _util.module_from_spec(_spec)
_spec.loader.exec_module(_emulation)
_emulation.install()  # FP4 operands only; no CUDA call here (the evaluator may fork)
_here = _os.path.dirname(_os.path.abspath(__file__))
_seen = [_os.path.abspath(_entry or ".") for _entry in _sys.path]
for _entry in _seen[_seen.index(_here) + 1:] if _here in _seen else ():  # only those after this one
    _next = _os.path.join(_entry, "sitecustomize.py")
    if _os.path.isfile(_next):
        exec(compile(open(_next).read(), _next, "exec"), {{"__name__": "sitecustomize", "__file__": _next}})
        break
'''
FP4_LABEL = " (FP4 _scaled_mm emulated)"  # the evaluator column, where the shim ran


def fp4_shim(folder: Path) -> Path:
    """A folder whose sitecustomize.py installs eval/emulate/scaled_mm.py in a process (for the
    official evaluator of a folder whose reference needs the FP4 GEMM this GPU lacks)."""
    from eval.emulate import scaled_mm

    folder.mkdir()
    (folder / "sitecustomize.py").write_text(FP4_SHIM.format(module=str(Path(scaled_mm.__file__).resolve())))
    return folder


def official(folder: Path, solution: Path, mode: str, timing: bool, emulate: bool = False,
             limit: float | None = None, device: str | None = None) -> tuple[Side, str]:
    """The folder's own evaluator on solution; emulate: with the FP4 shim on its PYTHONPATH (labelled
    in the evaluator's name); limit: seconds at most (else task.yml's timeout, as its runner)."""
    task = load_task(folder)
    started = time.monotonic()
    wanted, here = world_size(task), gpu_count()
    if task.get("multi_gpu") and wanted > here:  # its runner gives it a machine of that many GPUs
        evaluator = (problem_folder.staging(folder) or problem_folder.Staging("eval.py", ())).evaluator
        return Side(False, reason=f"{needs.PREFIX}needs {wanted} GPUs (multi_gpu, world_size {wanted}); this machine "
                                  f"has {here}"), evaluator
    with tempfile.TemporaryDirectory(prefix="conform-") as scratch:
        work = Path(scratch)
        try:
            evaluator = stage(folder, solution, work) + (FP4_LABEL if emulate else "")
        except OSError as exc:
            return Side(False, reason=f"cannot stage: {exc}"), "?"
        shim = (fp4_shim(work / "_fp4"),) if emulate else ()
        (work / "cases.txt").write_text(spec_lines(mode_cases(task, mode)))
        timeout = float(task.get("test_timeout" if mode == "test" else "benchmark_timeout") or DEFAULT_TIMEOUT)
        timeout = min(timeout, limit) if limit else timeout
        main = (problem_folder.staging(folder) or problem_folder.Staging("eval.py", ())).main
        code, fields, stderr = run_popcorn([sys.executable, main, mode, "cases.txt"], work, timeout, shim, device)
    seconds = time.monotonic() - started
    if code is None:
        return Side(False, reason=f"timed out after {timeout:.0f} s (killed)", seconds=seconds), evaluator
    if code not in PASSING_CODES or "check" not in fields:
        lacking = needs.what_is_missing(stderr, cuda_here(), solution.parent)
        if lacking:
            return Side(False, reason=f"{needs.PREFIX}needs {lacking}", seconds=seconds), evaluator
        return Side(False, reason=f"cannot run here (exit {code}): {last_error(stderr)}", seconds=seconds), evaluator
    passed = fields["check"] == "pass"
    reason = "" if passed else _official_reason(fields)
    lacking = None if passed else needs.what_is_missing(reason, cuda_here(), solution.parent)
    if lacking:  # the evaluator said so itself (princeton's: "No CUDA GPU available"): not a verdict
        return Side(False, reason=f"{needs.PREFIX}needs {lacking}", seconds=seconds), evaluator
    means = []
    if timing:
        count = int(fields.get("benchmark-count", 0) or 0)
        means = [float(fields.get(f"benchmark.{i}.mean", 0) or 0) for i in range(count)]
    return Side(True, passed, reason, means, seconds), evaluator


def _official_reason(fields: dict) -> str:
    for key, value in fields.items():
        if key.endswith(".error") or key.endswith(".message") or key == "error":
            return value[:300]
    return ""


# -- ours ---------------------------------------------------------------------------------------------

def ours(folder: Path, solution: Path, mode: str, emulate: bool, timing: bool, limit: float | None = None,
         device: str | None = None) -> Side:
    why_not = our_layout(folder)
    if why_not:
        return Side(False, reason=why_not)
    args = ["--emulate-blackwell"] if emulate else []
    if mode != "test":  # the cases the official evaluator times (mode_cases)
        args += ["--cases", "benchmarks:-1" if ranked_last(load_task(folder)) else "benchmarks"]
    candidate = Candidate(solution.name, solution, "")
    device = device if device is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    judged = judge_one(candidate, mode, args, device, limit, problem=folder)
    record = judged["record"]
    if record is None:
        return Side(False, reason=judged["reason"], seconds=judged["seconds"])
    if record.get("cannot_run"):
        return Side(False, reason=f"{needs.PREFIX}needs {record['cannot_run']}", seconds=judged["seconds"])
    means = [((c.get("stats") or {}).get("mean") or 0) for c in record.get("cases", [])] if timing else []
    return Side(True, judged["passed"], judged["reason"] or "", means, judged["seconds"])


def cuda_here() -> bool:
    """Whether this machine has a CUDA GPU (without starting CUDA in this process)."""
    return gpu_count() > 0


def gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        return 0


def devices() -> list:
    """The GPUs a solution's two runs are spread over (CUDA_VISIBLE_DEVICES values); [None] without."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()] or [None]
    return [str(i) for i in range(gpu_count())] or [None]


def sha256_of(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def needs_emulation(folder: Path) -> bool:
    """The folder's reference calls torch._scaled_mm and this machine has no FP4 GEMM."""
    from eval.emulate import scaled_mm
    from eval.judge.verdict import reference_calls_scaled_mm

    return reference_calls_scaled_mm(folder) and not scaled_mm.fp4_available()


# -- the table ----------------------------------------------------------------------------------------

def conform(path: Path, timing: bool = False, only: str | None = None, progress=None, jobs: int = 1,
            solutions: str | None = None, add: tuple = (), limit: float | None = SOLUTION_LIMIT,
            jsonl: Path | None = None, rounds: int = 1) -> list[Row]:
    """Every solution of every problem under path, in table order (and the files in `add`, judged in
    every problem folder selected, e.g. a kernel of one's own with --only). jobs > 1 runs that many
    evaluators at once, spread over this machine's GPUs: each solution's two sides side by side (a row
    then costs its longer side: bioml/trimul's official evaluator takes about 70 s, ours several
    minutes), jobs // 2 solutions at once. With timing (--timing) a row is both evaluators' benchmark
    mode instead (its verdict is that mode's: each checks every case before timing it), the two one
    after the other on one GPU and nothing else on that GPU meanwhile, one row per GPU at once;
    rounds > 1 repeats the pair, the order swapped every round (official first, then ours first), and
    a side's means are the mean of its rounds. Where the folder's reference needs the FP4 GEMM this GPU lacks, both
    sides run it emulated: ours with --emulate-blackwell, the official evaluator with the FP4 shim
    (labelled). limit: seconds per side and solution. jsonl: every row appended as it is decided;
    rows already there (same problem, solution file and --timing) are reused, not run again.
    progress(row) is called for every row as it is decided (reused ones too)."""
    from concurrent.futures import ThreadPoolExecutor

    base = path.resolve()
    work = []
    for folder in find_problems(base):
        if only and not re.search(only, str(folder.relative_to(base.parent))):
            continue
        emulate = needs_emulation(folder) if our_layout(folder) is None else False
        work += [(folder, solution, emulate) for solution in find_solutions(folder)
                 if not solutions or re.search(solutions, str(solution.relative_to(folder)))]
        work += [(folder, Path(extra).resolve(), emulate) for extra in add]

    def key_of(item) -> tuple:
        folder, solution, _ = item
        name = str(solution.relative_to(folder)) if solution.is_relative_to(folder) else str(solution)
        return (str(folder.relative_to(base.parent)), name, sha256_of(solution), timing)

    done = {row.key: row for row in read_rows(jsonl)} if jsonl else {}
    lock = threading.Lock()
    stopping = threading.Event()  # set on the way out: no new run starts, no row decided by the stop is kept
    gpus = devices()
    together = jobs >= 2 and not timing  # each row's two sides side by side, jobs // 2 rows at once
    rows_at_once = max(1, jobs // 2) if together else len(gpus) if timing else 1  # timing: a GPU each
    slots = list(range(rows_at_once))  # a job slot's GPU: slot % number of GPUs
    # test mode: the official side of a row runs in this pool beside ours (timing rows run both in turn)
    sides = None if timing else ThreadPoolExecutor(max_workers=rows_at_once, thread_name_prefix="conform-official")

    def decide(item) -> Row:
        folder, solution, emulate = item
        problem, name, digest, _ = key_of(item)
        with lock:
            slot = slots.pop(0) if slots else 0
        device = gpus[slot % len(gpus)]
        try:
            if stopping.is_set():
                raise RuntimeError("conform was stopped")
            if timing:
                side, mine, evaluator = timed_pair(folder, solution, emulate, limit, device, rounds, stopping)
                return Row(problem, name, evaluator, side, mine, emulate, digest, timing)
            theirs = sides.submit(official, folder, solution, "test", False, emulate, limit, device)
            if not together:  # one evaluator at a time: ours after the official one
                theirs.result()
                if stopping.is_set():
                    raise RuntimeError("conform was stopped")
            mine = ours(folder, solution, "test", emulate, False, limit, device)  # beside it when together
            side, evaluator = theirs.result()
            row = Row(problem, name, evaluator, side, mine, emulate, digest, timing)
        finally:
            with lock:
                slots.append(slot)
        return row

    def record(row: Row) -> Row:
        with lock:
            if stopping.is_set():
                return row
            if jsonl:
                append_row(jsonl, row)
            if progress:
                progress(row)
        return row

    def reusable(row: Row) -> bool:
        """A timing row of fewer rounds than asked is timed again (one with a failed side keeps its verdict)."""
        return not timing or len(row.ours.rounds_ns) >= rounds or not (row.ours.passed and row.official.passed)

    rows: dict = {}
    todo = []
    for item in work:
        key = key_of(item)
        if key in done and reusable(done[key]):
            rows[key] = done[key]
            if progress:
                progress(done[key])
        else:
            todo.append(item)
    pool = ThreadPoolExecutor(max_workers=rows_at_once)
    try:
        for item, row in zip(todo, pool.map(lambda item: record(decide(item)), todo)):
            rows[key_of(item)] = row
    except BaseException:  # stopped (SIGTERM, Ctrl-C): the rows on disk stay, the runs under way end now
        stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        if sides:
            sides.shutdown(wait=False, cancel_futures=True)
        stop_children()
        raise
    pool.shutdown()
    if sides:
        sides.shutdown()
    return [rows[key_of(item)] for item in work]


def timed_pair(folder: Path, solution: Path, emulate: bool, limit: float | None, device: str | None,
               rounds: int, stopping: threading.Event) -> tuple[Side, Side, str]:
    """Both evaluators' benchmark mode on one GPU, one after the other, `rounds` times with the order
    swapped each round; a side's means_ns is the mean of its rounds (each round's in rounds_ns). Ends
    early where a side did not run or did not pass (nothing to time)."""
    sides: dict = {}
    evaluator = "?"
    for r in range(max(1, rounds)):
        for who in (("official", "ours") if r % 2 == 0 else ("ours", "official")):
            if stopping.is_set():
                raise RuntimeError("conform was stopped")
            if who == "official":
                side, evaluator = official(folder, solution, "benchmark", True, emulate, limit, device)
            else:
                side = ours(folder, solution, "benchmark", emulate, True, limit, device)
            first = sides.setdefault(who, side)
            if side is not first:
                first.seconds += side.seconds
                if not (side.ran and side.passed):  # a later round that failed decides the row
                    first.ran, first.passed, first.reason = side.ran, side.passed, side.reason
            if side.means_ns:
                first.rounds_ns.append(side.means_ns)
        if not all(s.ran and s.passed for s in sides.values()):
            break
    for side in sides.values():
        counts = {len(m) for m in side.rounds_ns}
        side.means_ns = [sum(col) / len(col) for col in zip(*side.rounds_ns)] if len(counts) == 1 else []
    return sides["official"], sides["ours"], evaluator


def stop_children(grace: float = 5.0) -> None:
    """End every run this process started (each is its own session: judges, official evaluators):
    SIGTERM to each group (a judge closes its workers), SIGKILL after `grace`, then the workers a
    judge killed outright left behind are swept."""
    me = str(os.getpid())
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == me:
            children.append(int(stat.parent.name))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in children:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in children):
            time.sleep(0.2)
    try:
        from eval.judge import channel

        channel.sweep_dead()
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass


def append_row(jsonl: Path, row: Row) -> None:
    """One row, one line, flushed to disk at once: a run stopped later keeps it."""
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    with open(jsonl, "a") as out:
        out.write(json.dumps(row.to_json()) + "\n")
        out.flush()
        os.fsync(out.fileno())


def read_rows(jsonl: Path) -> list[Row]:
    """The rows a JSONL file holds (a line cut short by a stopped run is skipped; the last of a key wins)."""
    rows = {}
    try:
        lines = jsonl.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            row = Row.from_json(json.loads(line))
        except (ValueError, TypeError):
            continue
        rows[row.key] = row
    return list(rows.values())


def verdict_text(side: Side) -> str:
    if not side.ran:
        return "cannot run"
    return "pass" if side.passed else "fail"


HEADER = ["problem", "solution", "official", "ours", "same", "ours/official", "evaluator", "reason"]


def markdown_header() -> str:
    return "| " + " | ".join(HEADER) + " |\n" + "|" + "---|" * len(HEADER)


def markdown_row(row: Row) -> str:
    """One row of the markdown table (streamed as it is decided)."""
    return render([row], "markdown").splitlines()[-1]


def render(rows: list[Row], fmt: str = "table") -> str:
    from eval.judge.text import for_markdown, one_line

    header = HEADER
    lines = []
    for r in rows:
        same = {True: "yes", False: "NO", None: "—"}[r.agree]
        spans = r.ratio_ranges
        ratio = " ".join(f"{x:.3f}" + (f" [{spans[i][0]:.3f}-{spans[i][1]:.3f}]" if i < len(spans) else "")
                         for i, x in enumerate(r.ratios)) or "—"
        reason = r.ours.reason if r.agree is not True or not r.ours.passed else ""
        if not r.official.ran:
            reason = (f"ours: {r.ours.reason}; " if r.ours.reason else "") + f"official: {r.official.reason}"
        ours_text = verdict_text(r.ours) + (" (emulated)" if r.emulated else "")
        lines.append([r.problem, r.solution, verdict_text(r.official), ours_text, same, ratio, r.evaluator,
                      one_line(reason)[:240]])
    if fmt == "markdown":
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(for_markdown(c) for c in line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    return "\n".join(out)


def series_table(rows: list[Row], fmt: str = "table") -> str:
    """Per series (the folder holding the problem folders): rows, same verdict, different, and where
    only the official evaluator, only ours, or neither could run here."""
    header = ["series", "rows", "same", "differ", "official cannot run", "ours cannot run", "cannot run both"]
    lines = []
    for series in sorted({r.series for r in rows}):
        mine = [r for r in rows if r.series == series]
        lines.append([series, len(mine), sum(r.agree is True for r in mine), sum(r.agree is False for r in mine),
                      sum(not r.official.ran and r.ours.ran for r in mine),
                      sum(r.official.ran and not r.ours.ran for r in mine),
                      sum(not r.official.ran and not r.ours.ran for r in mine)])
    total = ["all", *(sum(line[i] for line in lines) for i in range(1, len(header)))]
    lines.append(total)
    lines = [[str(c) for c in line] for line in lines]
    if fmt == "markdown":
        return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                          *("| " + " | ".join(line) + " |" for line in lines)])
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
    return "\n".join(["  ".join(h.ljust(w) for h, w in zip(header, widths)),
                      *("  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines)])


def summary(rows: list[Row]) -> str:
    both = [r for r in rows if r.agree is not None]
    differ = [r for r in both if not r.agree]
    alone = sum(1 for r in rows if not r.official.ran)
    ours_alone = sum(1 for r in rows if r.official.ran and not r.ours.ran)
    emulated = sum(1 for r in both if r.evaluator.endswith(FP4_LABEL))
    return (f"{len(rows)} solution(s): {len(both) - len(differ)} same verdict, {len(differ)} different, "
            f"{alone} where the official evaluator cannot run here, {ours_alone} where only ours cannot"
            + (f"; {emulated} of those compared ran the official evaluator with the FP4 GEMM emulated" if emulated else ""))
