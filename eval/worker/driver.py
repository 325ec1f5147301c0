"""The worker's Python side: reads the judge's requests, imports the submission, makes inputs and
hands everything that is measured or checked to the compiled part (native.cpp).

Runs inside the submission's process, so nothing here is trusted by the judge: a submission can
patch any of it. Whatever it changes here can only make its own outputs wrong in the judge's eyes
(the judge checks them against its own inputs and canaries) or break the channel (a failure); time
and the signed replies come from the compiled part.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pickle
import platform
import struct
import sys
import time
import traceback
from pathlib import Path


# the L2 flush buffer is this many times the device's L2 (eval/judge/modes.py sends the same);
# EVAL_FLUSH_L2X (diagnosis: the judge's and the worker's environment alike) sets another multiple
FLUSH_L2_MULTIPLE = float(os.environ.get("EVAL_FLUSH_L2X") or 4.0)


def read_request(fd: int):
    header = _read_exact(fd, 8)
    if header is None:
        return None
    (size,) = struct.unpack(">Q", header)
    return pickle.loads(_read_exact(fd, size))  # the judge's own requests (pipe from the parent)


def _read_exact(fd: int, n: int):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class SubmissionLoadError(Exception):
    pass


def load_submission(path: Path):
    """Import the file as the module `submission` (as the leaderboard does); return the module."""
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
    if not callable(getattr(module, "custom_kernel", None)):
        raise SubmissionLoadError(f"{path.name} defines no custom_kernel(data) function")
    return module


def stand_in_gpu(torch, arch: str) -> None:
    """A build-only worker (the judge's prebuild in `batch`: no GPU visible, EVAL_BUILD_ONLY) answers the
    questions a contestant's file asks at import before it builds, `torch.cuda.is_available()`, the
    device count and its capability, as the judge's GPU (EVAL_GPU_ARCH, e.g. 90) would, so that a file
    that builds only `if torch.cuda.is_available()`, for the arch it reads, builds here ahead of the GPU
    slot, with the same flags. Anything that needs the device itself still fails here, and such a file
    builds in its GPU worker as before (prebuild is best effort); this worker runs nothing after the
    import."""
    major, minor = int(arch[:-1]), int(arch[-1])
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.get_device_capability = lambda device=None: (major, minor)


def describe_error(exc: BaseException) -> str:
    """One line a user can act on."""
    import torch

    first = (str(exc).strip().splitlines() or [""])[0][:400]
    if isinstance(exc, SubmissionLoadError):
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


class Worker:
    def __init__(self, native, layers: dict, cuda_error: str | None = None):
        import torch

        from eval import problem_folder

        reference = problem_folder.current().reference  # EVAL_PROBLEM_DIR, set by the judge

        self.native = native
        self.layers = layers
        self.reference = reference
        self.torch = torch
        self.cuda = torch.cuda.is_available() and not cuda_error
        self.cuda_error = cuda_error
        self.module = None
        self.deferred: Path | None = None  # a folder of its own contract: its evaluator imports the file
        self.said_hello = False

    def kernel(self, request: dict):
        if self.module is None:
            raise SubmissionLoadError("no submission loaded")
        config = request.get("config")
        if config is None:
            return self.module.custom_kernel
        run_with = self.module.run_with
        return lambda data: run_with(data, config)

    def make_input(self, args: dict):
        from eval.records import generate_args

        generate = self.reference.generate_input
        args = generate_args(args)
        from eval.problem_folder import generate_seeded

        return lambda seed, overrides=None: generate_seeded(generate, {**args, **(overrides or {}), "seed": int(seed)})

    # -- ops: each ends in exactly one reply ---------------------------------------------------
    def op_hello(self, nonce: str, request: dict) -> None:
        """The first request, answered before anything of the submission exists: what the judge
        may believe about this worker (its sandbox, whether CUDA works here, what is emulated)."""
        if self.said_hello:
            raise SubmissionLoadError("hello is answered once, before the submission is loaded")
        self.said_hello = True
        emulated = []
        if request.get("emulate"):
            from eval.worker import emulation

            emulated = emulation.install()
        works, error = _cuda_works(self.torch) if self.cuda else (False, self.cuda_error)
        stamps = dict(getattr(self, "stamps", {}))
        stamps["hello"] = time.monotonic()
        info = {"sandbox": self.layers, "python": platform.python_version(), "torch": self.torch.__version__,
                "cuda": works, "emulated": emulated, "start stamps": stamps}
        if works:  # the GPU as a sandboxed worker sees it (python -m eval doctor)
            props = self.torch.cuda.get_device_properties(0)
            info["gpu"] = f"{props.name} (sm_{props.major}{props.minor}, {props.total_memory >> 30} GiB)"
        if not works:  # the judge steps the sandbox down for a failure to start, not for a full GPU
            info["cuda_error"] = error or "torch.cuda.is_available() is False inside the worker"
        self.native.reply(nonce, "hello", json.dumps(info))

    def op_load(self, nonce: str, request: dict) -> None:
        if not self.said_hello or self.module is not None:
            raise SubmissionLoadError("load follows hello, once")
        started = time.monotonic()
        if request.get("submission"):
            arch = os.environ.get("EVAL_GPU_ARCH", "")
            if os.environ.get("EVAL_BUILD_ONLY") == "1" and not self.cuda and len(arch) >= 2 and arch.isdigit():
                stand_in_gpu(self.torch, arch)
            if request.get("defer"):  # a folder of its own contract: its evaluator imports it (op_evaluate)
                self.deferred = Path(request["submission"])
            else:
                self.module = load_submission(Path(request["submission"]))
        self.native.reply(nonce, "ready", json.dumps({"import_s": round(time.monotonic() - started, 3)}))

    def check_device(self, request: dict) -> None:
        if request["params"].get("cuda") and not self.cuda:
            raise RuntimeError("CUDA is not available inside the worker")

    def op_trial(self, nonce: str, request: dict) -> None:
        self.check_device(request)
        self.native.trial(nonce, self.kernel(request), self.make_input(request["args"]), request["params"])

    def op_runs(self, nonce: str, request: dict) -> None:
        self.check_device(request)
        self.native.runs(nonce, self.kernel(request), self.make_input(request["args"]), request["params"])

    def op_baseline(self, nonce: str, request: dict) -> None:
        """A harness kernel (streaming read, the problem module's baseline) timed by the same loop; only in a worker that
        holds no submission."""
        if self.module is not None:
            raise SubmissionLoadError("baselines run only in a worker without a submission")
        from eval.worker import baselines

        launch, data = baselines.make(request["baseline"])
        self.native.runs(nonce, lambda _: launch(), lambda seed: data, request["params"])

    def op_configs(self, nonce: str, request: dict) -> None:
        """The launch configurations a tunable submission offers, and its device_key() when it has
        one (informational: each configuration is then run and judged like any other run)."""
        configs = getattr(self.module, "CONFIGS", None)
        if not configs or not callable(getattr(self.module, "run_with", None)):
            raise SubmissionLoadError("the submission exposes no CONFIGS and run_with(data, config) to tune")
        device_key = getattr(self.module, "device_key", None)
        offer = {"configs": [list(c) if isinstance(c, (list, tuple)) else c for c in configs],
                 "device_key": list(device_key()) if callable(device_key) and self.cuda else None}
        self.native.reply(nonce, "text", json.dumps(offer))

    def op_profile(self, nonce: str, request: dict) -> None:
        from eval.worker import profiling

        text = profiling.profile(self.kernel(request), self.make_input(request["args"])(request["args"]["seed"]),
                                 request.get("ncu", False))
        self.native.reply(nonce, "text", text)

    def op_evaluate(self, nonce: str, request: dict) -> None:
        """A folder of its own contract (no task.py: princeton's cross_entropy_py): its own evaluator
        (task.yml's config.main) run here, in the sandbox, the way the leaderboard's runner runs it: the
        submission importable as `submission`, `EVALUATOR MODE CASES` in sys.argv, the write end of a
        pipe in POPCORN_FD. The reply: its exit code and the key: value lines it wrote (the judge reads
        them, eval/judge/own_contract.py). Once per worker."""
        import runpy
        import tempfile
        import threading

        from eval import problem_folder

        if self.deferred is None or self.module is not None:
            raise SubmissionLoadError("evaluate follows a deferred load, once")
        evaluator = problem_folder.current().own_evaluator
        if evaluator is None:
            raise SubmissionLoadError("this problem folder has no evaluator of its own")
        submission, self.deferred = self.deferred, None
        sys.meta_path.insert(0, _SubmissionFinder(submission))
        handle, cases = tempfile.mkstemp(suffix=".txt")  # in the worker's own TMPDIR
        with os.fdopen(handle, "w") as f:
            f.write(str(request["cases"]))
        read_end, write_end = os.pipe()
        pipe = os.fstat(write_end).st_ino
        lines: list = []
        drain = threading.Thread(target=lambda: lines.append(os.fdopen(read_end, "r", errors="replace").read()),
                                 daemon=True)
        drain.start()
        os.environ["POPCORN_FD"] = str(write_end)
        sys.argv = [evaluator.name, str(request["mode"]), cases]
        code = 0
        try:
            runpy.run_path(str(evaluator), run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        finally:
            try:  # unless the evaluator closed it (os.fdopen(...).close()) and the number is another file's now
                if os.fstat(write_end).st_ino == pipe:
                    os.close(write_end)
            except OSError:
                pass
            drain.join(timeout=30)
        self.native.reply(nonce, "text", json.dumps({"exit": code, "popcorn": "".join(lines)}))

    def handle(self, request: dict) -> None:
        nonce = request["nonce"]
        op = getattr(self, f"op_{request['op']}", None)
        try:
            if op is None:
                raise ValueError(f"unknown worker op {request['op']!r}")
            op(nonce, request)
        except BaseException as exc:  # everything, SystemExit from the submission included
            traceback.print_exc()
            self.native.reply(nonce, "error", describe_error(exc))
        sys.stdout.flush()
        sys.stderr.flush()


class _SubmissionFinder:
    """`import submission` finds the file under judgement (op_evaluate), as the runner stages it."""

    def __init__(self, path: Path):
        self.path = path

    def find_spec(self, name, path=None, target=None):
        if name != "submission":
            return None
        return importlib.util.spec_from_file_location("submission", self.path)


def _cuda_works(torch) -> tuple[bool, str | None]:
    """A real allocation and kernel, not only a device count; what failed, if it did."""
    try:
        return int(torch.ones(1, device="cuda").add_(1).item()) == 2, None
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return False, f"{type(exc).__name__}: {exc}"


def mapped_library(prefix: str) -> str | None:
    """The path of a library this process has mapped whose file name starts with prefix."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if os.path.basename(path).startswith(prefix):
                    return path
    except OSError:
        pass
    return None


def serve(request_fd: int, reply_fd: int, key_fd: int, native_so: str, layers: dict,
          cuda_error: str | None = None, stamps: dict | None = None) -> None:
    """cuda_error: why CUDA did not start in eval/worker/__main__.py (None: it started, or no GPU)."""
    import torch  # already imported, CUDA started (eval/worker/__main__.py)

    from eval.worker import build

    native = build.load(native_so)
    cuda = torch.cuda.is_available() and not cuda_error
    driver = (mapped_library("libcudart.so") or "") if cuda else ""  # torch's CUDA runtime
    # key, driver, GPU state and the memory filter fixed before the submission exists
    from eval.worker import sandbox

    harden = not layers.get("sandbox") and not sandbox.skipped("memory-filter")
    hardening = native.open_channel(key_fd, reply_fd, driver, cuda, FLUSH_L2_MULTIPLE, harden)
    if sandbox.skipped("memory-filter"):
        hardening["memory filter"] = sandbox.SKIPPED
    stamps = dict(stamps or {})
    stamps["native"] = time.monotonic()
    worker = Worker(native, {**layers, **{f"native {k}": v for k, v in hardening.items()}}, cuda_error)
    worker.stamps = stamps
    while True:
        request = read_request(request_fd)
        if request is None:
            return
        worker.handle(request)
