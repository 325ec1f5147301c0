"""--emulate-blackwell's stand-in for torch._scaled_mm on FP4: exact on the CPU against the problem's
exact reference, for the call the leaderboard's own reference submission makes; the PTX rewrites of
eval/worker/nvcc_emulate.py run by a small interpreter against models of each instruction (and the
models against the CUDA headers' own software conversions), ptxas on every rewritten form, target
flags in every spelling, the builds of tests/blackwell's submissions, Triton's ptxas hook, the forms
public B200 submissions use (a ptxas target of their own, L2 eviction priorities on 256-bit loads,
permuted scale views), the one-line reason of a build emulation cannot save, eval/emulate/extract.py."""
import re

import numpy as np
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


@pytest.mark.parametrize("name", ["scaled_mm_fp4", "scaled_mm_out_bias", "scaled_mm_permuted_views"])
def test_a_b200_submission_passes_only_with_the_flag(tmp_path, name):
    """Without --emulate-blackwell the B200-style submission fails here (CPU: torch has no FP4
    _scaled_mm; a Hopper GPU: cuBLASLt refuses it, explained in one line); with it, it passes and
    every format says its times are emulated (the second: out=, positional bias / scale_result,
    use_fast_accum, float32 out_dtype)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    sub = ROOT / "tests" / "blackwell" / f"{name}.py"
    env = {**os.environ, "EVAL_RESULTS_DIR": str(tmp_path)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "eval", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)

    plain = cli("test", str(sub), "--cases", "smoke")
    assert plain.returncode == 112 and "check: fail" in plain.stdout
    emulated = cli("test", str(sub), "--cases", "smoke", "--emulate-blackwell")
    assert emulated.returncode == 0 and "check: pass" in emulated.stdout, emulated.stdout[-2000:]
    assert "these times are emulated, not B200 times" in " ".join(emulated.stdout.split())
    # every other --format of the same run: the command prints report.render(record, fmt) of the record
    # it saved (eval/cli.py emit), so the saved record is rendered here instead of judging it three
    # more times (a judge, a worker and the emulated build each)
    from pathlib import Path

    from eval import report, results

    saved = Path(emulated.stderr.split("result: ", 1)[1].split()[0])
    record = results.load_record(saved if saved.is_absolute() else ROOT / saved)
    assert record.passed and "these times are emulated, not B200 times" in " ".join(report.render(record).split())
    for fmt in ("popcorn", "markdown", "json"):
        assert "emulate" in report.render(record, fmt), fmt


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


WIDE_FORMS = ["ld.global.nc.L1::no_allocate.v8.b32 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd0+32];",
              "ld.global.nc.L2::256B.v8.f32 {%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7}, [%rd0+-64];",
              "ld.global.L1::evict_last.L2::cache_hint.v8.u32 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd0], %rd1;",
              "ld.global.v4.b64 {%rd2, %rd3, %rd4, %rd5}, [%rd0];", "ld.global.nc.v4.f64 {%fd0, %fd1, %fd2, %fd3}, [%rd0+96];",
              "st.global.v8.f32 [%rd0+-32], {%f0, %f1, %f2, %f3, %f4, %f5, %f6, %f7};",
              "st.global.L1::no_allocate.v4.u64 [%rd0+64], {%rd2, %rd3, %rd4, %rd5};",
              # L2 eviction priorities, which ptxas takes on 256-bit accesses only (contestants' streaming loads)
              "ld.global.L1::no_allocate.L2::evict_first.v8.b32 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd0];",
              "ld.global.L1::evict_last.L2::evict_last.v8.b32 {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd0+32];",
              "ld.global.nc.L2::evict_first.v4.b64 {%rd2, %rd3, %rd4, %rd5}, [%rd0];"]
WIDE_HEAD = """.version 8.8
.target {target}
.address_size 64
.visible .entry k(.param .u64 p) {{
  .reg .b32 %r<8>; .reg .f32 %f<8>; .reg .b64 %rd<6>; .reg .f64 %fd<4>;
  ld.param.u64 %rd0, [p];
  add.u64 %rd0, %rd0, 128;
  createpolicy.fractional.L2::evict_last.b64 %rd1, 1.0;
{body}
  ret;
}}
"""


@pytest.mark.parametrize("form", WIDE_FORMS)
def test_every_256_bit_form_assembles_for_hopper_only_split(form, tmp_path):
    """.v8 of 32-bit and .v4 of 64-bit elements, loads and stores, with cache qualifiers, a cache-hint
    operand and negative offsets: sm_100a takes them as written, sm_90a only split in two halves at
    +0 and +16 of the same address."""
    import shutil
    import subprocess

    from eval.worker import nvcc_emulate

    if not shutil.which("ptxas"):
        pytest.skip("ptxas (CUDA toolkit) not installed")

    def ptxas(target, body):
        (tmp_path / "k.ptx").write_text(WIDE_HEAD.format(target=target, body=body))
        return subprocess.run(["ptxas", f"-arch={target}", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.o")],
                              capture_output=True, text=True)

    split = nvcc_emulate.rewrite_ptx(form)
    assert split.count(";") == 2 and ".v8." not in split and "L2::256B" not in split and "L2::evict" not in split
    assert ptxas("sm_100a", form).returncode == 0
    assert ptxas("sm_90a", form).returncode != 0
    done = ptxas("sm_90a", split)
    assert done.returncode == 0, done.stderr[-1000:]


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


# ---------------------------------------------------------------------------------------------
# The sm_100-only cvt forms: the rewritten PTX itself, run on the CPU by a small interpreter of the
# instructions the rewrite emits, for every input (every byte, every 16-bit word, a dense f32
# sample with every exponent, sign and leading-mantissa pattern, ties and edge cases), against a
# model of each conversion written from its definition, not from the rewrite's arithmetic.


M32 = 0xFFFFFFFF


def run_ptx(block: str, inputs: dict) -> dict:
    """Execute a rewritten block (b32/b16/b8/f32 registers as bit patterns, numpy arrays) and return
    every register. Knows only the instructions nvcc_emulate emits."""
    regs = {k: np.asarray(v, dtype=np.uint64) for k, v in inputs.items()}

    def val(x):
        x = x.strip()
        if x in regs:
            return regs[x]
        if x.startswith("0f"):
            return np.uint64(int(x[2:], 16))
        return np.uint64(int(x, 0) & M32)

    def signed(x):
        return np.asarray(x, dtype=np.uint64).astype(np.int64) - ((np.asarray(x, dtype=np.int64) >> 31) & 1) * (1 << 32)

    def shift(x, n, left):
        n = np.minimum(np.asarray(n, dtype=np.uint64), 32)
        out = (x << np.minimum(n, 31)) if left else (x >> np.minimum(n, 31))
        return np.where(n >= 32, 0, out & M32).astype(np.uint64)

    for line in block.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        if rest.startswith("{"):  # mov.b32 {lo, hi}, word
            names, word = rest[1:].split("}")
            lo, hi = [n.strip() for n in names.split(",")]
            w = val(word.strip(", "))
            regs[lo], regs[hi] = w & 0xFFFF, (w >> 16) & 0xFFFF
            continue
        d, *a = [x.strip() for x in rest.split(",")]
        v = [val(x) for x in a]
        if op == "mov.b32":
            r = v[0] & M32
        elif op.startswith("cvt.u32.u") or op.startswith("cvt.u") and op.endswith(".u32"):
            r = v[0] & (0xFF if ".u8" in op else 0xFFFF)
        elif op == "cvt.f32.f16":
            r = np.asarray(v[0], dtype=np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
        elif op in ("and.b32", "or.b32"):
            r = (v[0] & v[1]) if op[0] == "a" else (v[0] | v[1])
        elif op in ("shl.b32", "shr.u32"):
            r = shift(np.asarray(v[0], dtype=np.uint64), v[1], op == "shl.b32")
        elif op in ("add.u32", "sub.u32", "sub.s32"):
            r = (v[0] + v[1] if op[0] == "a" else v[0] + (1 << 32) - v[1]) & M32
        elif op in ("max.u32", "min.u32"):
            r = np.maximum(v[0], v[1]) if op[1] == "a" else np.minimum(v[0], v[1])
        elif op == "max.s32":
            r = np.where(signed(v[0]) >= signed(v[1]), v[0], v[1])
        elif op.startswith("setp."):
            cmp = {"ne": np.not_equal, "eq": np.equal, "gt": np.greater, "ge": np.greater_equal,
                   "le": np.less_equal}[op.split(".")[1]]
            r = cmp(v[0], v[1])
        elif op == "selp.b32":
            r = np.where(regs[a[2]], v[0], v[1])
        elif op == "mul.rn.f16x2":
            halves = [(np.asarray(x, dtype=np.uint64) >> s & 0xFFFF).astype(np.uint16).view(np.float16)
                      for x in v for s in (0, 16)]
            lo, hi = (halves[0] * halves[2]).view(np.uint16), (halves[1] * halves[3]).view(np.uint16)
            r = lo.astype(np.uint64) | (hi.astype(np.uint64) << 16)
        else:
            raise AssertionError(f"the interpreter does not know {op}")
        regs[d] = np.asarray(r, dtype=bool) if op.startswith("setp.") else np.asarray(r, dtype=np.uint64) & M32
    return regs


def rewritten(form: str, d: str, *sources: str) -> str:
    from eval.worker import nvcc_emulate

    text = nvcc_emulate.rewrite_ptx(f"{form} {d}, {', '.join(sources)};")
    assert "x2." not in text.replace("f16x2", "").replace(".u32", "") and text.startswith("{"), text
    return text


# definitions: small formats (sign, exponent, mantissa, bias; all-ones magnitude is the largest, no Inf/NaN)
FORMATS = {"e2m1x2": (2, 1, 1), "e2m3x2": (2, 3, 1), "e3m2x2": (3, 2, 3)}


def small_value(code: int, fmt: str) -> float:
    exp, man, bias = FORMATS[fmt]
    sign = -1.0 if code >> (exp + man) & 1 else 1.0
    e, m = code >> man & ((1 << exp) - 1), code & ((1 << man) - 1)
    return sign * (m / (1 << man) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << man)) * 2.0 ** (e - bias))


def f16_bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).astype(np.float16).view(np.uint16).astype(np.uint64)


def model_decode_small(codes, fmt: str, relu: bool) -> np.ndarray:
    exp, man, _ = FORMATS[fmt]
    values = np.array([small_value(int(c) & ((2 << (exp + man)) - 1), fmt) for c in codes])
    signed_ = np.array([(int(c) >> (exp + man)) & 1 for c in codes], dtype=bool)
    return f16_bits(np.where(relu & signed_, 0.0, values))


@np.errstate(all="ignore")  # NaN/Inf inputs on purpose
def model_encode_small(x: np.ndarray, fmt: str, relu: bool) -> np.ndarray:
    """f32 values -> codes: nearest representable, ties to the even code, beyond the largest (Inf
    too) the largest with the sign kept, NaN the positive largest; relu: negative -> +0."""
    exp, man, _ = FORMATS[fmt]
    top = (1 << (exp + man)) - 1
    grid = np.array([small_value(c, fmt) for c in range(top + 1)])
    mag = np.abs(x.astype(np.float64))
    hi = np.clip(np.searchsorted(grid, mag), 1, top)
    lo = hi - 1
    d_lo, d_hi = mag - grid[lo], grid[hi] - mag
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    code = np.where(mag >= grid[top], top, code)
    negative = np.signbit(x)
    code = np.where(negative, 0 if relu else code | (top + 1), code)
    return np.where(np.isnan(x), top, code).astype(np.uint64)


def f32_sample() -> np.ndarray:
    """Every sign/exponent/leading-mantissa pattern (all 65536 upper halves) with low halves that make
    exact ties, just above and below them, and full sticky bits."""
    upper = np.arange(1 << 16, dtype=np.uint64) << 16
    low = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], dtype=np.uint64)
    return (upper[:, None] | low[None, :]).ravel()


def as_f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("relu", [False, True])
def test_cvt_f16x2_from_fp4_fp6_is_exact_for_every_input(fmt, relu):
    """cvt.rn{.relu}.f16x2.e2m1x2 (all 256 bytes) and .e2m3x2 / .e3m2x2 (all 65536 words): high
    code -> high half, exact decode; .relu: sign set -> +0."""
    width, count, src = (4, 256, "%q") if fmt == "e2m1x2" else (8, 1 << 16, "%h")
    form = f"cvt.rn{'.relu' if relu else ''}.f16x2.{fmt}"
    words = np.arange(count, dtype=np.uint64)
    out = run_ptx(rewritten(form, "%d", src), {src: words})["%d"]
    mask = (1 << width) - 1
    expected = model_decode_small(words & mask, fmt, relu) | (model_decode_small(words >> width & mask, fmt, relu) << 16)
    assert np.array_equal(out, expected)


@np.errstate(all="ignore")  # NaN/Inf inputs on purpose
def test_cvt_bf16x2_from_ue8m0x2_is_exact_for_every_word():
    words = np.arange(1 << 16, dtype=np.uint64)
    out = run_ptx(rewritten("cvt.rn.bf16x2.ue8m0x2", "%d", "%h"), {"%h": words})["%d"]

    def bf16(e):  # 2^(e-127) (exact in f32, then its top 16 bits), 0xFF NaN -> canonical 0x7FFF
        return np.where(e == 0xFF, 0x7FFF, (np.ldexp(1.0, e.astype(np.int64) - 127).astype(np.float32).view(np.uint32)
                                            >> 16).astype(np.uint64))
    assert np.array_equal(out, bf16(words & 0xFF) | (bf16(words >> 8) << 16))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("relu", [False, True])
def test_cvt_fp4_fp6_from_f32_pairs_rounds_as_defined(fmt, relu):
    """cvt.rn.satfinite{.relu}.{e2m1x2,e2m3x2,e3m2x2}.f32 d, a, b (a -> high code) over the dense f32
    sample, and .e2m1x2.f16x2 over every f16 pair half."""
    width = 4 if fmt == "e2m1x2" else 8
    form = f"cvt.rn.satfinite{'.relu' if relu else ''}.{fmt}.f32"
    a = f32_sample()
    b = a[::-1].copy()
    out = run_ptx(rewritten(form, "%d", "%fa", "%fb"), {"%fa": a, "%fb": b})["%d"]
    expected = model_encode_small(as_f32(b), fmt, relu) | (model_encode_small(as_f32(a), fmt, relu) << width)
    assert np.array_equal(out, expected)
    if fmt == "e2m1x2":
        halves = np.arange(1 << 16, dtype=np.uint64)
        words = halves | (halves[::-1] << 16)
        form = f"cvt.rn.satfinite{'.relu' if relu else ''}.e2m1x2.f16x2"
        out = run_ptx(rewritten(form, "%d", "%r"), {"%r": words})["%d"]
        as_f16 = lambda h: h.astype(np.uint16).view(np.float16).astype(np.float32)  # noqa: E731
        expected = model_encode_small(as_f16(halves), fmt, relu) | (model_encode_small(as_f16(halves[::-1]), fmt, relu) << 4)
        assert np.array_equal(out, expected)


@np.errstate(all="ignore")  # NaN/Inf inputs on purpose
def model_ue8m0(x: np.ndarray, up: bool, sat: bool) -> np.ndarray:
    """f32 values -> UE8M0 (2^(code-127), 0xFF NaN): the exponent of |x| rounded toward zero (.rz) or
    up (.rp), at least 2^-127 (zero included); above 2^127 (Inf too) NaN, or 2^127 with .satfinite;
    NaN stays NaN."""
    mag = np.abs(x.astype(np.float64))
    m, e = np.frexp(np.where(np.isfinite(mag) & (mag > 0), mag, 1.0))
    log2 = np.where(m == 0.5, e - 1, e if up else e - 1)
    code = np.where(mag > 0, np.clip(log2 + 127, 0, 255), 0)
    code = np.where(np.isinf(mag), 255, code)
    code = np.where(sat & (code == 255), 254, code)
    return np.where(np.isnan(x), 255, code).astype(np.uint64)


@pytest.mark.parametrize("up", [False, True])
@pytest.mark.parametrize("sat", [False, True])
def test_cvt_ue8m0x2_from_f32_and_bf16x2_rounds_as_defined(up, sat):
    """cvt.{rz,rp}{.satfinite}.ue8m0x2.f32 d, a, b over the dense f32 sample and .ue8m0x2.bf16x2
    over every bf16 (each with its mirror in the other half)."""
    mods = ".rp" if up else ".rz"
    mods += ".satfinite" if sat else ""
    a = f32_sample()
    b = a[::-1].copy()
    out = run_ptx(rewritten(f"cvt{mods}.ue8m0x2.f32", "%d", "%fa", "%fb"), {"%fa": a, "%fb": b})["%d"]
    assert np.array_equal(out, model_ue8m0(as_f32(b), up, sat) | (model_ue8m0(as_f32(a), up, sat) << 8))
    halves = np.arange(1 << 16, dtype=np.uint64)
    words = halves | (halves[::-1] << 16)
    out = run_ptx(rewritten(f"cvt{mods}.ue8m0x2.bf16x2", "%d", "%r"), {"%r": words})["%d"]
    bf = lambda h: as_f32(h << 16)  # noqa: E731
    assert np.array_equal(out, model_ue8m0(bf(halves), up, sat) | (model_ue8m0(bf(halves[::-1]), up, sat) << 8))


HEADER_FALLBACKS = r"""
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <vector>
// the CUDA headers' own host (software) paths of the conversions, one value per 32-bit word on stdin
int main(int argc, char** argv) {
  const char* mode = argv[1];
  std::vector<uint32_t> in;
  uint32_t v;
  while (fread(&v, 4, 1, stdin) == 1) in.push_back(v);
  for (uint32_t x : in) {
    float f; memcpy(&f, &x, 4);
    __nv_bfloat16_raw b; b.x = (unsigned short)x;
    uint32_t r = 0;
    if (!strcmp(mode, "e2m1x2")) r = __nv_cvt_float_to_fp4(f, __NV_E2M1, cudaRoundNearest);
    else if (!strcmp(mode, "e2m3x2")) r = __nv_cvt_float_to_fp6(f, __NV_E2M3, cudaRoundNearest);
    else if (!strcmp(mode, "e3m2x2")) r = __nv_cvt_float_to_fp6(f, __NV_E3M2, cudaRoundNearest);
    else if (!strncmp(mode, "ue8m0", 5)) {
      const __nv_saturation_t s = strstr(mode, "sat") ? __NV_SATFINITE : __NV_NOSAT;
      const cudaRoundMode m = strstr(mode, "rp") ? cudaRoundPosInf : cudaRoundZero;
      r = strstr(mode, "bf16") ? __nv_cvt_bfloat16raw_to_e8m0(b, s, m) : __nv_cvt_float_to_e8m0(f, s, m);
    }
    else if (!strcmp(mode, "dec_e2m1x2")) r = __nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)x, __NV_E2M1).x;
    else if (!strcmp(mode, "dec_e2m3x2")) r = __nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)x, __NV_E2M3).x;
    else if (!strcmp(mode, "dec_e3m2x2")) r = __nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)x, __NV_E3M2).x;
    else if (!strcmp(mode, "dec_ue8m0x2")) r = __nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)x).x;
    fwrite(&r, 4, 1, stdout);
  }
}
"""


@pytest.fixture(scope="module")
def header_fallbacks(tmp_path_factory):
    """NVIDIA's software definition of the same conversions (cuda_fp4/6/8.hpp, host side), built
    with nvcc and run on the CPU."""
    import shutil
    import subprocess

    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    folder = tmp_path_factory.mktemp("fallbacks")
    (folder / "h.cu").write_text(HEADER_FALLBACKS)
    subprocess.run(["nvcc", "-O1", "h.cu", "-o", "h"], cwd=folder, check=True, capture_output=True, timeout=300)

    def run(mode, values):
        out = subprocess.run([str(folder / "h"), mode], input=np.asarray(values, dtype=np.uint32).tobytes(),
                             capture_output=True, check=True).stdout
        return np.frombuffer(out, dtype=np.uint32).astype(np.uint64)
    return run


@np.errstate(all="ignore")  # NaN/Inf inputs on purpose
def test_the_models_agree_with_the_cuda_headers_software_conversions(header_fallbacks):
    """The models the rewrite is checked against, against NVIDIA's own software conversions (no .relu
    there): every code decoded, the dense f32 sample and every bf16 encoded."""
    x = f32_sample()
    for fmt, bits in (("e2m1x2", 4), ("e2m3x2", 6), ("e3m2x2", 6)):
        codes = np.arange(1 << bits, dtype=np.uint64)
        assert np.array_equal(header_fallbacks("dec_" + fmt, codes), model_decode_small(codes, fmt, False)), fmt
        assert np.array_equal(header_fallbacks(fmt, x), model_encode_small(as_f32(x), fmt, False)), fmt
    codes = np.arange(256, dtype=np.uint64)
    expected = np.where(codes == 0xFF, 0x7FFF, (np.ldexp(1.0, codes.astype(np.int64) - 127).astype(np.float32)
                                               .view(np.uint32) >> 16).astype(np.uint64))
    assert np.array_equal(header_fallbacks("dec_ue8m0x2", codes), expected)
    bf16 = np.arange(1 << 16, dtype=np.uint64)
    for up in (False, True):
        for sat in (False, True):
            mode = f"ue8m0{'_rp' if up else '_rz'}{'_sat' if sat else ''}"
            assert np.array_equal(header_fallbacks(mode, x), model_ue8m0(as_f32(x), up, sat)), mode
            assert np.array_equal(header_fallbacks(mode + "_bf16", bf16), model_ue8m0(as_f32(bf16 << 16), up, sat)), mode


CVT_FORMS = ["cvt.rn.f16x2.e2m1x2 %r1, %q0;", "cvt.rn.relu.f16x2.e2m1x2 %r1, %q0;", "cvt.rn.f16x2.e2m3x2 %r1, %h0;",
             "cvt.rn.relu.f16x2.e3m2x2 %r1, %h0;", "cvt.rn.bf16x2.ue8m0x2 %r1, %h0;",
             "cvt.rn.satfinite.e2m1x2.f32 %q1, %f0, %f1;", "cvt.rn.satfinite.relu.e2m1x2.f32 %q1, %f0, 0f3F800000;",
             "cvt.rn.satfinite.e2m3x2.f32 %h1, %f0, %f1;", "cvt.rn.satfinite.relu.e3m2x2.f32 %h1, %f0, %f1;",
             "cvt.rn.satfinite.e2m1x2.f16x2 %q1, %r0;", "cvt.rn.satfinite.relu.e2m1x2.f16x2 %q1, %r0;",
             "cvt.rz.satfinite.ue8m0x2.f32 %h1, %f0, %f1;", "cvt.rp.ue8m0x2.f32 %h1, %f0, %f1;",
             "cvt.rz.ue8m0x2.bf16x2 %h1, %r0;", "cvt.rp.satfinite.ue8m0x2.bf16x2 %h1, %r0;"]
PTX_HEAD = """.version 8.8
.target {target}
.address_size 64
.visible .entry k(.param .u64 p) {{
  .reg .b8 %q<2>; .reg .b16 %h<2>; .reg .b32 %r<2>; .reg .f32 %f<2>; .reg .b64 %rd<1>;
  ld.param.u64 %rd0, [p];
  ld.global.u32 %r0, [%rd0]; ld.global.f32 %f0, [%rd0+4]; ld.global.f32 %f1, [%rd0+8]; ld.global.u16 %h0, [%rd0+12];
  cvt.u8.u32 %q0, %r0;
{body}
  cvt.u32.u8 %r0, %q1; st.global.u32 [%rd0], %r1; st.global.u16 [%rd0+4], %h1; st.global.u32 [%rd0+8], %r0;
  ret;
}}
"""


@pytest.mark.parametrize("form", CVT_FORMS)
def test_every_blackwell_cvt_form_assembles_for_hopper_only_rewritten(form, tmp_path):
    """ptxas: the form as written builds for sm_100a and is refused for sm_90a; rewritten, sm_90a
    accepts it. The FP8 e4m3x2/e5m2x2 forms exist since sm_89 and are not rewritten."""
    import shutil
    import subprocess

    from eval.worker import nvcc_emulate

    if not shutil.which("ptxas"):
        pytest.skip("ptxas (CUDA toolkit) not installed")

    def ptxas(target, body):
        (tmp_path / "k.ptx").write_text(PTX_HEAD.format(target=target, body=body))
        return subprocess.run(["ptxas", f"-arch={target}", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.o")],
                              capture_output=True, text=True)

    assert ptxas("sm_100a", form).returncode == 0
    assert ptxas("sm_90a", form).returncode != 0
    done = ptxas("sm_90a", nvcc_emulate.rewrite_ptx(form))
    assert done.returncode == 0, done.stderr[-1000:]
    for sm89 in ("cvt.rn.f16x2.e4m3x2 %r1, %h0;", "cvt.rn.satfinite.e5m2x2.f32 %h1, %f0, %f1;"):
        assert nvcc_emulate.rewrite_ptx(sm89) == sm89


# ---------------------------------------------------------------------------------------------
# torch._scaled_mm's whole signature on block-scaled operands, against a straightforward decode (values
# chosen so that every float32 sum is exact in any order: the results must be equal, not close)

def plain_scales(codes: torch.Tensor, dtype) -> torch.Tensor:
    return codes.view(dtype) if codes.dtype == torch.uint8 else codes.to(dtype)


def straightforward(values_a, scales_a, values_b, scales_b, block):
    """sum_k a[i,k] * sa[i,k//block] * b[j,k] * sb[j,k//block], in float64, one element at a time per row."""
    sa = scales_a.double().repeat_interleave(block, dim=1)
    sb = scales_b.double().repeat_interleave(block, dim=1)
    return (values_a.double() * sa) @ (values_b.double() * sb).t()


def fp4_operand(rows, k, gen):
    codes = torch.randint(0, 16, (rows, k), generator=gen, dtype=torch.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).contiguous()
    return packed.view(torch.float4_e2m1fn_x2), torch.tensor(emulation.FP4_VALUES)[codes.long()]


def scales(rows, cols, kind, gen):
    if kind == "e4m3":  # 0.25 .. 3, exact products
        choice = torch.tensor([0.25, 0.5, 1.0, 1.5, 2.0, 3.0])
        return choice[torch.randint(0, 6, (rows, cols), generator=gen)].to(torch.float8_e4m3fn)
    exps = torch.randint(127 - 2, 127 + 3, (rows, cols), generator=gen, dtype=torch.uint8)  # 2^-2 .. 2^2
    return exps.view(torch.float8_e8m0fnu)


@pytest.mark.parametrize("operands,scale_kind,block", [("fp4", "e4m3", 16), ("fp4", "e8m0", 32), ("fp8", "e8m0", 32)])
@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_scaled_mm_whole_signature_is_exact(operands, scale_kind, block, out_dtype):
    """NVFP4, MXFP4 and MXFP8 (e4m3 with e8m0 per 32) through the installed stand-in: positional and
    keyword bias, out_dtype, use_fast_accum, out= (returned, filled), exactly the decoded product."""
    gen = torch.Generator().manual_seed(3)
    m, n, k = 128, 256, 512
    if operands == "fp4":
        a, va = fp4_operand(m, k, gen)
        b, vb = fp4_operand(n, k, gen)
    else:
        va = torch.randint(-8, 9, (m, k), generator=gen).float()
        vb = torch.randint(-8, 9, (n, k), generator=gen).float()
        a, b = va.to(torch.float8_e4m3fn), vb.to(torch.float8_e4m3fn)
    sa, sb = scales(m, k // block, scale_kind, gen), scales(n, k // block, scale_kind, gen)
    bias = torch.randint(-64, 64, (n,), generator=gen).to(torch.bfloat16)
    expected = straightforward(va, sa.float(), vb, sb.float(), block)
    original = torch._scaled_mm
    try:
        emulation.install()
        got = torch._scaled_mm(a, b.t(), to_blocked(sa), to_blocked(sb), out_dtype=out_dtype)
        assert got.dtype == out_dtype and torch.equal(got, expected.to(out_dtype))
        out = torch.empty(m, n, dtype=out_dtype)
        got = torch._scaled_mm(a, b.t(), to_blocked(sa), to_blocked(sb), bias, None, out_dtype, True, out=out)
        assert got is out and torch.equal(out, (expected + bias.double()).to(out_dtype))
        got = torch._scaled_mm(a, b.t(), to_blocked(sa), to_blocked(sb), bias=bias, out_dtype=out_dtype,
                               use_fast_accum=False)
        assert torch.equal(got, (expected + bias.double()).to(out_dtype))
    finally:
        torch._scaled_mm = original


def test_scaled_mm_routes_only_block_scaled_operands():
    """Tensor-wise FP8 (float32 scales) and plain types reach torch's own _scaled_mm; FP4, and FP8
    with e8m0 block scales, the stand-in."""
    calls = []
    original = torch._scaled_mm
    torch._scaled_mm = lambda *args, **kwargs: calls.append(args) or "torch"
    try:
        emulation.install()
        a = torch.zeros(128, 64).to(torch.float8_e4m3fn)
        one = torch.ones(())
        assert torch._scaled_mm(a, a.t(), one, one, out_dtype=torch.bfloat16) == "torch"
        e8m0 = torch.full((128 * 4,), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)
        assert torch._scaled_mm(a, a.t(), e8m0, e8m0, out_dtype=torch.bfloat16).shape == (128, 128)
        assert len(calls) == 1
    finally:
        torch._scaled_mm = original


# ---------------------------------------------------------------------------------------------
# Target flags as contestants write them, and the builds of tests/blackwell's CUDA submissions

HOPPER = "-gencode=arch=compute_90a,code=sm_90a"


@pytest.mark.parametrize("flags", [
    ["-gencode=arch=compute_100a,code=sm_100a", "-gencode=arch=compute_120a,code=sm_120a"],
    ["-gencode", "arch=compute_100a,code=sm_100a", "-gencode", "arch=compute_90a,code=sm_90a"],
    ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_100f,code=sm_100f",
     "--generate-code=arch=compute_121a,code=[compute_121a,sm_121a]", "-gencode=arch=compute_103a,code=sm_103a"],
    ["-arch=sm_100a"], ["-arch", "sm_100a"], ["--gpu-architecture=compute_100a", "--gpu-code=sm_100a"],
    ["--gpu-architecture", "compute_100a", "-code", "sm_100a,compute_100a"], ["-arch=sm_120a", "-code=sm_120a"],
    [],
])
def test_every_spelling_of_the_target_becomes_this_gpu_once(flags):
    from eval.worker import nvcc_emulate

    args = ["-O3", *flags, "--use_fast_math", "-c", "k.cu"]
    assert nvcc_emulate.retarget(args, "90a") == ["-O3", "--use_fast_math", "-c", "k.cu", HOPPER]


@pytest.mark.parametrize("arch_list", ["10.0a", "10.0;12.0", "10.0a;12.0a+PTX", "9.0;10.0a", "10.3a"])
def test_torch_cuda_arch_list_set_by_the_submission_is_retargeted(arch_list, monkeypatch):
    """TORCH_CUDA_ARCH_LIST set in os.environ before load_inline: torch turns it into -gencode flags
    (which reach the stand-in with the rest of nvcc's arguments); they become this GPU's alone. A
    submission that gives its own target flag gets none of torch's."""
    from torch.utils import cpp_extension

    from eval.worker import nvcc_emulate

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch_list)
    torch_flags = cpp_extension._get_cuda_arch_flags(["-O3"])
    assert torch_flags and any("compute_10" in f or "compute_12" in f for f in torch_flags)
    assert nvcc_emulate.retarget(["-O3", *torch_flags], "90a") == ["-O3", HOPPER]
    assert cpp_extension._get_cuda_arch_flags(["-O3", "-arch=sm_100a"]) == []


def blackwell_files(kind: str) -> list:
    from tests.conftest import ROOT

    folder = ROOT / "tests" / "blackwell"
    if kind == "cuda":
        return sorted(p for p in folder.glob("cuda_*.py") if 'KERNELS = r"""' in p.read_text())
    return sorted(folder.glob(f"{kind}_*.py"))


def submission_flags(source: str) -> list[str]:
    """The nvcc target flags a submission's load_inline ends up with: its extra_cuda_cflags, or torch's
    own from the TORCH_CUDA_ARCH_LIST it sets."""
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg == "extra_cuda_cflags":
            flags = ast.literal_eval(node.value)
            if any("arch" in f for f in flags):
                return flags
    listed = re.search(r'os\.environ\["TORCH_CUDA_ARCH_LIST"\] = "([^"]+)"', source).group(1)
    arch = listed.replace(".", "").split(";")[0]
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]



@pytest.mark.parametrize("path", blackwell_files("cuda"), ids=lambda p: p.stem)
def test_b200_style_submissions_build_for_b200_and_for_hopper_only_through_the_stand_in(path, tmp_path):
    """Each CUDA submission's device code (its KERNELS string) with its own target flags: plain nvcc
    builds it for every Blackwell target it names (the meaning -arch=sm_100a had before CUDA 13),
    refuses sm_90a, and the stand-in, given the same flags, builds it for sm_90a."""
    import shutil

    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    source = path.read_text()
    (tmp_path / "k.cu").write_text(re.search(r'KERNELS = r"""(.*?)"""', source, re.S).group(1))
    flags = submission_flags(source)
    targets = sorted(set(re.findall(r"sm_1[0-2]\da", " ".join(flags)))) or ["sm_100a"]
    for target in targets:
        plain = nvcc_build(tmp_path, f"-gencode=arch=compute_{target[3:]},code={target}")
        assert plain.returncode == 0, (target, plain.stderr[-1500:])
    assert nvcc_build(tmp_path, HOPPER).returncode != 0
    emulated = nvcc_build(tmp_path, "-O3", *flags, emulate=True)
    assert emulated.returncode == 0, emulated.stderr[-2000:]


# ---------------------------------------------------------------------------------------------
# Triton: its ptxas goes through the same rewrite; -lcuda links

def clear_env(monkeypatch, *keys):
    """Unset keys for this test only (setenv first: monkeypatch restores only what it saw set)."""
    for key in keys:
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)


def test_triton_ptxas_hook_rewrites_and_runs_the_real_ptxas(tmp_path, monkeypatch):
    """install points TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH at executable stand-ins and moves
    Triton's cache; called as Triton calls ptxas, a stand-in assembles PTX with an FP4 cvt for sm_90a
    (the real ptxas refuses it) and leaves Triton's file as it was."""
    import os
    import shutil
    import subprocess

    from eval.worker import emulation

    clear_env(monkeypatch, "TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_CACHE_DIR")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "TRITON_PTXAS_PATH" in emulation._install_triton()
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / ".triton" / "cache-emulated-blackwell")
    for key in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH"):
        assert os.access(os.environ[key], os.X_OK)
    assert emulation.real_ptxas("ptxas", os.environ["TRITON_PTXAS_PATH"]) != os.environ["TRITON_PTXAS_PATH"]
    real = shutil.which("ptxas")
    if not real:
        pytest.skip("ptxas (CUDA toolkit) not installed")
    assert emulation.real_ptxas("ptxas", real) == real
    ptx = tmp_path / "kernel.ptx"
    ptx.write_text(PTX_HEAD.format(target="sm_90a", body="cvt.rn.f16x2.e2m1x2 %r1, %q0;"))
    before = ptx.read_text()
    call = ["-lineinfo", "-v", "--gpu-name=sm_90a", str(ptx), "-o", str(tmp_path / "kernel.o")]
    assert subprocess.run([real, *call], capture_output=True).returncode != 0
    hooked = subprocess.run([os.environ["TRITON_PTXAS_PATH"], *call], capture_output=True, text=True)
    assert hooked.returncode == 0, hooked.stderr[-1000:]
    assert ptx.read_text() == before and (tmp_path / "kernel.o").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".ptx") == ["kernel.ptx"]
    version = subprocess.run([os.environ["TRITON_PTXAS_BLACKWELL_PATH"], "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "release" in version.stdout


def test_triton_submission_compiles_for_hopper_only_through_the_hook(tmp_path, monkeypatch):
    """tests/blackwell/triton_inline_asm_cvt.py's kernel, compiled by Triton for sm_90a without a GPU:
    Triton's ptxas refuses the inline cvt.rn.f16x2.e2m1x2; with the hook installed it builds."""
    triton = pytest.importorskip("triton")
    import importlib.util

    from triton.backends.compiler import GPUTarget

    from eval.worker import emulation
    from tests.conftest import ROOT

    clear_env(monkeypatch, "TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.syspath_prepend(str(ROOT))
    spec = importlib.util.spec_from_file_location("triton_sub", ROOT / "tests" / "blackwell" / "triton_inline_asm_cvt.py")
    sub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sub)
    signature = {"a_ptr": "*u8", "b_ptr": "*u8", "sfa_ptr": "*u8", "sfb_ptr": "*u8", "c_ptr": "*fp16", "m": "i32",
                 "kb": "i32", "ks": "i32", "BLOCK_M": "constexpr", "BLOCK_K": "constexpr"}

    def compile_():
        source = triton.compiler.ASTSource(fn=sub.gemv_kernel, signature=signature,
                                           constexprs={"BLOCK_M": 32, "BLOCK_K": 128})
        return triton.compile(source, target=GPUTarget("cuda", 90, 32))

    with pytest.raises(Exception, match="e2m1x2"):
        compile_()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    emulation._install_triton()
    kernel = compile_()
    assert kernel.asm["cubin"] and "e2m1x2" in kernel.asm["ptx"]


def test_lcuda_links_against_the_stub_only_when_the_driver_library_is_not_linkable(tmp_path, monkeypatch):
    from eval.worker import emulation

    stubs, system = tmp_path / "stubs", tmp_path / "lib"
    stubs.mkdir()
    system.mkdir()
    (stubs / "libcuda.so").write_text("")
    (system / "libcuda.so.1").write_text("")  # the driver's runtime library only: -lcuda finds nothing
    clear_env(monkeypatch, "LIBRARY_PATH")
    assert emulation.cuda_stub_dir(str(stubs), (str(system),)) == str(stubs)
    (system / "libcuda.so").write_text("")
    assert emulation.cuda_stub_dir(str(stubs), (str(system),)) is None
    assert emulation.cuda_stub_dir(str(tmp_path / "none"), (str(tmp_path),)) is None


# ---------------------------------------------------------------------------------------------
# What public B200 submissions do that the project's first files did not (see .contestants/ on a
# developer's machine): a ptxas target of their own, L2 eviction priorities on 256-bit loads, scales
# as 2-D views of the permuted tensors with a strided out=, lazily built extensions; and a build
# that emulation cannot save fails with its stage, instruction or header, and line.

@pytest.mark.parametrize("flags,kept", [
    (["--ptxas-options=--gpu-name=sm_100a"], []),
    (["--ptxas-options=-v,--gpu-name=sm_100a"], ["--ptxas-options=-v"]),
    (["--ptxas-options=-v,--gpu-name,sm_100a"], ["--ptxas-options=-v"]),
    (["-Xptxas", "--gpu-name=sm_100a,-v"], ["-Xptxas", "-v"]),
    (["-Xptxas", "-arch=sm_100a"], []),
    (["-Xptxas=-v", "-Xptxas", "--warn-on-spills"], ["-Xptxas=-v", "-Xptxas", "--warn-on-spills"]),
])
def test_a_ptxas_target_of_the_submissions_own_becomes_this_gpus(flags, kept):
    """`--ptxas-options=--gpu-name=sm_100a` beside `-gencode ... sm_100a`: nvcc would hand ptxas two
    targets (the later wins: a cubin this GPU cannot load); the stand-in keeps the other ptxas options."""
    from eval.worker import nvcc_emulate

    args = ["-O3", "-gencode=arch=compute_100a,code=sm_100a", *flags]
    assert nvcc_emulate.retarget(args, "90a") == ["-O3", *kept, HOPPER]


TCGEN05_SUBMISSION = '''from torch.utils.cpp_extension import load_inline
SRC = r"""
#include <stdint.h>
// tcgen05.alloc in a comment is not the use
__global__ void k(uint32_t* out) {
  __shared__ uint32_t slot;
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;"
               :: "r"((uint32_t)__cvta_generic_to_shared(&slot)));
  asm volatile("{ .reg .b8 q; .reg .b32 h; cvt.u8.u32 q, %1; cvt.rn.f16x2.e2m1x2 h, q; mov.b32 %0, h; }"
               : "=r"(out[0]) : "r"(out[1]));
}
"""
mod = load_inline("t", cpp_sources="", cuda_sources=SRC, extra_cuda_cflags=["-gencode=arch=compute_100a,code=sm_100a"])
'''


def test_a_build_emulation_cannot_save_names_stage_instruction_and_line(tmp_path):
    """The stand-in's real output for a kernel with tcgen05.alloc (and an FP4 cvt, which it rewrites):
    the reason is ptxas's, names the instruction and its line in the submission (comments aside), and
    says it has no software equivalent; a missing header and a front-end error are named as such."""
    import shutil

    from eval.judge import blackwell
    from eval.worker import emulation

    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    source = TCGEN05_SUBMISSION
    (tmp_path / "k.cu").write_text(re.search(r'SRC = r"""(.*?)"""', source, re.S).group(1))
    built = nvcc_build(tmp_path, "-gencode=arch=compute_100a,code=sm_100a", emulate=True)
    assert built.returncode != 0
    reason = emulation.build_failure(built.stderr, source, "'t'", "90a")
    assert reason.startswith("build of 't' failed in ptxas for sm_90a after the Blackwell rewrite: Instruction "
                             "'tcgen05.alloc' not supported"), reason
    assert "tcgen05.alloc (line 7) is Blackwell tensor-core MMA and tensor memory" in reason
    assert "no software equivalent" in reason and "e2m1x2" not in reason
    assert blackwell.find(source).what.startswith("tcgen05")  # what emulation cannot cover, not the cvt

    (tmp_path / "k.cu").write_text('#include "cutlass/cutlass.h"\n__global__ void k() {}\n')
    missing = nvcc_build(tmp_path, "-arch=sm_100a", emulate=True)
    header_source = 'SRC = r"""\n#include "cutlass/cutlass.h"\n"""\n'
    reason = emulation.build_failure(missing.stderr, header_source, "'g'", "90a")
    assert reason.startswith("build of 'g' failed (nvcc, emulated for sm_90a): it includes cutlass/cutlass.h (line 2), "
                             "which is not installed here"), reason

    (tmp_path / "k.cu").write_text("__global__ void k() { undeclared_thing(); }\n")
    front = nvcc_build(tmp_path, "-arch=sm_100a", emulate=True)
    reason = emulation.build_failure(front.stderr, "x = 1\n", "'f'", "90a")
    assert reason.startswith("build of 'f' failed (nvcc front end, emulated for sm_90a): k.cu line 1: "), reason
    assert emulation.build_failure("ninja: no work to do", None) is None


def test_load_inline_under_emulation_raises_with_the_reason_first(tmp_path, monkeypatch):
    """The worker reports an exception's first line: under the flag, load_inline's failure starts with
    build_failure's line (the log follows), found from the submission module's own source."""
    from torch.utils import cpp_extension

    from eval.worker import emulation

    log = ("Error building extension 't': [1/2] nvcc ... -c k.cu\nFAILED: k.cuda.o\n"
           "ptxas /tmp/x/k.ptx, line 40; error   : Instruction 'tcgen05.alloc' not supported on .target 'sm_90a'\n")

    def failing(*args, **kwargs):
        raise RuntimeError(log)

    monkeypatch.setattr(cpp_extension, "load_inline", failing)
    monkeypatch.setattr(cpp_extension, "load", failing)
    monkeypatch.setattr(cpp_extension, "_run_ninja_build", cpp_extension._run_ninja_build)  # restored after
    monkeypatch.setenv("EVAL_GPU_ARCH", "90")
    monkeypatch.setattr(emulation, "_wrap_triton_cubin", lambda arch: None)
    emulation._install_build_reasons()
    path = tmp_path / "sub.py"
    path.write_text(TCGEN05_SUBMISSION)
    module = {"__name__": "submission", "__file__": str(path)}
    with pytest.raises(RuntimeError) as raised:
        exec(compile(TCGEN05_SUBMISSION, str(path), "exec"), module)
    first, *rest = str(raised.value).splitlines()
    assert first.startswith("build of 't' failed in ptxas for sm_90a after the Blackwell rewrite") and "(line 7)" in first
    assert "FAILED: k.cuda.o" in "\n".join(rest)


# ninja as torch's _run_ninja_build runs it (`ninja -v -j N` in the build folder; `ninja --version`
# first): it fails as g++ does on a CUTLASS header that is not installed
FAKE_NINJA = """#!/bin/sh
[ "$1" = "--version" ] && { echo 1.11.1; exit 0; }
echo "[1/2] c++ -MMD -MF main.o.d -fPIC -std=c++17 -c main.cpp -o main.o"
echo "FAILED: main.o"
echo "main.cpp:3:10: fatal error: cutlass/numeric_types.h: No such file or directory"
echo "    3 | #include <cutlass/numeric_types.h>"
echo "compilation terminated."
echo "ninja: build stopped: subcommand failed."
exit 1
"""
CUTLASS_SUBMISSION = '''from torch.utils.cpp_extension import load_inline
SRC = r"""
#include <cutlass/numeric_types.h>
int one() { return 1; }
"""
mod = load_inline("cutlass_VERBOSE", cpp_sources=SRC, verbose=VERBOSE)
'''


@pytest.mark.parametrize("verbose", [True, False])
def test_a_verbose_build_failing_under_emulation_still_names_what_failed(verbose, tmp_path, monkeypatch, capfd):
    """Contest files pass verbose=True, and torch then prints ninja's output and raises the bare
    "Error building extension 'x'": nothing for build_failure to read. torch's own load_inline (C++
    only; ninja fails as on a missing CUTLASS header) under the emulation's wrappers: in both modes the
    first line names the header, its line in the submission and .ci/stage-cutlass.sh, the log follows
    as torch words it without verbose; with verbose the log is still printed, without it is not."""
    import os
    import stat

    from torch.utils import cpp_extension

    from eval.worker import emulation

    ninja = tmp_path / "bin" / "ninja"
    ninja.parent.mkdir()
    ninja.write_text(FAKE_NINJA)
    ninja.chmod(ninja.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{ninja.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("MAX_JOBS", "2")
    monkeypatch.setenv("EVAL_GPU_ARCH", "90")
    for attr in ("load_inline", "load", "_run_ninja_build"):  # restored after the test
        monkeypatch.setattr(cpp_extension, attr, getattr(cpp_extension, attr))
    monkeypatch.setattr(emulation, "_wrap_triton_cubin", lambda arch: None)
    emulation._install_build_reasons()
    emulation._install_build_reasons()  # twice: wrapped once

    source = CUTLASS_SUBMISSION.replace("VERBOSE", str(verbose))  # a name of its own: torch versions names
    path = tmp_path / "sub.py"
    path.write_text(source)
    capfd.readouterr()
    with pytest.raises(RuntimeError) as raised:
        exec(compile(source, str(path), "exec"), {"__name__": "submission", "__file__": str(path)})
    printed = capfd.readouterr().out
    first, second, *rest = str(raised.value).splitlines()
    assert first.startswith(f"build of 'cutlass_{verbose}' failed (nvcc, emulated for sm_90a): it includes "
                            "cutlass/numeric_types.h (line 3), which is not installed here"), first
    assert ".ci/stage-cutlass.sh" in first
    assert second == (f"Error building extension 'cutlass_{verbose}': [1/2] c++ -MMD -MF main.o.d -fPIC -std=c++17 "
                      "-c main.cpp -o main.o")
    assert "FAILED: main.o" in rest and rest[-1] == "ninja: build stopped: subcommand failed."
    assert ("main.cpp:3:10: fatal error: cutlass/numeric_types.h" in printed) == verbose, printed


def test_a_missing_cutlass_header_says_how_to_stage_it(tmp_path):
    """build_failure's hint: stage CUTLASS's headers, or, staged already, another version; a header
    that is not CUTLASS's gets none."""
    from eval.worker import emulation

    assert ".ci/stage-cutlass.sh (stages them in .cutlass/" in emulation._stage_cutlass(str(tmp_path))
    (tmp_path / ".cutlass" / "include" / "cutlass").mkdir(parents=True)
    (tmp_path / ".cutlass" / "VERSION").write_text("v4.3.5 4faf1a1568cf1e4ad8ff71846a13e16f2a6a6f6b\n")
    assert emulation._stage_cutlass(str(tmp_path)).startswith("; CUTLASS v4.3.5 is staged in .cutlass/ without it: "
                                                              "CUTLASS_VERSION=<tag> .ci/stage-cutlass.sh")
    for header, hint in (("cute/arch/mma_sm100.hpp", True), ("/usr/local/cutlass/include/cutlass/cutlass.h", True),
                         ("thrust/device_vector.h", False), ("mycutlass/x.h", False)):
        output = f"k.cu:2:10: fatal error: {header}: No such file or directory\n"
        reason = emulation.build_failure(output, None, "'k'", "90a")
        assert reason.startswith(f"build of 'k' failed (nvcc, emulated for sm_90a): it includes {header}, which is not")
        assert ("stage-cutlass.sh" in reason) == hint, reason


def test_staged_cutlass_is_on_every_workers_include_path(tmp_path, monkeypatch):
    """worker_start._staged_headers: .ci/stage-cutlass.sh's folders on CPLUS_INCLUDE_PATH (after any given)
    and CUTLASS_PATH unless the judge's environment names one; nothing staged, nothing set. The worker
    may read .cutlass (HARNESS_FOLDERS). nvcc honours CPLUS_INCLUDE_PATH, plain and through the stand-in
    (its front end preprocesses with g++), where it otherwise fails naming the header."""
    import shutil

    from eval.judge import file_policy, worker_start
    from eval.worker import emulation

    assert ".cutlass" in file_policy.HARNESS_FOLDERS
    monkeypatch.setattr(worker_start, "ROOT", tmp_path)  # where _staged_headers looks it up
    env = {}
    worker_start._staged_headers(env)
    assert env == {}
    include = tmp_path / ".cutlass" / "include"
    util = tmp_path / ".cutlass" / "tools" / "util" / "include"
    (include / "cutlass").mkdir(parents=True)
    util.mkdir(parents=True)
    env = {"CPLUS_INCLUDE_PATH": "/given"}
    worker_start._staged_headers(env)
    assert env == {"CPLUS_INCLUDE_PATH": f"/given:{include}:{util}", "CUTLASS_PATH": str(tmp_path / ".cutlass")}
    env = {"CUTLASS_PATH": "/opt/cutlass"}
    worker_start._staged_headers(env)
    assert env == {"CPLUS_INCLUDE_PATH": f"{include}:{util}", "CUTLASS_PATH": "/opt/cutlass"}

    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    (include / "cutlass" / "numeric_types.h").write_text("namespace cutlass { struct float_e2m1_t { unsigned char x; }; }\n")
    (tmp_path / "k.cu").write_text('#include <cutlass/numeric_types.h>\n__global__ void k(cutlass::float_e2m1_t* x) {\n'
                                   '  asm volatile("{ .reg .b8 q; .reg .b32 h; mov.b16 {q, _}, 0; cvt.rn.f16x2.e2m1x2 h, q; }");\n'
                                   '  x->x = 1; }\n')
    monkeypatch.delenv("CPLUS_INCLUDE_PATH", raising=False)
    missing = nvcc_build(tmp_path, "-arch=sm_100a", emulate=True)
    assert missing.returncode != 0
    assert "stage-cutlass.sh" in emulation.build_failure(missing.stderr, None, "'k'", "90a")
    monkeypatch.setenv("CPLUS_INCLUDE_PATH", env["CPLUS_INCLUDE_PATH"])
    for emulate in (False, True):
        built = nvcc_build(tmp_path, "-gencode=arch=compute_100a,code=sm_100a", emulate=emulate)
        assert built.returncode == 0, built.stderr[-1500:]


def test_the_cutlass_submission_builds_for_hopper_only_through_the_stand_in_with_staged_headers(tmp_path, monkeypatch):
    """tests/blackwell/cutlass_headers_fp4_cvt.py's device code (CUTLASS numeric types and converter,
    a CuTe tensor, the FP4 cvt), with the staged CUTLASS on the include path as a worker has it: plain
    nvcc builds it for sm_100a and refuses sm_90a (the cvt), the stand-in builds it for sm_90a."""
    import shutil

    from eval.judge import worker_start
    from tests.conftest import ROOT

    if not shutil.which("nvcc"):
        pytest.skip("nvcc (CUDA toolkit) not installed")
    if not (ROOT / ".cutlass" / "include" / "cute" / "tensor.hpp").is_file():
        pytest.skip("CUTLASS's headers not staged (.ci/stage-cutlass.sh)")
    env = {}
    worker_start._staged_headers(env)
    monkeypatch.setenv("CPLUS_INCLUDE_PATH", env["CPLUS_INCLUDE_PATH"])
    source = (ROOT / "tests" / "blackwell" / "cutlass_headers_fp4_cvt.py").read_text()
    (tmp_path / "k.cu").write_text(re.search(r'KERNELS = r"""(.*?)"""', source, re.S).group(1))
    torch_flags = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                   "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-O3", "-std=c++17", "--expt-relaxed-constexpr")
    assert nvcc_build(tmp_path, *torch_flags, "-gencode=arch=compute_100a,code=sm_100a").returncode == 0
    plain = nvcc_build(tmp_path, *torch_flags, HOPPER)
    assert plain.returncode != 0 and "e2m1x2" in plain.stderr
    emulated = nvcc_build(tmp_path, *torch_flags, "-gencode=arch=compute_100a,code=sm_100a", emulate=True)
    assert emulated.returncode == 0, emulated.stderr[-2000:]


def test_scaled_mm_takes_permuted_scale_views_and_a_strided_out():
    """As contestants call it: the scales as 2-D views of the permuted (blocked) tensors, without a
    copy, and out= a column-major slice; exact against the problem's reference on full-range data."""
    original = torch._scaled_mm
    try:
        emulation.install()
        data = reference.generate_input(m=256, k=1536, l=2, seed=11, dist="stress")
        a, b, _, _, sfa_perm, sfb_perm, c = data
        m, _, l = a.shape
        sa = sfa_perm.permute(5, 2, 4, 0, 1, 3).reshape(l, m, -1)
        sb = sfb_perm.permute(5, 2, 4, 0, 1, 3).reshape(l, 128, -1)
        out = torch.empty(l, 128, m, dtype=torch.float16).transpose(1, 2)
        for i in range(l):
            got = torch._scaled_mm(a[:, :, i], b[:, :, i].t(), sa[i], sb[i], out_dtype=torch.float16, out=out[i])
            assert got.data_ptr() == out[i].data_ptr()
        c.copy_(out[:, :, :1].permute(1, 2, 0))
        ok, message = reference.check_implementation(data, c)
        assert ok, message
    finally:
        torch._scaled_mm = original


def test_extract_finds_what_the_harness_would_build():
    """eval/emulate/extract.py (the CPU check of public submissions): Triton asm given through a
    module constant, load_inline's arguments at import and from a lazily built extension."""
    from eval.emulate import extract
    from tests.conftest import ROOT

    folder = ROOT / "tests" / "blackwell"
    asm = extract.triton_asm((folder / "triton_inline_asm_cvt.py").read_text())
    assert len(asm) == 1 and "cvt.rn.f16x2.e2m1x2" in asm[0][0] and asm[0][1] == "=r,=r,=r,=r,r"
    eager = extract.capture(str(folder / "cuda_ptxas_gpu_name_evict_v8.py"))["builds"]
    assert [b["name"] for b in eager] == ["b200_evict_v8"]
    assert "--ptxas-options=--gpu-name=sm_100a" in eager[0]["extra_cuda_cflags"] and eager[0]["extra_ldflags"] == ["-lcuda"]
    assert "ld.global.L1::no_allocate.L2::evict_first.v8.b32" in eager[0]["cuda_sources"]
    lazy = extract.capture(str(folder / "cuda_arch_sm100a_mixed_fma_v8.py"))["builds"]
    assert [b["name"] for b in lazy] == ["b200_arch_mixed_fma_v8"] and "-arch=sm_100a" in lazy[0]["extra_cuda_cflags"]


def test_extract_checks_triton_asm_with_ptxas(tmp_path):
    import shutil

    from eval.emulate import extract
    from tests.conftest import ROOT

    if not shutil.which("ptxas"):
        pytest.skip("ptxas (CUDA toolkit) not installed")
    asm, constraints, _ = extract.triton_asm((ROOT / "tests" / "blackwell" / "triton_inline_asm_cvt.py").read_text())[0]
    result = extract.build_triton(asm, constraints, tmp_path)
    assert result["as_written"]["ok"] and not result["sm_90a_plain"]["ok"] and result["sm_90a_emulated"]["ok"]
    assert "e2m1x2" in result["sm_90a_plain"]["error"]
