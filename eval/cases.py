"""The cases a run uses: task.yml's official tests and benchmarks, shapes.yaml's named sets, GPU
figures, and the leaderboard's secret-seed handling. Reads files; touches no GPU."""
from __future__ import annotations

import dataclasses
import os
import re
from functools import lru_cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# overridable for tests and experiments
TASK_FILE = Path(os.environ.get("NVFP4_GEMV_TASK_FILE", ROOT / "task.yml"))
SHAPES_FILE = Path(os.environ.get("NVFP4_GEMV_SHAPES_FILE", ROOT / "shapes.yaml"))
SECRET_SEED_ENV = "POPCORN_SEED"
CASE_KEYS = ("m", "k", "l", "seed")


class ConfigError(Exception):
    """A task/shape file or a case is unusable; the message says what to fix."""


@dataclasses.dataclass
class Case:
    args: dict  # m, k, l, seed and optionally dist: the keywords of generate_input
    spec: str  # the leaderboard's spec line, e.g. "m: 128; k: 256; l: 1; seed: 1111"

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.args["m"], self.args["k"], self.args["l"]

    @property
    def label(self) -> str:
        m, k, l = self.shape
        dist = self.args.get("dist")
        return f"{m}x{k}x{l}" + (f" ({dist})" if dist and dist != "leaderboard" else "")


def make_case(args: dict) -> Case:
    missing = [key for key in CASE_KEYS if key not in args]
    if missing:
        raise ConfigError(f"case {args} lacks {', '.join(missing)}: every case needs m, k, l and seed")
    for key in CASE_KEYS:
        if not isinstance(args[key], int):
            raise ConfigError(f"case {args}: {key} must be an integer")
    m, k, l = args["m"], args["k"], args["l"]
    if m <= 0 or m % 128 or k <= 0 or k % 64 or l <= 0:
        raise ConfigError(f"case {args}: m must be a positive multiple of 128, k of 64, and l positive")
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
        raise ConfigError(f"{path.name}{line} is not valid YAML: {getattr(exc, 'problem', exc)}")
    if not isinstance(content, dict):
        raise ConfigError(f"{path.name} must be a YAML mapping at the top level")
    return content


@lru_cache(maxsize=None)
def load_task(path: Path = TASK_FILE) -> dict:
    task = _load_yaml(path)
    for key in ("tests", "benchmarks"):
        if not isinstance(task.get(key), list) or not task[key]:
            raise ConfigError(f"{path.name} needs a non-empty list `{key}`")
    return task


@lru_cache(maxsize=None)
def load_shapes(path: Path = SHAPES_FILE) -> dict:
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
    """A case set as the files give it (no secret seed)."""
    if name in ("tests", "benchmarks"):
        entries = load_task()[name]
    else:
        sets = load_shapes()["sets"]
        if name not in sets:
            raise ConfigError(f"unknown case set {name!r}: choose one of {', '.join(set_names())}")
        entries = sets[name]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"case set {name!r} must be a list of mappings with m, k, l, seed")
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
        out.append(Case(args=args, spec=case.spec))  # the spec keeps the public seed, as upstream
    return out


def bytes_moved(m: int, k: int, l: int) -> int:
    """Fewest bytes one GEMV must move: A and its scales, the vector and its scales, C written."""
    a = m * (k // 2) * l
    sfa = m * (k // 16) * l
    b = (k // 2) * l
    sfb = (k // 16) * l
    c = m * l * 2
    return a + sfa + b + sfb + c


_SOL_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s*$")


def b200_sol_us() -> dict[tuple[int, int, int], float]:
    """task.yml's B200 speed-of-light table (parsed from its description)."""
    table = {}
    for line in str(load_task().get("description", "")).splitlines():
        match = _SOL_ROW.match(line)
        if match:
            m, k, l, us = match.groups()
            table[(int(m), int(k), int(l))] = float(us)
    return table


def gpu_figures(device_name: str) -> dict | None:
    """shapes.yaml's entry for this GPU (first `match` that is a substring of the name), or None."""
    for entry in load_shapes().get("gpus", []):
        if str(entry.get("match", "\0")) in device_name:
            return entry
    return None
