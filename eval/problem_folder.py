"""The problem the harness runs: a folder in the leaderboard's format, and what it may add.

The contract every leaderboard problem ships: `task.yml` (tests and benchmarks as keyword dicts),
`task.py`, `reference.py` with `generate_input` / `ref_kernel` / `check_implementation`, and a
submission's `custom_kernel(data)`. The core harness knows only that. A problem may add an optional
`problem.py` beside task.yml (this repository's root has its own problem's) with any of the hooks
below; without one every mode still runs, with the generic checks and columns. `shapes.yaml` beside
task.yml, if present, adds named case sets.

Hooks of problem.py (all optional):
  NAME                         the problem's name in reports and charts
  INPUT_NAMES                  names of generate_input's tensors, in order (for reasons)
  WRITABLE_INPUTS              indices of those a kernel may write (beyond those ref_kernel writes)
  DISTRIBUTIONS, FULL_RANGE    the values `dist` may take; overrides giving every value the
  NARROW_NOTE                  format can hold (a kernel right only without them fails)
  WORKER_ENV                   environment variables the worker may see
  validate_case(args)          raise ValueError for a case the problem does not allow
  canary_regions(args)         input bytes overwritten with random values before each start event
  bytes_moved(args)            fewest bytes a kernel must move: floor, GB/s, "faster than memory"
  speed_of_light_ns(args, gpu) the task's own speed-of-light figure on that GPU, or None
  BASELINE_NAME, baseline(args)  a library kernel timed like a submission: (launch, data), and
  baseline_bytes(args)         the bytes it moves
  accuracy(args, output)       realistic-data metrics for the `accuracy` mode, on the data
  ACCURACY_OVERRIDES/_NOTE     these keywords give (e.g. {"dist": "quantized"}), and its header
Which folder: `--problem DIR`, else the current directory when it holds task.yml, else this
repository's root.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent  # the harness; also the default problem folder
DIR_ENV = "EVAL_PROBLEM_DIR"  # how the judge tells its workers (and tests) which folder


class ProblemError(Exception):
    """The folder is not a usable problem; the message says what to fix."""


@dataclasses.dataclass(frozen=True)
class Problem:
    root: Path
    module: ModuleType | None  # problem.py, or None

    @property
    def name(self) -> str:
        return getattr(self.module, "NAME", None) or self.root.name

    def hook(self, name: str, default=None):
        return getattr(self.module, name, default) if self.module is not None else default

    @functools.cached_property
    def reference(self) -> ModuleType:
        return import_file("reference", self.root / "reference.py")

    @property
    def task_file(self) -> Path:
        return self.root / "task.yml"

    @property
    def shapes_file(self) -> Path:
        return self.root / "shapes.yaml"

    @functools.cached_property
    def timing(self) -> "Timing":
        return declared_timing(self.root)

    def input_name(self, index: int, keys: list | None = None) -> str:
        names = self.hook("INPUT_NAMES")
        if names and index < len(names):
            return names[index]
        return str(keys[index]) if keys and index < len(keys) else f"data[{index}]"


@dataclasses.dataclass(frozen=True)
class Timing:
    """How the folder's own evaluator times: per call (the series' eval.py) or batched
    (eval_better_bench*.py: `batch` distinct inputs between two events, per-input mean)."""
    method: str  # "per-call" or "batched"
    batch: int
    evaluator: str  # task.yml's source of config.main, e.g. "../eval_better_bench.py"
    # its own (max runs, max summed kernel ns) for the benchmark warm-up, each benchmark case, the
    # leaderboard warm-up and each leaderboard case (pmpp_v2's eval.py: 100 runs; nvidia's: 200 and
    # 1000); () where the file is not there to read (the judge's defaults, eval/judge/modes.py)
    budgets: tuple = ()


BATCHED_EVALUATOR = "eval_better_bench"  # the leaderboard's batched evaluators' file names start so
BATCH_DEFAULT = 50


@dataclasses.dataclass(frozen=True)
class Staging:
    """What task.yml says the runner puts beside the problem: `main`, the file it executes
    (config.main), and `files` as (name in the folder, source as task.yml gives it)."""
    main: str
    files: tuple

    @property
    def evaluator(self) -> str:
        """The source of the file the runner executes, e.g. "../eval_better_bench.py"."""
        return next((source for name, source in self.files if name == self.main), self.main)


def staging(root: Path) -> Staging | None:
    """task.yml's `config.main` and `files` (None when task.yml cannot be read)."""
    import yaml

    try:
        task = yaml.safe_load((root / "task.yml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    files = tuple((str(f.get("name", "")), str(f.get("source", ""))) for f in task.get("files") or []
                  if isinstance(f, dict))
    return Staging(str((task.get("config") or {}).get("main") or "eval.py"), files)


def declared_timing(root: Path) -> Timing:
    """The timing the folder's task.yml names: `config.main` is the file the runner executes, and
    `files` says where it comes from. A batched evaluator's batch is its NUM_ITERATIONS_PER_BENCHMARK
    when the file is there to read (a checkout), else 50. Anything else times per call. The budgets
    are the evaluator's own where the file is there to read (evaluator_budgets)."""
    import re

    staged = staging(root)
    if staged is None:
        return Timing("per-call", BATCH_DEFAULT, "?")
    source = staged.evaluator
    try:
        text = (root / source).read_text()
    except (OSError, UnicodeDecodeError):
        text = ""
    budgets = evaluator_budgets(text)
    if not Path(source).name.startswith(BATCHED_EVALUATOR):
        return Timing("per-call", BATCH_DEFAULT, source, budgets)
    found = re.search(r"^NUM_ITERATIONS_PER_BENCHMARK\s*=\s*(\d+)", text, re.M)
    return Timing("batched", int(found[1]) if found else BATCH_DEFAULT, source, budgets)


def evaluator_budgets(source: str) -> tuple:
    """((runs, ns) of the benchmark warm-up, of each benchmark case, of the leaderboard warm-up, of each
    leaderboard case) from a leaderboard evaluator's calls run_single_benchmark(pool, CASE, RECHECK,
    MAX_REPEATS, MAX_TIME_NS): two inside its run_benchmarking (warm-up, then each case, neither
    rechecked) and two elsewhere, its leaderboard mode (warm-up, then each case, rechecked). () when
    the source has not exactly those."""
    import re

    def in_run_benchmarking(at: int) -> bool:
        names = re.findall(r"^def (\w+)", source[:at], re.M)
        return bool(names) and names[-1] == "run_benchmarking"

    calls = [(in_run_benchmarking(m.start()), m[1] == "True", int(m[2]), float(m[3])) for m in re.finditer(
        r"run_single_benchmark\(\s*pool\s*,\s*[^,()]+,\s*(True|False)\s*,\s*(\d+)\s*,\s*([0-9.]+(?:[eE][+-]?\d+)?)\s*\)",
        source)]
    benchmark = [c for c in calls if c[0]]
    leaderboard = [c for c in calls if not c[0]]
    if [c[1] for c in benchmark] != [False, False] or [c[1] for c in leaderboard] != [False, True]:
        return ()
    return tuple((runs, ns) for _, _, runs, ns in benchmark + leaderboard)


def import_file(name: str, path: Path) -> ModuleType:
    """Import path as the top-level module `name` (once). use() has put its folder first on
    sys.path, so its own imports (`from task import ...`) resolve inside the problem folder."""
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path.resolve():
        return loaded
    if not path.is_file():
        raise ProblemError(f"{path} does not exist: a problem folder needs task.yml, task.py and reference.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


def find_root(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        root = Path(explicit).resolve()
    elif os.environ.get(DIR_ENV):
        root = Path(os.environ[DIR_ENV]).resolve()
    elif (Path.cwd() / "task.yml").is_file() and (Path.cwd() / "reference.py").is_file():
        root = Path.cwd().resolve()
    else:
        root = ROOT
    if not root.exists():
        raise ProblemError(f"problem folder {root} does not exist")
    if not root.is_dir():
        raise ProblemError(f"{root} is not a folder (give a problem folder: task.yml, task.py, reference.py)")
    missing = [f for f in ("task.yml", "task.py", "reference.py") if not (root / f).is_file()]
    if missing:
        raise ProblemError(f"{root} is not a problem folder: it lacks {', '.join(missing)} "
                           "(the leaderboard's layout: task.yml, task.py, reference.py)")
    return root


_CURRENT: list[Problem] = []


def use(root: str | os.PathLike | None = None) -> Problem:
    """Make the problem at root (see find_root) the one this process runs; returns it."""
    found = find_root(root)
    for name in ("reference", "task", "utils", "problem"):  # another folder's modules must not serve this one
        module = sys.modules.get(name)
        if module is not None and Path(getattr(module, "__file__", "") or "").resolve().parent != found:
            del sys.modules[name]
    if str(found) not in sys.path[:1]:
        sys.path.insert(0, str(found))
    _import_staged_files(found)
    module_path = found / "problem.py"
    module = import_file("problem", module_path) if module_path.is_file() else None
    problem = Problem(found, module)
    _CURRENT[:] = [problem]
    os.environ[DIR_ENV] = str(found)  # workers started from here use the same folder
    return problem


def _import_staged_files(root: Path) -> None:
    """Modules task.yml's `files` place beside the problem from elsewhere (the series' utils.py,
    source "../utils.py"): imported under the name the runner gives them, as if staged there. The
    evaluator (config.main) and the submission are not."""
    staged = staging(root)
    for name, source in staged.files if staged else ():
        if not name.endswith(".py") or name == staged.main or source.startswith("@") or (root / name).is_file():
            continue
        if (root / source).is_file():
            import_file(name[:-3], (root / source).resolve())


def current() -> Problem:
    return _CURRENT[0] if _CURRENT else use()


def flatten(data) -> tuple[list, list | None]:
    """The items of generate_input's result in the order the worker's compiled part sees them
    (tuple/list items, dict values), and the dict's keys (None for a sequence)."""
    if isinstance(data, dict):
        return list(data.values()), list(data.keys())
    if isinstance(data, (tuple, list)):
        return list(data), None
    raise ProblemError(f"generate_input returned a {type(data).__name__}: it must return a tuple, list or dict")
