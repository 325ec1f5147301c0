"""`--emulate-blackwell`: exact software stand-ins for Blackwell-only library calls, installed in the
worker before the submission is imported, so a B200 submission gets a correctness verdict on an older
GPU. Runs in the submission's process (the judge trusts nothing here: outputs are judged as always).
Times measured with it are emulated, not B200 times; the report says so.

Covered: `torch._scaled_mm`, its whole signature (bias, scale_result, out_dtype, use_fast_accum,
out), on block-scaled operands: FP4 (float4_e2m1fn_x2) with e4m3 scales per 16 elements or e8m0
per 32, FP8 (float8_e4m3fn / e5m2) with e8m0 per 32, scales in cuBLASLt's blocked (swizzled)
layout: decoded exactly, products summed in float32 (as cuBLAS accumulates), rounded once to the
output dtype (eval/emulate/scaled_mm.py). Other operand types call torch's own.
CUDA built through torch's load_inline / load: built for this GPU through eval/worker/nvcc_emulate.py
(PYTORCH_NVCC), whatever target flags the submission gave, with the sm_100-only PTX rewritten
exactly; `-lcuda` links against the toolkit's stub when the driver's libcuda.so is not on the link
path. Triton: its ptxas (TRITON_PTXAS_PATH) goes through the same rewrite, so inline asm with those
instructions builds. Both kinds of build go to their own cache folders, so a later run without the
flag never loads one. A build that still fails (an instruction no rewrite stands in for, such as
tcgen05; a header the contest's machine had and this one lacks) raises with one first line naming
the stage (nvcc front end, ptxas, link), what it refused and its line in the submission
(build_failure), the compiler's log on the lines after it; a verbose=True build's log too (torch
prints it instead: it is kept, then printed). A missing CUTLASS header names .ci/stage-cutlass.sh,
which stages CUTLASS's headers in .cutlass/ (every worker has them on its include path, with or
without the flag).
"""
from __future__ import annotations

import os
import re

import torch

from eval.emulate import scaled_mm
from eval.emulate.scaled_mm import BLOCK, FP4_VALUES, decode_fp4_rows, scaled_mm_fp4, unblock_scales  # noqa: F401


def install() -> list[str]:
    """Put the stand-ins in place; returns what is emulated (for the report)."""
    covered = ["torch._scaled_mm, block-scaled FP4/FP8 (exact, float32 sums)"]
    if torch.cuda.is_available() or os.environ.get("EVAL_GPU_ARCH"):  # a build-only worker knows the GPU's arch
        covered.append(_install_nvcc())
        covered.append(_install_triton())
        _install_build_reasons()
    scaled_mm.install()
    return covered


def nvcc_command(arch: str) -> str:
    """The nvcc stand-in as PYTORCH_NVCC: by file path, not `-m`, since ninja runs it from the
    extension's build folder, where `eval` is not importable."""
    import os
    import shlex
    import sys

    stand_in = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvcc_emulate.py")
    return f"{shlex.quote(sys.executable)} {shlex.quote(stand_in)} {arch}"


def _gpu_arch() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}{minor}"
    else:
        arch = os.environ["EVAL_GPU_ARCH"]
    return arch + ("a" if arch.startswith("9") else "")


def _install_nvcc() -> str:
    from torch.utils import cpp_extension

    arch = _gpu_arch()
    os.environ["EVAL_REAL_NVCC"] = cpp_extension._join_cuda_home("bin", "nvcc")
    os.environ["PYTORCH_NVCC"] = nvcc_command(arch)
    base = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.expanduser("~/.cache/torch_extensions")
    os.environ["TORCH_EXTENSIONS_DIR"] = base.rstrip("/") + "-emulated-blackwell"
    stub = cuda_stub_dir(cpp_extension._join_cuda_home("lib64", "stubs"))
    if stub:
        os.environ["LIBRARY_PATH"] = os.pathsep.join(filter(None, (os.environ.get("LIBRARY_PATH"), stub)))
    return (f"load_inline/load CUDA built for sm_{arch} (any target flags) with the sm_100-only cvt forms, "
            "f32x2 / mixed fma and 256-bit loads/stores rewritten (eval/worker/nvcc_emulate.py)")


def cuda_stub_dir(stubs: str, search: tuple[str, ...] = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib",
                                                           "/usr/local/cuda/lib64")) -> str | None:
    """The toolkit's stub folder when `-lcuda` would not link otherwise (no libcuda.so, only the
    driver's libcuda.so.1, on the linker's path): the stub has the same soname, so the extension
    loads the real driver at run time."""
    folders = [d for d in (os.environ.get("LIBRARY_PATH") or "").split(os.pathsep) if d] + list(search)
    if any(os.path.exists(os.path.join(d, "libcuda.so")) for d in folders):
        return None
    return stubs if os.path.isfile(os.path.join(stubs, "libcuda.so")) else None


def _install_triton() -> str:
    """TRITON_PTXAS_PATH and TRITON_PTXAS_BLACKWELL_PATH (recent Triton's ptxas for sm_90 and later)
    -> ptxas stand-in scripts that rewrite Triton's PTX (eval/worker/nvcc_emulate.py --ptxas) and run
    the ptxas Triton would have run; Triton's cache moves to its own folder."""
    folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "bin")
    os.makedirs(folder, exist_ok=True)
    for tool in ("ptxas", "ptxas-blackwell"):
        key = f"TRITON_{tool.upper().replace('-', '_')}_PATH"
        os.environ[key] = ptxas_script(folder, tool, real_ptxas(tool, os.environ.get(key)))
    base = os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache")
    os.environ["TRITON_CACHE_DIR"] = base.rstrip("/") + "-emulated-blackwell"
    return "Triton kernels' PTX rewritten the same way before ptxas (TRITON_PTXAS_PATH, TRITON_PTXAS_BLACKWELL_PATH)"


def real_ptxas(tool: str, given: str | None) -> str:
    """The ptxas Triton would use: the one its variable names, Triton's bundled one, the toolkit's,
    or PATH's."""
    import importlib.util
    import shutil

    if given and os.path.isfile(given) and not is_stand_in(given):
        return given
    spec = importlib.util.find_spec("triton")
    if spec and spec.submodule_search_locations:
        bundled = os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "bin", tool)
        if os.path.isfile(bundled):
            return bundled
    toolkit = os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "bin", "ptxas")
    return toolkit if os.path.isfile(toolkit) else (shutil.which("ptxas") or "ptxas")


def is_stand_in(path: str) -> bool:
    """Whether path is one of ptxas_script's scripts (never the real ptxas to wrap)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and b"nvcc_emulate.py" in head and b"--ptxas" in head


def ptxas_script(folder: str, name: str, real: str) -> str:
    """An executable `ptxas` in folder that runs the stand-in with the real ptxas (Triton wants one path)."""
    import shlex
    import stat
    import sys

    stand_in = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvcc_emulate.py")
    path = os.path.join(folder, name)
    text = (f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(stand_in)} --ptxas {shlex.quote(real)} "
            '"$@"\n')
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, os.stat(tmp).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, path)
    return path


# -- a build that fails under emulation says what failed: stage, instruction or header, line -----

# what no rewrite stands in for, by the instruction's first words (PTX ISA names)
NOT_EMULATED = (
    ("tcgen05", "Blackwell tensor-core MMA and tensor memory (tcgen05.*: TMEM, UMMA)"),
    ("setmaxnreg", "register reallocation between warpgroups (setmaxnreg)"),
    ("cvt.rs", "stochastic-rounding conversions (cvt.rs)"),
    ("mma.sync.aligned.kind::mxf", "block-scaled mma.sync (kind::mxf4/mxf8f6f4, sm_120)"),
    ("clusterlaunchcontrol", "cluster launch control (clusterlaunchcontrol.*)"),
)
# ptxas's own diagnostics ("ptxas /tmp/k.ptx, line 40; error   : ...", "ptxas fatal   : ..."), not a
# caller's words about it (Triton: "PTXAS error: Internal Triton PTX codegen error")
PTXAS_ERROR = re.compile(r"ptxas(?: \S+, line \d+;)?\s+(?:error|fatal)\s*:\s*(?P<what>[^\n]+)")
QUOTED = re.compile(r"'([^']+)'")
FRONT_END = re.compile(r"(?P<file>[^\s:()]+\.(?:cu|cuh|cpp|h|hpp))\((?P<line>\d+)\): (?:catastrophic )?error: (?P<what>[^\n]+)")
MISSING = re.compile(r"fatal error: (?P<header>[^\s:]+): No such file or directory")
LINK = re.compile(r"(?:/usr/bin/ld|ld(?:\.\w+)?): cannot find (?P<lib>-l\S+|\S+)")
NVCC_FATAL = re.compile(r"nvcc fatal\s*:\s*(?P<what>[^\n]+)")
CUTLASS_HEADER = re.compile(r"(?:^|/)(?:cutlass|cute)/")  # NVIDIA CUTLASS's C++ headers (CuTe's among them)


def _line_of(needle: str, source: str | None) -> int | None:
    """The line of the submission where needle first appears outside comments."""
    if not source or not needle:
        return None
    from eval.judge import blackwell

    text = blackwell.without_comments(source)
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _at(line: int | None) -> str:
    return f" (line {line})" if line else ""


REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _stage_cutlass(root: str = REPOSITORY) -> str:
    """How to get CUTLASS's headers here: .ci/stage-cutlass.sh stages them in the repository's .cutlass/,
    which the judge puts on every worker's include path; if they are staged, the header is not in
    that version."""
    try:
        with open(os.path.join(root, ".cutlass", "VERSION"), encoding="utf-8") as f:
            staged = f.read().split()[0]
    except (OSError, IndexError):
        staged = None
    if staged and os.path.isdir(os.path.join(root, ".cutlass", "include", "cutlass")):
        return f"; CUTLASS {staged} is staged in .cutlass/ without it: CUTLASS_VERSION=<tag> .ci/stage-cutlass.sh stages another"
    return "; CUTLASS's headers: run .ci/stage-cutlass.sh (stages them in .cutlass/, on every worker's include path)"


def build_failure(output: str, source: str | None, name: str = "the extension", arch: str | None = None) -> str | None:
    """One line for a failed build of CUDA source under --emulate-blackwell, from the build's output
    (ninja's log: nvcc, ptxas, the linker): the stage that failed, what it refused, and where in the
    submission; None when the output names nothing recognisable."""
    target = f"sm_{arch}" if arch else "this GPU"
    missing = MISSING.search(output)
    if missing:
        header = missing.group("header")
        return (f"build of {name} failed (nvcc, emulated for {target}): it includes {header}{_at(_line_of(header, source))}, "
                "which is not installed here (a header of the contest's environment, not a Blackwell instruction)"
                + (_stage_cutlass() if CUTLASS_HEADER.search(header) else ""))
    ptxas = PTXAS_ERROR.search(output)
    if ptxas:
        what = ptxas.group("what").strip()
        quoted = QUOTED.findall(what)
        instruction = quoted[0] if quoted else ""
        why = next((label for prefix, label in NOT_EMULATED if instruction.startswith(prefix)
                    or prefix in what), None)
        line = _line_of(instruction, source) if instruction else None
        return (f"build of {name} failed in ptxas for {target} after the Blackwell rewrite: {what}"
                + (f"; {instruction}{_at(line)} is {why}, which has no software equivalent here" if why
                   else f"; {instruction}{_at(line)} is not rewritten by the emulation" if instruction else ""))
    front = FRONT_END.search(output)
    if front:
        what = front.group("what").strip()
        quoted = re.findall(r'"([^"]+)"', what)
        line = _line_of(quoted[0], source) if quoted else None
        return (f"build of {name} failed (nvcc front end, emulated for {target}): {front.group('file').rsplit('/', 1)[-1]} "
                f"line {front.group('line')}: {what}" + (f" (submission line {line})" if line else ""))
    link = LINK.search(output)
    if link:
        return f"build of {name} failed (link): cannot find {link.group('lib')}"
    fatal = NVCC_FATAL.search(output)
    if fatal:
        return f"build of {name} failed (nvcc, emulated for {target}): nvcc fatal: {fatal.group('what').strip()}"
    return None


def _submission_source() -> str | None:
    """The source of the submission module whose import is running (the worker loads it as `submission`)."""
    import inspect

    for frame in inspect.stack()[2:]:
        if frame.frame.f_globals.get("__name__") == "submission":
            for path in (frame.frame.f_globals.get("__file__"), frame.filename):
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        return f.read()
                except (OSError, TypeError):
                    continue
            return None
    return None


def _install_build_reasons() -> None:
    """torch's load_inline / load, and Triton's cubin step, wrapped so that a build failing under
    emulation raises with build_failure's line first (the log follows on the next lines)."""
    from torch.utils import cpp_extension

    arch = _gpu_arch()
    _keep_verbose_build_output(cpp_extension)
    for attr in ("load_inline", "load"):
        original = getattr(cpp_extension, attr)
        if getattr(original, "_emulation_reasons", False):
            continue

        def wrapped(*args, _original=original, **kwargs):
            try:
                return _original(*args, **kwargs)
            except Exception as exc:
                name = kwargs.get("name") or (args[0] if args else "the extension")
                reason = build_failure(str(exc), _submission_source(), repr(name), arch)
                if reason is None:
                    raise
                raise RuntimeError(f"{reason}\n{exc}") from exc

        wrapped._emulation_reasons = True
        setattr(cpp_extension, attr, wrapped)
    _wrap_triton_cubin(arch)


def _keep_verbose_build_output(cpp_extension) -> None:
    """With verbose=True (as contest files call load_inline), torch's _run_ninja_build sends ninja's
    output to stdout and raises the bare "Error building extension 'x'", leaving build_failure
    nothing to read. Wrapped: a verbose build's output goes to a file while ninja runs, then to
    stdout as verbose asked (once the build has ended), and a failure raises as torch does without
    verbose, "Error building extension 'x': <output>". Builds without verbose are torch's own."""
    original = getattr(cpp_extension, "_run_ninja_build", None)
    if original is None or getattr(original, "_emulation_reasons", False):
        return

    def _run_ninja_build(build_directory, verbose, error_prefix, *args, **kwargs):
        if not verbose:
            return original(build_directory, verbose, error_prefix, *args, **kwargs)
        import sys
        import tempfile

        output = b""
        try:
            with tempfile.TemporaryFile() as log:
                sys.stdout.flush()
                sys.stderr.flush()
                saved = os.dup(1)
                os.dup2(log.fileno(), 1)
                try:
                    return original(build_directory, verbose, error_prefix, *args, **kwargs)
                finally:
                    sys.stdout.flush()
                    os.dup2(saved, 1)
                    os.close(saved)
                    log.seek(0)
                    output = log.read()
                    try:
                        _write_all(1, output)  # what verbose shows
                    except OSError:
                        pass
        except RuntimeError as exc:
            text = output.decode(errors="replace")
            if text.strip() and str(exc) == error_prefix:
                raise RuntimeError(f"{error_prefix}: {text}") from exc.__cause__
            raise

    _run_ninja_build._emulation_reasons = True
    cpp_extension._run_ninja_build = _run_ninja_build


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _wrap_triton_cubin(arch: str) -> None:
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return
    try:
        from triton.backends.nvidia import compiler
    except Exception:  # a Triton without the NVIDIA backend, or one that cannot load here
        return
    backend = getattr(compiler, "CUDABackend", None)
    original = getattr(backend, "make_cubin", None)
    if original is None or getattr(original, "_emulation_reasons", False):
        return

    def make_cubin(self, src, *args, **kwargs):
        try:
            return original(self, src, *args, **kwargs)
        except Exception as exc:
            reason = build_failure(str(exc), _submission_source(), "a Triton kernel", arch)
            if reason is None:
                raise
            raise RuntimeError(f"{reason}\n{exc}") from exc

    make_cubin._emulation_reasons = True
    backend.make_cubin = make_cubin
