"""What the worker process can be asked to do (runs only inside the worker: imports torch, CUDA).

Each op takes a payload dict of plain values and returns plain values; failures raise, and
describe_error turns the exception into the one-line reason the parent reports.
"""
from __future__ import annotations

import importlib.util
import platform
import sys
from pathlib import Path

import torch

import reference
from eval import guard, timing
from eval.timing import CaseFailed


class SubmissionLoadError(Exception):
    pass


class WorkerState:
    def __init__(self, submission: str | None):
        self.submission_path = submission
        self.kernel = None
        self.flusher = None
        self.flusher_gap = None
        self.checked_cases: set = set()

    def get_flusher(self, gap_us: float) -> timing.L2Flusher:
        if self.flusher is None or self.flusher_gap != gap_us:
            self.flusher = timing.L2Flusher(gap_us)
            self.flusher_gap = gap_us
        return self.flusher


def dispatch(state: WorkerState, op: str, payload: dict):
    handler = OPS.get(op)
    if handler is None:
        raise ValueError(f"unknown worker op {op!r}")
    return handler(state, **payload)


# -- loading --------------------------------------------------------------------------------------


def op_load(state: WorkerState) -> dict:
    if state.submission_path:
        state.kernel = load_submission(Path(state.submission_path))
    return describe_environment()


def load_submission(path: Path):
    """Import the file as the module `submission` (as the leaderboard does) and return custom_kernel."""
    if not path.is_file():
        raise SubmissionLoadError(f"submission file {path} does not exist")
    try:
        source = path.read_text()
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise SubmissionLoadError(f"syntax error in {path.name} line {exc.lineno}: {exc.msg}")
    except (OSError, UnicodeDecodeError) as exc:
        raise SubmissionLoadError(f"cannot read {path}: {exc}")
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    kernel = getattr(module, "custom_kernel", None)
    if not callable(kernel):
        raise SubmissionLoadError(f"{path.name} defines no custom_kernel(data) function")
    return kernel


def describe_environment() -> dict:
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "timer": timing.Timer().kind,
        "cutlass_dsl": _package_version("nvidia-cutlass-dsl"),
        "triton": _package_version("triton"),
        "host": platform.node(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        info.update(
            gpu=props.name,
            sm_count=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            l2_bytes=props.L2_cache_size,
            memory_bytes=props.total_memory,
            cuda_runtime=torch.version.cuda,
            driver=_driver_version(),
        )
    else:
        info.update(gpu="CPU (no CUDA)", sm_count=0, capability=None, driver=None)
    return info


def _package_version(name: str):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def _driver_version():
    try:
        import pynvml  # nvidia-ml-py, present on the GPU machine

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        return None


# -- test and benchmark ---------------------------------------------------------------------------


def _make_input(args: dict):
    base = dict(args)

    def make(seed: int):
        return reference.generate_input(**{**base, "seed": seed})

    return make


def op_test(state: WorkerState, args: dict, guarded: bool = True) -> dict:
    make = _make_input(args)
    if guarded:
        guard.checked_run(state.kernel, make, reference.check_implementation, args["seed"])
    else:
        data = make(args["seed"])
        good, message = reference.check_implementation(data, state.kernel(timing.clone_data(data)))
        if not good:
            raise CaseFailed(message)
    return {"status": "pass"}


def op_benchmark(
    state: WorkerState,
    args: dict,
    recheck: bool,
    max_repeats: int,
    max_time_ns: float,
    method: str = "per-call",
    batch: int = 50,
    gap_us: float = timing.DEFAULT_GAP_US,
    wall_cap_ns: float = 120e9,
    host_overhead: bool = True,
) -> dict:
    make = _make_input(args)
    flusher = state.get_flusher(gap_us)
    check = reference.check_implementation
    if method == "batched":
        stats, samples = timing.time_batched(
            state.kernel, make, check, args["seed"], batch, max_repeats, max_time_ns, flusher, wall_cap_ns
        )
    else:
        stats, samples = timing.time_per_call(
            state.kernel, make, check, args["seed"], recheck, max_repeats, max_time_ns, flusher, wall_cap_ns
        )
    result = {"stats": stats.__dict__, "samples": samples, "timer": timing.Timer().kind, "method": method}
    if host_overhead:
        result["host_us"] = timing.host_overhead_us(state.kernel, make(args["seed"]))
    return result


def op_samples(state: WorkerState, args: dict, n: int, method: str = "per-call", gap_us: float = timing.DEFAULT_GAP_US) -> list:
    """n timed runs of one case with no stop rule (compare interleaves these between submissions).
    The output is checked the first time a case is seen in this worker."""
    key = tuple(sorted(args.items())) + (method,)
    make = _make_input(args)
    if key not in state.checked_cases:
        data = make(args["seed"])
        good, message = reference.check_implementation(timing.clone_data(data), state.kernel(timing.clone_data(data)))
        if not good:
            raise CaseFailed(message)
        state.checked_cases.add(key)
    flusher = state.get_flusher(gap_us)
    check = reference.check_implementation
    if method == "batched":
        _, samples = timing.time_batched(state.kernel, make, check, args["seed"], 10, n, float("inf"), flusher, float("inf"))
    else:
        _, samples = timing.time_per_call(state.kernel, make, lambda *_: (True, ""), args["seed"], False, n, float("inf"), flusher, float("inf"))
    return samples[:n]


def op_profile(state: WorkerState, args: dict, ncu: bool = False) -> str:
    """Torch profiler table of one call (or, under Nsight Compute, one call inside the NVTX range
    'custom_kernel' that `--nvtx-include` selects)."""
    from torch.cuda.nvtx import range as nvtx_range
    from torch.profiler import ProfilerActivity, profile

    data = _make_input(args)(args["seed"])
    state.kernel(timing.clone_data(data))  # compile and warm outside the profiled region
    timing.sync()
    cloned = timing.clone_data(data)
    if ncu:
        with nvtx_range("custom_kernel"):
            state.kernel(cloned)
            timing.sync()
        return ""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        state.kernel(cloned)
        timing.sync()
    sort = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=20)


def op_floor(state: WorkerState, shapes: list, gap_us: float = timing.DEFAULT_GAP_US) -> dict:
    from eval import sol

    return sol.measure_floors([tuple(s) for s in shapes], state.get_flusher(gap_us))


def op_bf16(state: WorkerState, args: dict, gap_us: float = timing.DEFAULT_GAP_US) -> dict:
    from eval import accuracy

    return accuracy.time_bf16_gemv(args, state.get_flusher(gap_us))


def op_accuracy(state: WorkerState, args: dict) -> dict:
    from eval import accuracy

    return accuracy.measure(state.kernel, args)


OPS = {
    "load": op_load,
    "test": op_test,
    "benchmark": op_benchmark,
    "samples": op_samples,
    "profile": op_profile,
    "floor": op_floor,
    "bf16": op_bf16,
    "accuracy": op_accuracy,
}


def describe_error(exc: BaseException) -> str:
    """One line a user can act on."""
    first = (str(exc).strip().splitlines() or [""])[0][:400]
    if isinstance(exc, (CaseFailed, SubmissionLoadError)):
        return first
    if isinstance(exc, SystemExit):
        return f"the submission called sys.exit({exc.code}); custom_kernel must return the output"
    if isinstance(exc, torch.OutOfMemoryError):
        return f"ran out of GPU memory: {first}"
    if isinstance(exc, MemoryError) or "can't allocate memory" in first or "not enough memory" in first:
        return f"ran out of host memory: {first}"
    if "CUDA error" in first or "illegal memory access" in first:
        return f"CUDA error: {first}"
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    return f"raised {type(exc).__name__}: {first}"
