"""--emulate-blackwell's stand-in for torch._scaled_mm on FP4: exact on the CPU against the problem's
exact reference, for the call the leaderboard's own reference submission makes."""
import pytest
import torch

import reference
from eval.worker import emulation


def to_blocked(matrix: torch.Tensor) -> torch.Tensor:
    """The leaderboard's swizzle of a [rows, cols] scale matrix (rows % 128 == 0, cols % 4 == 0)."""
    rows, cols = matrix.shape
    blocks = matrix.view(rows // 128, 128, cols // 4, 4).permute(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def test_unblock_inverts_the_leaderboards_swizzle():
    scales = torch.arange(256 * 8, dtype=torch.float32).reshape(256, 8)
    assert torch.equal(emulation.unblock_scales(to_blocked(scales), 256, 8), scales)


@pytest.mark.parametrize("m,k,l,dist", [(128, 256, 1, "leaderboard"), (256, 1536, 2, "stress")])
def test_scaled_mm_fp4_matches_the_exact_reference(m, k, l, dist):
    data = reference.generate_input(m=m, k=k, l=l, seed=7, dist=dist)
    a, b, sfa, sfb, _, _, c = data
    out = torch.empty_like(c)
    for i in range(l):  # as the leaderboard's reference submission calls it
        res = emulation.scaled_mm_fp4(a[:, :, i], b[:, :, i].transpose(0, 1), to_blocked(sfa[:, :, i]),
                                      to_blocked(sfb[:, :, i]), bias=None, out_dtype=torch.float16)
        out[:, 0, i] = res[:, 0]
    ok, message = reference.check_implementation(data, out)
    assert ok, message


def test_install_routes_only_fp4_operands():
    original = torch._scaled_mm
    try:
        assert emulation.install() and torch._scaled_mm is not original
        data = reference.generate_input(m=128, k=256, l=1, seed=1)
        a, b, sfa, sfb = data[0][:, :, 0], data[1][:, :, 0], data[2][:, :, 0], data[3][:, :, 0]
        res = torch._scaled_mm(a, b.transpose(0, 1), to_blocked(sfa), to_blocked(sfb), out_dtype=torch.float16)
        assert res.shape == (128, 128) and res.dtype == torch.float16
    finally:
        torch._scaled_mm = original


def test_a_b200_submission_passes_only_with_the_flag(tmp_path):
    """Without --emulate-blackwell the B200-style submission fails here (CPU: torch has no FP4
    _scaled_mm; a Hopper GPU: cuBLASLt refuses it, explained in one line); with it, it passes and
    every format says its times are emulated."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    sub = ROOT / "tests" / "blackwell" / "scaled_mm_fp4.py"
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "eval", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)

    plain = cli("test", str(sub), "--cases", "smoke")
    assert plain.returncode == 112 and "check: fail" in plain.stdout
    emulated = cli("test", str(sub), "--cases", "smoke", "--emulate-blackwell")
    assert emulated.returncode == 0 and "check: pass" in emulated.stdout, emulated.stdout[-2000:]
    assert "these times are emulated, not B200 times" in emulated.stdout
    for fmt in ("popcorn", "markdown", "json"):
        out = cli("test", str(sub), "--cases", "smoke", "--emulate-blackwell", "--format", fmt)
        assert "emulate" in out.stdout, fmt


def test_fp4_conversion_rewrite_is_exact_for_every_byte():
    """The PTX stand-in for cvt.rn.f16x2.e2m1x2: magnitude bits at fp16 bits 9..11 (and 25..27),
    signs at 15 and 31, times 2^14 in fp16 -- the same arithmetic, here in numpy-free torch."""
    from eval.worker import nvcc_emulate

    text = nvcc_emulate.rewrite_ptx("cvt.rn.f16x2.e2m1x2 %r1, q;")
    assert "e2m1x2" not in text and "mul.rn.f16x2 %r1" in text
    values = torch.tensor(emulation.FP4_VALUES)
    for byte in range(256):
        bits = ((byte & 7) << 9) | ((byte & 8) << 12) | ((byte & 112) << 21) | ((byte & 128) << 24)
        halves = torch.tensor([bits & 0xFFFF, bits >> 16], dtype=torch.int32).to(torch.int16).view(torch.float16)
        decoded = halves.float() * 2.0 ** 14
        expected = torch.stack((values[byte & 15], values[byte >> 4]))
        assert torch.equal(decoded, expected) and torch.equal(torch.signbit(decoded), torch.signbit(expected)), byte


def test_wide_loads_and_stores_split_in_two():
    from eval.worker import nvcc_emulate

    out = nvcc_emulate.rewrite_ptx("ld.global.nc.L2::256B.v8.b32 {%r3,%r4,%r5,%r6,%r7,%r8,%r9,%r10}, [%rd1+32];")
    assert out == ("ld.global.nc.v4.b32 {%r3, %r4, %r5, %r6}, [%rd1+32];\n\t"
                   "ld.global.nc.v4.b32 {%r7, %r8, %r9, %r10}, [%rd1+48];")
    out = nvcc_emulate.rewrite_ptx("st.global.v4.b64 [%rd2], {%rd3,%rd4,%rd5,%rd6};")
    assert out == "st.global.v2.b64 [%rd2], {%rd3, %rd4};\n\tst.global.v2.b64 [%rd2+16], {%rd5, %rd6};"
    untouched = "ld.global.nc.v4.b32 {%r1,%r2,%r3,%r4}, [%rd1];"
    assert nvcc_emulate.rewrite_ptx(untouched) == untouched
    assert nvcc_emulate.retarget(["-O3", "-gencode=arch=compute_100a,code=sm_100a"], "90a") == \
        ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]


def nvcc_build(folder, *args, emulate=False):
    """nvcc -c folder/k.cu, plain or through the stand-in exactly as the worker sets PYTORCH_NVCC, run
    from a folder where `eval` is not importable (ninja runs it from the extension's build folder)."""
    import shlex
    import subprocess

    from eval.worker import emulation

    head = shlex.split(emulation.nvcc_command("90a")) if emulate else ["nvcc"]
    return subprocess.run([*head, "-c", str(folder / "k.cu"), "-o", str(folder / "k.o"), *args],
                          cwd=folder, capture_output=True, text=True, timeout=300)


def test_b200_style_cuda_builds_for_hopper_only_through_the_rewrite(tmp_path):
    """tests/blackwell/cuda_fp4_cvt_v8.py's device code: builds for sm_100a, fails for sm_90a with
    plain nvcc (FP4 cvt, 256-bit loads), builds for sm_90a through eval/worker/nvcc_emulate.py."""
    import re
    import shutil

    from tests.conftest import ROOT

    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    source = (ROOT / "tests" / "blackwell" / "cuda_fp4_cvt_v8.py").read_text()
    cuda = re.search(r'CUDA_SRC = r"""(.*?)"""', source, re.S).group(1).split("void gemv(")[0]
    device = "\n".join(line for line in cuda.splitlines() if "torch/" not in line and "ATen/" not in line)
    (tmp_path / "k.cu").write_text(device)

    def build(*args, emulate=False):
        return nvcc_build(tmp_path, *args, emulate=emulate)

    assert build("-gencode=arch=compute_100a,code=sm_100a").returncode == 0
    plain = build("-gencode=arch=compute_90a,code=sm_90a")
    assert plain.returncode != 0 and "e2m1x2" in plain.stderr
    # as torch's ninja file calls it: with a dependency file (-MD -MF)
    emulated = build("-MD", "-MF", "k.o.d", "-gencode=arch=compute_100a,code=sm_100a", emulate=True)
    assert emulated.returncode == 0, emulated.stderr[-2000:]
    assert (tmp_path / "k.o").exists() and (tmp_path / "k.o.d").read_text().startswith(f"{tmp_path / 'k.o'}:")


PACKED_KERNEL = r"""
__global__ void k(const float2* x, const __half* h, float2* y, float* z) {
  unsigned long long a = *reinterpret_cast<const unsigned long long*>(x);
  unsigned long long b = *reinterpret_cast<const unsigned long long*>(x + 1);
  unsigned long long c, d;
  asm("fma.rn.f32x2 %0, %1, %2, %1;" : "=l"(c) : "l"(a), "l"(b));
  asm("add.rn.f32x2 %0, %1, %2;" : "=l"(d) : "l"(c), "l"(b));
  asm("mul.rn.f32x2 %0, %1, %0;" : "+l"(d) : "l"(a));
  *reinterpret_cast<unsigned long long*>(y) = d;
  float f;
  asm("fma.rn.f32.f16 %0, %1, %2, %3;" : "=f"(f) : "h"(*reinterpret_cast<const unsigned short*>(h)),
      "h"(*reinterpret_cast<const unsigned short*>(h + 1)), "f"(z[0]));
  z[1] = f;
}
"""


def test_packed_f32x2_and_mixed_fma_build_for_hopper_through_the_rewrite(tmp_path):
    """fma/add/mul.rn.f32x2 and fma.rn.f32.f16 (sm_100 only): plain nvcc builds them for sm_100a and
    refuses sm_90a; the stand-in rewrites them into per-half f32 operations that ptxas accepts for
    sm_90a (element-wise by definition: the same results)."""
    import shutil

    from eval.worker import nvcc_emulate

    rewritten = nvcc_emulate.rewrite_ptx("fma.rn.f32x2 %rd1, %rd2, %rd3, %rd4;")
    assert "f32x2" not in rewritten and rewritten.count("fma.rn.f32 ") == 2
    assert "cvt.f32.bf16" in nvcc_emulate.rewrite_ptx("fma.rn.f32.bf16 %f1, %rs1, %rs2, %f2;")
    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    (tmp_path / "k.cu").write_text("#include <cuda_fp16.h>\n" + PACKED_KERNEL)

    def build(*args, emulate=False):
        return nvcc_build(tmp_path, *args, emulate=emulate)

    assert build("-gencode=arch=compute_100a,code=sm_100a").returncode == 0
    plain = build("-gencode=arch=compute_90a,code=sm_90a")
    assert plain.returncode != 0 and "f32x2" in plain.stderr and "fma.f32.f16" in plain.stderr
    emulated = build("-gencode=arch=compute_100a,code=sm_100a", emulate=True)
    assert emulated.returncode == 0, emulated.stderr[-2000:]
