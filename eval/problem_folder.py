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
  (indices count the tensors found anywhere in generate_input's result, depth first: flatten)
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

    @functools.cached_property
    def own_evaluator(self) -> Path | None:
        """Its own evaluator where the folder has its own contract (own_evaluator), else None."""
        return own_evaluator(self.root)

    @property
    def task_file(self) -> Path:
        return self.root / "task.yml"

    @property
    def shapes_file(self) -> Path:
        return self.root / "shapes.yaml"

    @functools.cached_property
    def timing(self) -> "Timing":
        return declared_timing(self.root)

    def input_name(self, index: int, names: list | None = None) -> str:
        """problem.py's INPUT_NAMES for the index-th input tensor (flatten's order), else its path."""
        declared = self.hook("INPUT_NAMES")
        if declared and index < len(declared):
            return declared[index]
        return str(names[index]) if names and index < len(names) else f"data[{index}]"


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
    # the clock around the timed call: "events" (CUDA events: most series) or "host" (perf_counter_ns
    # around the call and a torch.cuda.synchronize: the first pmpp series, amd); flush: whether the
    # evaluator clears the L2 before each timed run (bioml's does not). Read from its benchmark loop.
    clock: str = "events"
    flush: bool = True
    # its stop rule: stop once the standard error is under stop_rel_err of the mean, after at least
    # stop_min_ns of wall time (nvidia's: 0.1 % and 100 ms; pmpp_v2's: no minimum; pmpp's: 1 %)
    stop_rel_err: float = 0.001
    stop_min_ns: float = 1e8


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
    if not isinstance(task, dict):  # cases.load_task names what is wrong with it
        return None
    config = task.get("config") if isinstance(task.get("config"), dict) else {}
    files = tuple((str(f.get("name", "")), str(f.get("source", ""))) for f in (task.get("files") if isinstance(task.get("files"), list) else [])
                  if isinstance(f, dict))
    return Staging(str(config.get("main") or "eval.py"), files)


def own_evaluator(root: Path) -> Path | None:
    """A folder of its own contract: no task.py (no custom_kernel(data)), its own evaluator as
    task.yml's config.main (princeton's cross_entropy_py: cross_entropy_forward/backward, checked by
    its eval.py). The evaluator's file, or None for a folder in the leaderboard's usual layout."""
    if (root / "task.py").is_file():
        return None
    staged = staging(root)
    path = (root / staged.evaluator) if staged else None
    return path.resolve() if path is not None and path.is_file() else None


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
    own = (*evaluator_clock(text), *evaluator_stop_rule(text))
    if not Path(source).name.startswith(BATCHED_EVALUATOR):
        return Timing("per-call", BATCH_DEFAULT, source, budgets, *own)
    found = re.search(r"^NUM_ITERATIONS_PER_BENCHMARK\s*=\s*(\d+)", text, re.M)
    return Timing("batched", int(found[1]) if found else BATCH_DEFAULT, source, budgets, *own)


def evaluator_stop_rule(source: str) -> tuple[float, float]:
    """(relative error, minimum wall ns) of an evaluator's stop rule, read from its source: the
    `stats.err / stats.mean < X` it stops at, and the `if i > 1 and elapsed > Y:` that guards it (0
    where the guard is `if i > 1:` alone). Timing's defaults where there is none to read."""
    import re

    number = r"([0-9.]+(?:[eE][+-]?\d+)?)"
    err = re.search(r"\berr\s*/\s*\w+\.mean\s*<\s*" + number, source)
    if err is None:
        return Timing.stop_rel_err, Timing.stop_min_ns
    guards = list(re.finditer(r"\bif\s*\(?\s*\w+\s*>\s*1\s*(?:and\s+\w+\s*>\s*" + number + r")?\s*\)?\s*:",
                              source[:err.start()]))
    return float(err[1]), float(guards[-1][1]) if guards and guards[-1][1] else 0.0


def evaluator_clock(source: str) -> tuple[str, bool]:
    """(clock, flush) of a leaderboard evaluator's timed call, read from its source: the clock read on
    the line just before `... = custom_kernel(` (an event's .record(): "events"; time.perf_counter():
    "host"), and whether the function holding that call clears the L2 (a clear_l2_cache call).
    Timing's defaults (events, flush) where no such call is found or there is no file to read."""
    import re

    call = r"[ \t]*\n[ \t]*[\w, ]+=\s*custom_kernel\("
    events = re.search(r"^[ \t]*\w+\.record\(\)" + call, source, re.M)
    host = re.search(r"^[ \t]*\w+\s*=\s*time\.perf_counter(?:_ns)?\(\)" + call, source, re.M)
    timed = events or host
    if timed is None:
        return Timing.clock, Timing.flush
    begin = source.rfind("\ndef ", 0, timed.start())
    end = source.find("\ndef ", timed.end())
    body = source[max(begin, 0):end if end >= 0 else len(source)]
    flush = bool(re.search(r"^[ \t]*[^#\n]*\bclear_l2_cache\w*\(", body, re.M))
    return ("events" if events else "host"), flush


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
    if missing == ["task.py"] and own_evaluator(root):  # a folder of its own contract (princeton's)
        return root
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


def generate_seeded(generate, kwargs: dict):
    """generate_input(**kwargs) with torch's global generators seeded from the case's seed first: a
    generate_input that draws part of its input from the global RNG (bioml's trimul: its weights,
    torch.randn without its generator) gives the same input in the judge and in the worker, as one
    evaluator process hands one input to both the submission and the checker."""
    import torch

    torch.manual_seed(int(kwargs["seed"]) & ((1 << 63) - 1))
    return generate(**kwargs)


MAX_DEPTH = 32  # nesting followed into generate_input's result (native.cpp follows as deep)


def _is_tensor(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def flatten(data) -> tuple[list, list]:
    """Every tensor anywhere in generate_input's result (or an output), in the order the worker's
    compiled part sees them: depth first, tuple/list items in order, dict values in insertion order;
    a single tensor is itself. Plain numbers, strings, None and config dicts beside the tensors are
    followed or skipped, never counted. Returns (tensors, their names: `data[0]`, a top-level dict's
    key, `weights['w1']`...)."""
    leaves, names = [], []

    def walk(x, name: str, depth: int) -> None:
        if _is_tensor(x):
            leaves.append(x)
            names.append(name)
        elif depth >= MAX_DEPTH:
            return
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, str(k) if depth == 0 else f"{name}[{k!r}]", depth + 1)
        elif isinstance(x, (tuple, list)):
            for i, v in enumerate(x):
                walk(v, f"{name}[{i}]", depth + 1)

    walk(data, "data", 0)
    return leaves, names


PLAIN = (int, float, complex, bool, str, bytes, type(None))


def opaque(data) -> list[str]:
    """Type names of the objects in generate_input's result that are neither tensors, containers
    (tuple, list, dict), plain values, nor torch's dtype/device: objects with state of their own that
    the worker cannot refill with new data in place (amd/mla-decode's KVCache module, which holds its
    cache and the length filled so far; its Config)."""
    import enum

    import torch

    found: list = []

    def walk(x, depth: int) -> None:
        if _is_tensor(x) or isinstance(x, PLAIN + (torch.dtype, torch.device, enum.Enum)) or depth >= MAX_DEPTH:
            return
        if isinstance(x, dict):
            for v in x.values():
                walk(v, depth + 1)
        elif isinstance(x, (tuple, list)):
            for v in x:
                walk(v, depth + 1)
        elif type(x).__name__ not in found:
            found.append(type(x).__name__)

    walk(data, 0)
    return found


def replace_tensors(data, new: list):
    """data with its tensors (flatten's order) replaced by new's, the structure and everything else
    kept (a tuple subclass such as torch.return_types.geqrf rebuilt as its own type where it can be)."""
    it = iter(new)

    def walk(x, depth: int):
        if _is_tensor(x):
            return next(it)
        if depth >= MAX_DEPTH:
            return x
        if isinstance(x, dict):
            return type(x)((k, walk(v, depth + 1)) for k, v in x.items()) if type(x) is dict else \
                {k: walk(v, depth + 1) for k, v in x.items()}
        if isinstance(x, (tuple, list)):
            items = [walk(v, depth + 1) for v in x]
            if type(x) in (tuple, list):
                return type(x)(items)
            return rebuild_sequence(type(x), items)
        return x

    return walk(data, 0)


def rebuild_sequence(kind: type, items: list):
    """A tuple subclass of items: a namedtuple by position, a structseq (torch.return_types) from the
    list, else a plain tuple (a list subclass: a plain list)."""
    if issubclass(kind, list):
        return list(items)
    try:
        return kind(*items) if hasattr(kind, "_fields") else kind(items)
    except Exception:  # noqa: BLE001 - a class of the submission's: the checker gets a plain tuple
        return tuple(items)
