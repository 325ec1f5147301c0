"""What every mode and every harness measurement shares, judge side: the options (Options), the
worker of one submission or of the harness, restarted after a failure (Runner), the size a reply
may have (reply_limit), what the judge learns of a case from the reference (case_profile), the
parameters of a timed request (runs_params) and the machine as the judge sees it
(describe_environment).

It sits below both eval/judge/modes.py (the leaderboard's modes) and eval/baselines.py (floors and
baseline kernels), which import it and not each other's internals: baselines imports no mode, and
no module here imports modes or baselines. It judges no output (eval/judge/verdict.py and modes do).
"""
from __future__ import annotations

import copy
import dataclasses
import os
import platform
from pathlib import Path

import torch

from eval import problem_folder, progress, results
from eval.judge import verdict
from eval.judge.wire import Reply, WorkerFailure
from eval.judge.worker_start import DEFAULT_LOAD_TIMEOUT_S, WorkerProcess
from eval.records import Environment
from eval.worker.driver import FLUSH_L2_MULTIPLE

HOST_CALLS = 20  # back-to-back calls per batch for the host cost column
HOST_BATCHES = 7  # batches of HOST_CALLS; the worker reports the median batch, the judge checks every output
NO_LIMIT = 1e30


@dataclasses.dataclass
class Options:
    timeout: float = 600.0  # per case, seconds
    load_timeout: float = DEFAULT_LOAD_TIMEOUT_S  # the build limit (the import is bounded by timeout otherwise)
    method: str = "per-call"  # or "batched"
    batch: int = 50
    gap_us: float = 500.0
    dist: str | None = None  # data distribution override for every case
    wall_cap_s: float = 120.0
    baseline: bool = True  # time the problem module's baseline kernel on each case too (GPU only)
    # a kernel right on the cases' own data but wrong on full-range data: the leaderboard passes it
    # (a warning names what full-range data showed); True fails it (search loops that must not
    # reward data specialisation)
    fail_narrow: bool = False
    emulate_blackwell: bool = False  # exact stand-ins for Blackwell-only calls (eval/worker/emulation.py)
    # leaderboard and batch: a machine whose sandbox reaches less than full judges nothing unless the
    # user chose the level (--sandbox LEVEL / EVAL_SANDBOX)
    require_full_sandbox: bool = False
    log_dir: Path = results.RESULTS_DIR / "logs"
    budget: dict | None = None  # {"warmup": (runs, ns), "case": (runs, ns)} instead of the evaluator's (`run` on CPU)
    host_cost: bool = True  # the back-to-back calls of the host-cost column


MAX_REPLY_BYTES = 256 << 20  # output bytes after which a runs reply ends (the judge asks again for the rest)
SNAPSHOT_SLACK = 16  # an output may be a view into a buffer this many times its size (or 1 MiB)


def reply_limit(op: str, payload: dict) -> int:
    """The most output bytes a request can bring back: snapshots (and their synced copies) of
    every call it makes, each at most SNAPSHOT_SLACK times the reference's output. A reply beyond
    that is refused before it is read."""
    params = payload.get("params") or {}
    if op == "trial":
        calls = len(params.get("steps", []))
    elif op == "runs" and params.get("check"):
        calls = int(params["max_repeats"]) * int(params["batch"]) + int(params.get("host_calls", 0)) * HOST_BATCHES
    else:
        return 0
    per_call = max(SNAPSHOT_SLACK * case_profile(payload["args"]).output_bytes, 1 << 20)
    return 2 * calls * per_call


def max_span(args: dict) -> int:
    """The most bytes one output tensor may span in the worker's snapshot (its "max_span"): 1 GiB, or
    more where the reference's own output is that large (amd/mla-decode returns its 1.2 GiB KV cache)."""
    return max(1 << 30, SNAPSHOT_SLACK * case_profile(args).output_bytes)


def _say_if_building() -> None:
    """A progress line before the harness's compiled loop is built (once per machine, minutes)."""
    from eval.worker import build

    name = build.module_name()
    if progress.enabled() and not (build.cache_root() / "native" / name / f"{name}.so").is_file():
        progress.phase("building the harness's C++ timing loop (once per machine: 1-2 minutes on a small CPU)")


class Runner:
    """One submission's worker, restarted on demand after a failure."""

    def __init__(self, submission: Path | None, options: Options):
        self.submission = submission
        self.options = options
        name = Path(submission).stem if submission else "harness"
        self.log_path = options.log_dir / f"{results.now_stamp()}-{results.slug(name)}.log"
        self.worker = WorkerProcess(submission, self.log_path, emulate=options.emulate_blackwell)
        self.worker.require_full = options.require_full_sandbox or os.environ.get("EVAL_REQUIRE_FULL_SANDBOX") == "1"
        self.info: dict = {}

    def ensure(self) -> dict:
        if not self.worker.alive():
            _say_if_building()
            progress.phase(f"starting a worker: importing {Path(self.submission).name if self.submission else 'the harness'}"
                           " (builds included)")
            self.info = self.worker.start(self.options.load_timeout, import_timeout=self.options.timeout)
        return self.info

    def call(self, op: str, payload: dict, timeout: float | None = None) -> Reply:
        self.ensure()
        try:
            return self.worker.request(op, payload, timeout or self.options.timeout, blob_limit=reply_limit(op, payload))
        except WorkerFailure:
            self.worker.close()  # next call starts a fresh process
            raise

    def close(self) -> None:
        self.worker.close()



# -- the machine, seen from the judge -------------------------------------------------------------

def describe_environment(sandbox: dict | None = None) -> Environment:
    from importlib.metadata import PackageNotFoundError, version

    def package(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    env = Environment(python=platform.python_version(), torch=torch.__version__, host=platform.node(),
                      cutlass_dsl=package("nvidia-cutlass-dsl"), triton=package("triton"),
                      cuda_available=torch.cuda.is_available(), sandbox=dict(sandbox or {}))
    if env.cuda_available:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.gpu, env.sm_count, env.capability = props.name, props.multi_processor_count, f"{props.major}.{props.minor}"
        env.l2_bytes, env.memory_bytes, env.cuda_runtime = props.L2_cache_size, props.total_memory, torch.version.cuda
        declared = problem_folder.current().timing
        env.driver = _driver_version()
        env.timer = ("host-clock (synchronized, as the folder's evaluator)" if declared.clock == "host"
                     else "cuda-events") + ("" if declared.flush else ", no L2 flush (as the folder's evaluator)")
    else:
        env.gpu, env.timer = "CPU (no CUDA)", "host-clock (no CUDA)"
    return env


def _driver_version():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        return None


def canaries(args: dict) -> list:
    regions = problem_folder.current().hook("canary_regions")
    return regions(args) if regions else []


@dataclasses.dataclass(frozen=True)
class CaseProfile:
    """What the judge learns from the case's own input and one ref_kernel call on it."""
    items: int  # tensors of generate_input's result, found anywhere in it (problem_folder.flatten)
    reference_writes: frozenset  # the inputs ref_kernel writes (a pre-allocated output, as in vectoradd)
    output_bytes: int  # the size of ref_kernel's output
    # inputs a kernel may write: those ref_kernel writes, and the leaderboard's convention of a
    # pre-allocated output passed last, shaped like ref_kernel's output (any dtype), which the reference
    # may ignore (matmul, prefixsum) while a solution writes it and returns it, or leaves it alone; with
    # those generate_input leaves undefined: case_outputs
    outputs: frozenset = frozenset()
    opaque: tuple = ()  # objects of generate_input's result with state of their own (problem_folder.opaque)
    input_bytes: int = 0  # the size of generate_input's tensors


_PROFILES: dict = {}
_HASHES: dict = {}  # per case: its own input's tensors hashed as generated (None where not a tensor)
_UNDEFINED: dict = {}  # per case: the inputs whose contents generate_input leaves undefined
_FIRST: dict = {}  # at most one case: the profile's input, copied before ref_kernel ran (take_first_input)


def _case_key(args: dict) -> tuple:
    return (problem_folder.current().root, tuple(sorted((k, repr(v)) for k, v in args.items())))


def _tensor_bytes(items: list) -> int:
    """The bytes of the tensors among items (flatten's leaves)."""
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))


def case_profile(args: dict) -> CaseProfile:
    """One generation of the case's input (its undefined parts filled at random) and one ref_kernel
    call on it. A large input's generation can take seconds (bioml/trimul draws 3 GiB on the CPU), so
    the second generation that finds the undefined inputs is not made here (case_outputs) and a copy of
    this one serves as the judge's input for the trial's first call (take_first_input)."""
    key = _case_key(args)
    if key not in _PROFILES:
        data = verdict.generate_undefined_filled(args, args["seed"])
        items = verdict.tensors_of(data)
        before = [verdict.input_hash(t) if isinstance(t, torch.Tensor) else None for t in items]
        opaque = tuple(problem_folder.opaque(data))
        _FIRST.clear()
        if not opaque:  # an object with state of its own is not copied: the trial generates its own
            try:
                _FIRST[key] = copy.deepcopy(data)
            except Exception:  # noqa: BLE001 - an object deepcopy refuses: the trial generates its own
                pass
        out = verdict.reference().ref_kernel(data)
        written = frozenset(i for i, t in enumerate(items) if before[i] is not None and verdict.input_hash(t) != before[i])
        outputs = problem_folder.flatten(out)[0]
        shapes = {tuple(t.shape) for t in outputs if isinstance(t, torch.Tensor)}  # dtype may differ (prefixsum)
        tensors = [i for i, t in enumerate(items) if isinstance(t, torch.Tensor)]
        last = {tensors[-1]} if tensors and tuple(items[tensors[-1]].shape) in shapes else set()
        _HASHES[key] = before
        _PROFILES[key] = CaseProfile(len(items), written, _tensor_bytes(outputs), frozenset(written | last), opaque,
                                     _tensor_bytes(items))
    return _PROFILES[key]


def forget_profiles() -> None:
    """Every case's profile forgotten (tests that change a problem's generate_input between calls)."""
    for kept in (_PROFILES, _HASHES, _UNDEFINED, _FIRST):
        kept.clear()


def take_first_input(args: dict):
    """The case's own input as case_profile generated it, before ref_kernel ran (its undefined inputs
    filled at random, which is what undefined means), once; None where none is kept."""
    return _FIRST.pop(_case_key(args), None)


def case_outputs(args: dict) -> frozenset:
    """The inputs a kernel may write: CaseProfile.outputs and those whose contents generate_input leaves
    undefined (torch.empty: they differ between two generations, each filled at random). The second
    generation is made once per case; modes._trial_inputs makes it while the worker runs the trial."""
    profile = case_profile(args)
    key = _case_key(args)
    if key not in _UNDEFINED:
        before = _HASHES[key]  # stored by case_profile with the profile
        again = verdict.tensors_of(verdict.generate_undefined_filled(args, args["seed"]))
        _UNDEFINED[key] = frozenset(i for i, t in enumerate(again) if i < len(before) and before[i] is not None
                                    and isinstance(t, torch.Tensor) and verdict.input_hash(t) != before[i])
    return profile.outputs | _UNDEFINED[key]


HOST_COST_MAX_BYTES = 4 << 30  # the host-cost batches hold HOST_CALLS inputs and read back every output


def host_cost_fits(args: dict, calls: int) -> bool:
    """Whether the host-cost batches fit: `calls` inputs held at once and HOST_BATCHES x calls outputs
    read back (bioml/trimul's largest case: 20 inputs and 140 outputs of 1.6 GB each, over 200 GB). Where
    they do not, the case has no host cost (its column shows —)."""
    if calls <= 0:
        return True
    profile = case_profile(args)
    return calls * (profile.input_bytes + HOST_BATCHES * profile.output_bytes) <= HOST_COST_MAX_BYTES


def runs_params(args: dict, options: Options, budget: tuple, fresh_seeds: bool, host_calls: int = 0,
                check: bool = True) -> dict:
    cuda = torch.cuda.is_available()
    max_repeats, max_time_ns = budget
    declared = problem_folder.current().timing  # the folder's evaluator's clock and flush
    return {
        "cuda": cuda, "flush": cuda and declared.flush, "host_clock": cuda and declared.clock == "host",
        "stop_rel_err": declared.stop_rel_err, "stop_min_ns": declared.stop_min_ns,
        "wait_ns": float(options.gap_us) * 1e3, "flush_l2_multiple": FLUSH_L2_MULTIPLE,
        "canary": canaries(args) if check else [], "check": check, "seed": int(args["seed"]),
        "fresh_seeds": fresh_seeds, "batch": options.batch if options.method == "batched" else 1,
        "max_repeats": int(max_repeats), "max_time_ns": float(max_time_ns), "wall_cap_ns": float(options.wall_cap_s) * 1e9,
        "host_calls": host_calls if options.host_cost and host_cost_fits(args, host_calls) else 0,
        "max_span": max_span(args) if check else 1 << 30,
        "max_blob": MAX_REPLY_BYTES,
    }
