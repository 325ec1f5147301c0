"""Why a submission written for the contest GPU (B200, sm_100) fails on an older one, in one line a
contestant can act on. Judge side; reads the source only.

Used after a failure on a GPU below compute capability 10: when the failure looks like a missing
architecture feature (a build or PTX error, no kernel image, cuBLAS or the DSL refusing) and the
source uses a Blackwell-only feature, the reason names the feature, its line, and the way out. A
kernel that keeps a path for older GPUs (as submission/v5.py does behind __CUDA_ARCH__ >= 1000) runs
and is never explained this way: only failures are.
"""
from __future__ import annotations

import dataclasses
import io
import re
import tokenize

# (what, pattern over the source, what it needs); find() takes the first that emulation does not cover,
# else the first in this order
FEATURES = (
    ("the FP4 conversion cvt.*.e2m1x2", r"cvt\.[a-z0-9.]*e2m1x2", "sm_100a"),
    ("the FP6 / UE8M0 conversions cvt.*.e2m3x2 / e3m2x2 / ue8m0x2", r"cvt\.[a-z0-9.]*(?:e2m3x2|e3m2x2|ue8m0x2)",
     "sm_100a"),
    ("stochastic-rounding conversions cvt.rs", r"\bcvt\.rs\b", "sm_100a"),
    ("CUTLASS C++ SM100 kernels (cutlass::arch::Sm100, CuTe SM100 MMA atoms: tcgen05 and TMEM)",
     r"cutlass::arch::Sm1[01]\d|\bSM100_(?:MMA|TMEM|UTCCP)\w*|Sm1xxBlkScaledConfig", "sm_100a"),
    ("CuTe DSL Blackwell atoms (cute.nvgpu.tcgen05, SM100 MMA)", r"nvgpu\.tcgen05|nvgpu import[^\n]*\btcgen05|\btcgen05\.Mma\w*Op|MmaF16BF16Op|sm100_utils|blackwell_helpers", "sm_100a"),
    ("the CuTe DSL FP4 type cutlass.Float4E2M1FN (the DSL converts it with sm_100a instructions; "
     "a DSL kernel cannot be rewritten)", r"\bFloat4E2M1FN\b", "sm_100a"),
    ("tcgen05 / TMEM / UMMA instructions", r"\btcgen05\b|\btcgen05\.|\bTMEM\b|\bUMMA\b|\btmem_", "sm_100a"),
    ("block-scaled mma.sync.aligned.kind::mxf4nvf4 / mxf8f6f4", r"\bmma\.sync\.aligned\.kind::mxf", "sm_120a"),
    ("256-bit loads (.v8)", r"\b(?:ld|st)\.[A-Za-z0-9_.:]*\.v8\.[a-z0-9]+", "sm_100"),
    ("packed f32x2 arithmetic", r"\b(?:add|sub|mul|fma)(?:\.[a-z]+)*\.f32x2\b", "sm_100"),
    ("mixed-precision fma.*.f32.f16 / .bf16", r"\bfma(?:\.[a-z]+)*\.f32\.b?f16\b", "sm_100"),
    ("cuBLASLt's block-scaled FP4 / MX matmul called from C++ (not emulated: only torch._scaled_mm is)",
     r"CUBLASLT_MATMUL_MATRIX_SCALE_VEC\w+|CUDA_R_4F_E2M1", "sm_100 (cuBLAS has no FP4 GEMM below it)"),
    ("torch._scaled_mm on FP4 operands", r"\b_scaled_mm\b", "sm_100 (cuBLAS has no FP4 GEMM below it)"),
    ("an sm_100a / sm_103a build target",
     r"\b(?:sm|compute)_1(?:0[03]|1[01]|2[01])[af]?\b|arch=compute_1[012]\d|TORCH_CUDA_ARCH_LIST[^\n]*1[012]\.[0-3]",
     "sm_100a"),
)
# what --emulate-blackwell stands in for (eval/worker/emulation.py, eval/worker/nvcc_emulate.py)
EMULATED = {"torch._scaled_mm on FP4 operands", "the FP4 conversion cvt.*.e2m1x2", "256-bit loads (.v8)",
            "an sm_100a / sm_103a build target", "packed f32x2 arithmetic", "mixed-precision fma.*.f32.f16 / .bf16",
            "the FP6 / UE8M0 conversions cvt.*.e2m3x2 / e3m2x2 / ue8m0x2"}
ARCH_FAILURE = re.compile(
    r"no kernel image|CUBLAS_STATUS_NOT_SUPPORTED|NVVM|CompilerDiagnosticError|Error building extension|"
    r"not supported on \.target|requires \.target|ptxas|illegal instruction|Unsupported gpu architecture|"
    r"unsupported|cvt|e2m1|sm_10|"
    # the built library refused by the loader (a CUTLASS SM100 build), or a CUDA call that fails where
    # a kernel has no image for this GPU (the file's own wording of it)
    r"could not load this library|"
    r"invalid device function|device kernel image is invalid|cuda(?:FuncGetAttributes|FuncSetAttribute|"
    r"OccupancyMaxActiveBlocksPerMultiprocessor|LaunchKernel(?:Ex)?)\b|cuLaunchKernel|cuModuleGetFunction", re.I)


# a file that compiles its Blackwell code only for Blackwell (__CUDA_ARCH__ >= 1000, the arch-specific
# feature macros) builds on an older GPU: a failed build of it is its own, unless the compiler says the
# target lacks something
ARCH_GUARD = re.compile(r"__CUDA_ARCH__\s*>=\s*1[0-2]\d0|__CUDA_ARCH_FEAT_SM1\d\d|__CUDA_ARCH_(?:FAMILY_)?SPECIFIC__")
TARGET_REFUSED = re.compile(r"not supported on \.target|requires \.target|Unsupported gpu architecture|no kernel image", re.I)

# failures of a kernel that ran: wrong results are not an architecture problem
RAN = ("timed run", "mismatch found", "output ", "returned the pre-filled", "modified its input", "correct only on")


@dataclasses.dataclass(frozen=True)
class Feature:
    what: str
    line: int
    needs: str

    @property
    def emulated(self) -> bool:
        return self.what in EMULATED


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _blank_c_comments(text: str) -> str:
    """`//` and `/* */` comments of C/CUDA/PTX source inside a Python string, blanked (lengths and
    line breaks kept, so positions still give line numbers)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: _blank(m.group(0)), text, flags=re.S)


def without_comments(source: str) -> str:
    """The source with Python comments and the C-style comments of its string literals blanked."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out = list(source)
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in (tokenize.COMMENT, tokenize.STRING):
                continue
            start = offsets[token.start[0] - 1] + token.start[1]
            end = offsets[token.end[0] - 1] + token.end[1]
            text = source[start:end]
            out[start:end] = _blank(text) if token.type == tokenize.COMMENT else _blank_c_comments(text)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"(?m)^\s*#[^\n]*", lambda m: _blank(m.group(0)), _blank_c_comments(source))
    return "".join(out)


def find(source: str) -> Feature | None:
    """The Blackwell-only feature the source uses (comments aside), with its line: the first one that
    --emulate-blackwell cannot stand in for when there is one (a file with both tcgen05 and the FP4
    cvt fails for tcgen05, with or without the flag), else the first in FEATURES' order."""
    source = without_comments(source)
    found = []
    for what, pattern, needs in FEATURES:
        match = re.search(pattern, source)
        if match:
            found.append(Feature(what, source.count("\n", 0, match.start()) + 1, needs))
    return next((f for f in found if not f.emulated), found[0] if found else None)


def explain(source: str, failure: str, capability: str | None, gpu: str) -> str | None:
    """The one-line reason, or None when this failure is not a missing-Blackwell one. A failure that
    does not look like one (a CuTe DSL TypeError before anything compiles) keeps its own words, with a
    note when the source uses what no GPU before sm_100 has and emulation cannot stand in for
    (tcgen05, TMEM): a fact about the file, not a claim about this failure's cause."""
    if not capability or float(capability) >= 10.0 or not failure or failure.startswith(RAN):
        return None  # a kernel that ran and was wrong is not an architecture problem
    feature = find(source)
    if feature is None:
        return None
    arch = "sm_" + capability.replace(".", "")
    if "Error building extension" in failure and ARCH_GUARD.search(without_comments(source)) \
            and not TARGET_REFUSED.search(failure):
        return None  # found on a 2xH200: v5 with a syntax error was "cannot run here: needs a Blackwell GPU"
    if not ARCH_FAILURE.search(failure):
        if feature.emulated:
            return None
        return (f"{failure.splitlines()[0][:200]} (the source uses {feature.what}, line {feature.line}, which needs "
                f"{feature.needs}: this GPU is {arch}, and emulation cannot stand in for it; run it on a B200)")
    return (f"uses {feature.what} (line {feature.line}), which needs {feature.needs}; this GPU is {arch} ({gpu}): "
            "run it on a B200, or keep a path for this GPU (guard the sm_100 code with __CUDA_ARCH__ >= 1000, "
            "as submission/v5.py does)" + (", or add --emulate-blackwell to check its correctness here"
                                           if feature.emulated else ""))

