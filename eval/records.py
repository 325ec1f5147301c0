"""Typed records that cross module and process boundaries: the machine a run used, the result of
each case, the run as a whole. Written to results/*.json with dataclasses.asdict (same keys as the
files earlier versions wrote) and read back with RunRecord.from_json."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from eval.stats import Stats

SCHEMA_VERSION = 3  # 3: CaseResult.bf16 became .baseline (the problem module's baseline kernel)


@dataclass
class Environment:
    gpu: str = "?"
    cuda_available: bool = False
    sm_count: int = 0
    capability: str | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    cuda_runtime: str | None = None
    driver: str | None = None
    timer: str = ""
    python: str = ""
    torch: str = ""
    cutlass_dsl: str | None = None
    triton: str | None = None
    host: str = ""
    sandbox: dict = field(default_factory=dict)  # the worker's layers: name -> "on" or why not


@dataclass
class Timing:
    method: str = "per-call"
    batch: int | None = None
    gap_us: float = 500.0
    emulated: list[str] = field(default_factory=list)  # --emulate-blackwell: what was emulated (not B200 times)
    reference_emulated: list[str] = field(default_factory=list)  # what of the reference runs emulated in the judge


@dataclass
class Sol:
    """Where a case's mean stands against the memory (filled by sol.annotate)."""
    bytes: int = 0
    gb_s: float = 0.0
    pct_datasheet: float | None = None
    floor_ns: float | None = None
    x_floor: float | None = None
    b200_sol_ns: float | None = None
    x_b200_sol: float | None = None


UNSIZED = ("seed", "dist")  # keywords of a case that do not change its size


def size_values(args: dict) -> tuple:
    """A case's size, e.g. (7168, 16384, 1): its keywords but seed and dist, in order (a list-valued
    keyword, as in the grouped GEMM's per-group sizes, as its items joined by commas)."""
    return tuple(",".join(map(str, v)) if isinstance(v, (list, tuple)) else v
                 for k, v in args.items() if k not in UNSIZED)


def generate_args(args: dict) -> dict:
    """A case's keywords as the leaderboard's evaluator hands them to generate_input: a list value
    (YAML, or JSON on the way to the worker) becomes a tuple, as its spec-line parser makes it."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}


def size_key(args: dict) -> str:
    """A case's size, e.g. "7168x16384x1": size_values joined by x (floors and the leaderboard's
    per-shape tables are keyed by it)."""
    return "x".join(map(str, size_values(args)))


@dataclass
class CaseResult:
    spec: str
    label: str
    args: dict
    status: str = "pass"
    error: str | None = None
    detail: str = ""
    stats: Stats | None = None
    samples: list[float] = field(default_factory=list)
    host_us: float | None = None
    baseline: dict | None = None  # the problem module's baseline kernel, timed the same way
    sol: Sol | None = None
    report: str | None = None  # profile mode
    accuracy: dict | None = None  # accuracy mode
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    @property
    def key(self) -> str:
        return size_key(self.args)

    def fail(self, reason: str, detail: str = "") -> "CaseResult":
        self.status, self.error, self.detail = "fail", reason, detail
        return self


@dataclass
class RunRecord:
    mode: str
    submission: str | None
    schema: int = SCHEMA_VERSION
    submission_sha256: str | None = None
    git_commit: str | None = None
    created: str = ""
    timing: Timing = field(default_factory=Timing)
    environment: Environment = field(default_factory=Environment)
    cases: list[CaseResult] = field(default_factory=list)
    passed: bool = False
    error: str | None = None
    log: str | None = None
    geomean_ns: float | None = None
    static: list[str] = field(default_factory=list)  # kernelguard findings that only warn
    sol_source: dict = field(default_factory=dict)
    # Ctrl-C or SIGTERM mid-run: why the record holds fewer cases than asked for (never passed)
    incomplete: str | None = None
    specs: list[str] = field(default_factory=list)  # the spec lines of the cases asked for (popcorn's counts)
    import_s: float | None = None  # the submission's import in its first worker, builds included (also when it failed)
    cannot_run: str | None = None  # not judged: what this machine lacks ("helion (pip install helion)", "a CUDA GPU"; eval/needs.py)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        if self.environment and not self.environment.cuda_available and self.cases:  # as every other output
            d["host_timer"] = "HOST TIMER: CPU wall time, not GPU kernel time"
        return d

    @classmethod
    def from_json(cls, d: dict) -> "RunRecord":
        fields = {f.name for f in dataclasses.fields(cls)}
        record = cls(**{k: v for k, v in d.items() if k in fields})
        record.timing = Timing(**_known(Timing, d.get("timing") or {}))
        record.environment = Environment(**_known(Environment, d.get("environment") or {}))
        record.cases = [_case(c) for c in d.get("cases") or []]
        return record


def _known(cls, d: dict) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _case(d: dict) -> CaseResult:
    case = CaseResult(**_known(CaseResult, d))
    if isinstance(d.get("stats"), dict):
        case.stats = Stats(**_known(Stats, d["stats"]))
    if isinstance(d.get("sol"), dict):
        case.sol = Sol(**_known(Sol, d["sol"]))
    return case
