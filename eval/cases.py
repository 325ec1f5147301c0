"""The cases a run uses: the problem folder's task.yml tests and benchmarks, its optional
shapes.yaml sets, the GPU figures, and the leaderboard's secret-seed handling. Reads files; touches
no GPU. A case is whatever keyword dict task.yml gives generate_input (plus `seed`)."""
from __future__ import annotations

import dataclasses
import os
from functools import lru_cache
from pathlib import Path

import yaml

from eval import problem_folder
from eval.records import size_key
from eval.stats import RANKINGS

DEFAULT_RANKING = "last"  # where task.yml names none: the leaderboard's (kernelbot's LeaderboardTask default)

ROOT = problem_folder.ROOT
GPUS_FILE = Path(__file__).resolve().parent / "gpus.yaml"
SECRET_SEED_ENV = "POPCORN_SEED"


class ConfigError(Exception):
    """A task/shape file or a case is unusable; the message says what to fix."""


@dataclasses.dataclass
class Case:
    args: dict  # the keywords of generate_input: the task file's, and optionally dist
    spec: str  # the leaderboard's spec line, e.g. "m: 128; k: 256; l: 1; seed: 1111"

    @property
    def key(self) -> str:
        """The case's size, e.g. "7168x16384x1" (its keywords but seed and dist, joined by x)."""
        return size_key(self.args)

    @property
    def label(self) -> str:
        dist = self.args.get("dist")
        return self.key + (f" ({dist})" if dist and dist != "leaderboard" else "")


def make_case(args: dict) -> Case:
    if "seed" not in args or not isinstance(args["seed"], int):
        raise ConfigError(f"case {args} needs an integer seed")
    for key, value in args.items():
        scalar = (int, float, str, bool)
        if not isinstance(value, scalar) and not (isinstance(value, list) and all(isinstance(v, scalar) for v in value)):
            raise ConfigError(f"case {args}: {key} must be a number, a string or a list of them")
    validate = problem_folder.current().hook("validate_case")
    if validate is not None:
        try:
            validate(args)
        except ValueError as exc:
            raise ConfigError(f"case {args}: {exc}")
    spec = "; ".join(f"{key}: {value}" for key, value in args.items())
    return Case(args=dict(args), spec=spec)


def _load_yaml(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}; run from a full checkout of the project")
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where else ""
        raise ConfigError(f"{path}{line} is not valid YAML: {getattr(exc, 'problem', exc)}")
    if content is None:
        raise ConfigError(f"{path} is empty: it must be a YAML mapping (tests, benchmarks, ...)")
    if not isinstance(content, dict):
        raise ConfigError(f"{path} must be a YAML mapping at the top level")
    return content


def task_path() -> Path:
    return Path(os.environ.get("EVAL_TASK_FILE") or problem_folder.current().task_file)  # tests override


def shapes_path() -> Path:
    return Path(os.environ.get("EVAL_SHAPES_FILE") or problem_folder.current().shapes_file)


def load_task(path: Path | None = None) -> dict:
    return _load_task(path or task_path())


@lru_cache(maxsize=None)
def _load_task(path: Path) -> dict:
    task = _load_yaml(path)
    for key in ("tests", "benchmarks"):
        if not isinstance(task.get(key), list) or not task[key]:
            raise ConfigError(f"{path} needs a non-empty list `{key}`")
    if task.get("ranking_by", DEFAULT_RANKING) not in RANKINGS:
        raise ConfigError(f"{path.name}: ranking_by {task['ranking_by']!r} is not one of {', '.join(RANKINGS)}")
    return task


def ranking_by() -> str:
    """How task.yml ranks a submission over its benchmarks (geom, mean or last)."""
    return load_task().get("ranking_by", DEFAULT_RANKING)


def load_shapes(path: Path | None = None) -> dict:
    path = path or shapes_path()
    return _load_shapes(path) if path.is_file() or os.environ.get("EVAL_SHAPES_FILE") else {"sets": {}}


@lru_cache(maxsize=None)
def _load_shapes(path: Path) -> dict:
    shapes = _load_yaml(path)
    if not isinstance(shapes.get("sets"), dict):
        raise ConfigError(f"{path.name} needs a mapping `sets` of named case lists")
    return shapes


def set_names() -> list[str]:
    return ["tests", "benchmarks", *load_shapes()["sets"].keys()]


def select_cases(name: str) -> list[Case]:
    """'tests' / 'benchmarks' from task.yml, or a named set from shapes.yaml, with the secret seed
    (POPCORN_SEED, read once per process) combined into every case's seed as the leaderboard does."""
    return apply_secret_seed(public_cases(name), secret_seed())


def public_cases(name: str) -> list[Case]:
    """A case set as the files give it (no secret seed). "tests:I" / "benchmarks:I": task.yml's case at
    index I alone (Python indexing: benchmarks:-1 is the last, the one ranking_by "last" ranks)."""
    base, _, index = name.partition(":")
    if base in ("tests", "benchmarks") and index:
        entries = load_task()[base]
        try:
            entries = [entries[int(index)]]
        except (ValueError, IndexError, TypeError):
            raise ConfigError(f"case set {name!r}: {base} has {len(entries)} case(s); give an index in "
                              f"-{len(entries)}..{len(entries) - 1}") from None
    elif name in ("tests", "benchmarks"):
        entries = load_task()[name]
    else:
        sets = load_shapes()["sets"]
        if name not in sets:
            raise ConfigError(f"unknown case set {name!r}: choose one of {', '.join(set_names())}")
        entries = sets[name]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"case set {name!r} must be a list of mappings of generate_input's keywords")
    return [make_case(entry) for entry in entries]


def combine_seed(a: int, b: int) -> int:
    """The leaderboard's Cantor pairing of a case seed with the secret seed."""
    return int(a + (a + b) * (a + b + 1) // 2)


_SECRET: list = []


def secret_seed() -> int | None:
    """The secret seed, taken from the environment the first time it is asked for and the same for
    every later case set of this process (test, then benchmark in `run`; every submission in `rank`)."""
    if not _SECRET:
        _SECRET.append(take_secret_seed())
    return _SECRET[0]


def take_secret_seed(environ=os.environ) -> int | None:
    """Read the secret seed and remove it from the environment, so no worker can see it."""
    raw = environ.pop(SECRET_SEED_ENV, None)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{SECRET_SEED_ENV}={raw!r} is not an integer")


def apply_secret_seed(cases: list[Case], secret: int | None) -> list[Case]:
    if secret is None:
        return cases
    out = []
    for case in cases:
        args = dict(case.args)
        args["seed"] = combine_seed(args["seed"], secret)
        if not -(1 << 63) <= args["seed"] < (1 << 64):  # what torch's generators take
            raise ConfigError(f"{SECRET_SEED_ENV}={secret} is too large: with case seed {case.args['seed']} it gives "
                              f"{args['seed']}, past the 64-bit seeds the generators take")
        out.append(Case(args=args, spec=case.spec))  # the spec keeps the public seed, as upstream
    return out


@lru_cache(maxsize=None)
def _gpus() -> list:
    return _load_yaml(GPUS_FILE).get("gpus", [])


def gpu_figures(device_name: str) -> dict | None:
    """eval/gpus.yaml's entry for this GPU (first `match` that is a substring of the name), or None."""
    for entry in _gpus():
        if str(entry.get("match", "\0")) in device_name:
            return entry
    return None
