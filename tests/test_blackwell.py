"""A B200-only submission failing on an older GPU gets one line naming the feature and the way out;
kernels that keep a path for older GPUs, and failures that are not about the architecture, keep
their own reason."""
import pytest

from eval.judge import blackwell
from tests.conftest import ROOT

CVT_SOURCE = '''
from torch.utils.cpp_extension import load_inline
cuda = r"""
__device__ half2 fp4x2(uint8_t q) {
  uint32_t out;
  asm("{ .reg .b8 q; mov.b16 {q, _}, %1; cvt.rn.f16x2.e2m1x2 %0, q; }" : "=r"(out) : "h"((uint16_t)q));
  return *reinterpret_cast<half2*>(&out);
}
"""
mod = load_inline("gemv", cpp_sources="", cuda_sources=cuda,
                  extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])
'''
V8_SOURCE = 'asm volatile("ld.global.nc.L1::no_allocate.v8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];" : ...);'
TCGEN05_SOURCE = 'asm volatile("tcgen05.mma.cta.kind::mxf4nvf4.block_scale [%0], %1, %2, %3;" :: ...);'
SCALED_MM_SOURCE = '''
import torch
def custom_kernel(data):
    a, b, sfa, sfb, sfa_perm, sfb_perm, c = data
    for i in range(c.shape[2]):
        res = torch._scaled_mm(a[:, :, i], b[:, :, i].transpose(0, 1), sfa_perm[..., i], sfb_perm[..., i],
                               out_dtype=torch.float16)
        c[:, 0, i] = res[:, 0]
    return c
# a and b arrive as torch.float4_e2m1fn_x2
'''
CUTE_SOURCE = "import cutlass.cute as cute\nmma = cute.nvgpu.tcgen05.MmaMXF4NVF4Op(...)\n"


@pytest.mark.parametrize("source,failure,what,line", [
    (CVT_SOURCE, "CUDA error: no kernel image is available for execution on the device", "e2m1x2", 6),
    (V8_SOURCE, "raised RuntimeError: Error building extension 'gemv': ptxas error: Feature '.v8' requires .target sm_100",
     "256-bit loads", 1),
    (TCGEN05_SOURCE, "raised RuntimeError: Error building extension 'x'", "tcgen05", 1),
    (SCALED_MM_SOURCE, "raised RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul",
     "_scaled_mm", 6),
    (CUTE_SOURCE, "raised CompilerDiagnosticError: error: NVVM backend compilation failed", "CuTe DSL", 2),
    # built for sm_100a only, then the file's own check of a CUDA call: no image for this GPU
    (CVT_SOURCE, "raised RuntimeError: cudaFuncGetAttributes failed", "e2m1x2", 6),
    (CVT_SOURCE, "raised RuntimeError: CUDA error: invalid device function", "e2m1x2", 6),
    # a CUTLASS SM100 build that the loader refuses here: the feature first, not the loader's words
    ('SRC = r"""\n#include "cutlass/cutlass.h"\nusing ArchTag = cutlass::arch::Sm100;\n"""\n',
     "could not load x.py: raised OSError: Could not load this library: /tmp/ext/gemv_c0", "CUTLASS C++ SM100", 3),
])
def test_blackwell_feature_named_with_the_way_out(source, failure, what, line):
    reason = blackwell.explain(source, failure, "9.0", "NVIDIA H100 80GB HBM3")
    assert reason and what in reason and f"(line {line})" in reason, reason
    assert "this GPU is sm_90 (NVIDIA H100 80GB HBM3)" in reason and "run it on a B200" in reason


def test_no_explanation_on_blackwell_or_for_wrong_results():
    failure = "CUDA error: no kernel image is available for execution on the device"
    assert blackwell.explain(CVT_SOURCE, failure, "10.0", "NVIDIA B200") is None
    assert blackwell.explain(CVT_SOURCE, "mismatch found! ...", "9.0", "H100") is None
    assert blackwell.explain(CVT_SOURCE, "timed run 3: mismatch found! ...", "9.0", "H100") is None
    assert blackwell.explain("def custom_kernel(d): ...", failure, "9.0", "H100") is None


@pytest.mark.parametrize("name", ["v5", "v4", "torch_ref", "triton_ref"])
def test_our_submissions_are_only_explained_when_they_fail_for_the_architecture(name):
    """v5 and v4 carry the Blackwell path behind an architecture check: found in the source, but a
    wrong result or a crash of their own is never turned into a Blackwell reason."""
    source = (ROOT / "submission" / f"{name}.py").read_text()
    assert blackwell.explain(source, "mismatch found! custom implementation doesn't match", "9.0", "H100") is None
    assert blackwell.explain(source, "crashed: worker killed by SIGSEGV (segfault)", "9.0", "H100") is None


def test_a_failure_of_its_own_keeps_its_words_with_a_note_on_what_cannot_run_here():
    """A CuTe DSL tcgen05 file failing with a TypeError before it compiles: the TypeError stays the
    reason, and the note says the file uses what this GPU lacks and emulation cannot stand in for;
    a file whose Blackwell-only parts emulation covers gets no note (its failure is its own)."""
    failure = "raised TypeError: Inputs are incorrect for type: cute.PtrType"
    reason = blackwell.explain(TCGEN05_SOURCE, failure, "9.0", "NVIDIA H100 80GB HBM3")
    assert reason.startswith(failure) and "tcgen05" in reason and "emulation cannot stand in" in reason, reason
    assert blackwell.explain(CVT_SOURCE, failure, "9.0", "NVIDIA H100 80GB HBM3") is None
    assert blackwell.explain(TCGEN05_SOURCE, failure, "10.0", "NVIDIA B200") is None


def test_scaled_mm_submission_is_pointed_to_the_emulation():
    """The leaderboard's reference-style submission (torch._scaled_mm, no FP4 dtype named in the
    source) gets the one-line reason and the --emulate-blackwell way out."""
    from tests.conftest import ROOT

    source = (ROOT / "tests" / "blackwell" / "scaled_mm_fp4.py").read_text()
    reason = blackwell.explain(source, "raised RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling "
                               "cublasLtMatmul", "9.0", "NVIDIA H200")
    assert reason.startswith("uses torch._scaled_mm on FP4 operands (line ")
    assert "this GPU is sm_90 (NVIDIA H200)" in reason and "add --emulate-blackwell" in reason


def test_scans_ignore_comments():
    """A Blackwell feature named only in a Python comment or in a `//` / `/* */` comment of CUDA
    source in a string is not a use (the leaderboard's template_cute.py mentions _scaled_mm so)."""
    from eval.judge import blackwell

    commented = ('import torch\n# ref: torch._scaled_mm(a, b, sa, sb)\nSRC = """\n// cvt.rn.f16x2.e2m1x2\n'
                 '/* ld.global.v8.f32 {..} */\n__global__ void k() {}\n"""\n')
    assert blackwell.find(commented) is None
    used = commented + 'ASM = "cvt.rn.f16x2.e2m1x2 %0, %1;"\n'
    found = blackwell.find(used)
    assert found and found.what.startswith("the FP4 conversion") and found.line == 8


@pytest.mark.parametrize("source,what,line", [
    # the FP4 cvt is emulated, tcgen05 is not: the reason is tcgen05 (with or without the flag)
    ('A = "cvt.rn.f16x2.e2m1x2 %0, %1;"\nB = "tcgen05.mma.cta_group::1.kind::mxf4nvf4 [%0], %1, %2, %3;"\n',
     "tcgen05", 2),
    # CUTLASS C++ for SM100 is not the CuTe DSL
    ('SRC = r"""\n#include "cutlass/cutlass.h"\nusing ArchTag = cutlass::arch::Sm100;\n"""\n', "CUTLASS C++ SM100", 3),
    # a docstring saying SM100 is no DSL atom; the build target is what the file has
    ('def f():\n    """SM100 FP4 GEMV with tensor cores"""\nFLAGS = ["-gencode=arch=compute_100a,code=sm_100a"]\n',
     "an sm_100a / sm_103a build target", 3),
    ("from cutlass.cute.nvgpu import tcgen05\nab = cutlass.Float4E2M1FN\n", "CuTe DSL Blackwell atoms", 1),
    ('SRC = r"""\nauto mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;\n"""\n', "cuBLASLt's block-scaled", 2),
])
def test_the_feature_named_is_the_one_emulation_cannot_cover(source, what, line):
    found = blackwell.find(source)
    assert found and found.what.startswith(what) and found.line == line, found
    reason = blackwell.explain(source, "raised RuntimeError: Error building extension 'x'", "9.0", "H100")
    assert ("--emulate-blackwell" in reason) == found.emulated


def test_after_one_case_fails_for_want_of_blackwell_the_rest_are_not_run(monkeypatch, tmp_path):
    """A build for sm_100 only fails the same way on every case: one build, one line, not one per case."""
    from eval import cases
    from eval.judge import modes
    from eval.records import Environment

    source = tmp_path / "b200.py"
    source.write_text(CVT_SOURCE + "\ndef custom_kernel(data):\n    raise RuntimeError('no kernel image is available')\n")
    calls = []

    class FakeRunner:
        log_path = tmp_path / "log"

        def __init__(self):
            self.worker = type("W", (), {"import_s": 0.1, "info": {}})()

        def ensure(self):
            return {}

        def close(self):
            pass

    def call(runner, result):
        calls.append(result.label)
        raise modes.WorkerFailure("raised RuntimeError: CUDA error: no kernel image is available for execution")

    env = Environment(python="3", torch="2", host="h", cuda_available=True, gpu="NVIDIA H100 80GB HBM3",
                      capability="9.0")
    monkeypatch.setattr(modes, "describe_environment", lambda sandbox=None: env)
    chosen = cases.select_cases("tests")
    record = modes.run_each_case("test", source, chosen, modes.Options(log_dir=tmp_path), call, FakeRunner())
    assert len(calls) == 1 and len(record.cases) == len(chosen) and not record.passed
    assert "e2m1x2" in record.cases[0].error and record.cases[1].error.startswith("not run: ")


DSL_TCGEN05 = '''
import cutlass.cute as cute
from cutlass.cute.nvgpu import tcgen05

def custom_kernel(data):
    raise RuntimeError("expects arch to be one of [sm_100a], but got sm_90a")
'''


@pytest.mark.parametrize("error, cannot_run", [
    ("raised DSLUserCodeError: expects arch to be one of [sm_100a], but got sm_90a", True),
    ("raised RuntimeError: input on an unexpected device", True),
    ("mismatch found! custom implementation doesn't match reference", False),  # it ran: a verdict
])
def test_under_emulation_a_feature_it_does_not_cover_is_cannot_run(tmp_path, error, cannot_run):
    """--emulate-blackwell on a file built on CuTe DSL tcgen05 atoms (nvidia's GEMM series): the
    file cannot run on this GPU at all, as the leaderboard's own evaluator finds here; not a fail."""
    from eval.judge.cannot_run import explain_arch_failures
    from eval.records import CaseResult, Environment, RunRecord, Timing

    source = tmp_path / "dsl.py"
    source.write_text(DSL_TCGEN05)
    record = RunRecord(mode="test", submission=str(source), timing=Timing(emulated=["torch._scaled_mm"]),
                       environment=Environment(gpu="NVIDIA H200", cuda_available=True, capability="9.0"))
    case = CaseResult(spec="m: 1", label="m=1", args={"m": 1})
    case.fail(error)
    record.cases.append(case)
    explain_arch_failures(record)
    assert bool(record.cannot_run) == cannot_run, record
    if cannot_run:
        assert record.error.startswith("cannot run here: needs a Blackwell GPU (sm_100a) for CuTe DSL Blackwell atoms")
        assert "does not cover" in record.error and record.cases[0].error.startswith("under --emulate-blackwell: ")


def test_under_emulation_a_missing_cutlass_header_is_cannot_run_not_a_fail():
    """Found on a 2xH200 (.ci/emulate-check without .cutlass staged): tests/blackwell/cutlass_headers_fp4_cvt.py
    under --emulate-blackwell failed its build for want of cutlass/numeric_types.h, a header of the contest's
    image, and got "check: fail". The machine lacks it: "cannot run here", with how to stage it."""
    from eval.judge.cannot_run import explain_arch_failures, mark_cannot_run
    from eval.records import Environment, RunRecord, Timing

    path = ROOT / "tests" / "blackwell" / "cutlass_headers_fp4_cvt.py"
    record = RunRecord(mode="test", submission=str(path), timing=Timing(emulated=["torch._scaled_mm"]),
                       environment=Environment(gpu="NVIDIA H200", cuda_available=True, capability="9.0"))
    record.error = (f"could not load {path.name}: raised RuntimeError: build of 'b200_cutlass_headers_fp4_cvt' failed "
                    "(nvcc, emulated for sm_90a): it includes cutlass/numeric_types.h (line 18), which is not installed "
                    "here (a header of the contest's environment, not a Blackwell instruction); CUTLASS's headers: run "
                    ".ci/stage-cutlass.sh (stages them in .cutlass/, on every worker's include path)")
    record.passed = False
    mark_cannot_run(record)
    explain_arch_failures(record)
    assert record.cannot_run == "CUTLASS's C++ headers (.ci/stage-cutlass.sh stages them in .cutlass/)", record
    assert record.error == "cannot run here: needs " + record.cannot_run and not record.passed


def test_a_failed_build_of_a_file_that_guards_its_blackwell_code_is_its_own():
    """Found on a 2xH200 (#39's candidates): v5 with a CUDA syntax error, whose FP4 conversion is
    compiled only under __CUDA_ARCH__ >= 1000, was "cannot run here: needs a Blackwell GPU" (no
    verdict) instead of a failed build. A guarded file builds on Hopper, so its failed build is a
    failure, unless the compiler itself says the target lacks something."""
    source = (ROOT / "submission" / "v5.py").read_text().replace('KERNEL_SRC = r"""', 'KERNEL_SRC = r"""\nthis is not CUDA;\n', 1)
    assert blackwell.find(source) is not None and "this is not CUDA" in source
    built = "raised RuntimeError: Error building extension 'nvfp4_gemv_v5var09': [1/3] /usr/local/cuda/bin/nvcc -MD -MF cuda.cuda.o.d"
    assert blackwell.explain(source, built, "9.0", "NVIDIA H200") is None
    refused = built + "\nptxas error: Instruction 'cvt with .e2m1x2' not supported on .target 'sm_90a'"
    assert "run it on a B200" in blackwell.explain(source, refused, "9.0", "NVIDIA H200")
    unguarded = 'SRC = r"""\nasm("cvt.rn.satfinite.e2m1x2.f32 %0, %1, %2;");\n"""\n'
    assert blackwell.explain(unguarded, built, "9.0", "NVIDIA H200")  # an sm_100-only file: still explained
