"""v5's CUDA source compiles for Hopper (sm_90a) and Blackwell (sm_100a) with nvcc, no GPU needed;
the Blackwell build uses the hardware e2m1 conversion, the Hopper build the prmt/dp4a decode."""
import shutil
import subprocess

import pytest

from tests.conftest import ROOT, load_module, load_submission

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


def compile_cuda(src, arch: str) -> subprocess.CompletedProcess:
    gencode = f"-gencode=arch=compute_{arch},code=sm_{arch}"
    return subprocess.run([NVCC, "-std=c++17", "-O3", gencode, "-c", str(src), "-o", str(src.with_suffix(".o"))],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("arch,present,absent", [
    ("90a", "dp4a", "e2m1x2"),
    ("100a", "cvt.rn.f16x2.e2m1x2", "dp4a"),
])
def test_v5_compiles(tmp_path, arch, present, absent):
    src = tmp_path / "v5.cu"
    src.write_text(load_submission("v5").CUDA_SRC)
    built = compile_cuda(src, arch)
    assert built.returncode == 0, built.stderr[-3000:]
    ptx = subprocess.run([NVCC, "-std=c++17", "-O3", f"-gencode=arch=compute_{arch},code=compute_{arch}", "-ptx",
                          str(src), "-o", str(tmp_path / "v5.ptx")], capture_output=True, text=True, timeout=600)
    assert ptx.returncode == 0, ptx.stderr[-3000:]
    text = (tmp_path / "v5.ptx").read_text()
    assert present in text and absent not in text


def load_experiment(name: str):
    """docs/experiments/<name>.py as a module (nothing runs on import; the probe loads v5 itself)."""
    return load_module(ROOT / "docs" / "experiments" / f"{name}.py", name)


def test_v5_probe_variants_compile(tmp_path):
    """docs/experiments/v5_probe.py edits v5's source as text: each edit must still apply (variant()
    asserts that) and the result must build for Hopper."""
    probe = load_experiment("v5_probe")
    for name in probe.VARIANTS[1:]:
        src = tmp_path / f"{name}.cu"
        src.write_text(probe.variant(name))
        built = compile_cuda(src, "90a")
        assert built.returncode == 0, f"{name}: {built.stderr[-3000:]}"


def test_v5_probe_picks_v5s_configs(monkeypatch):
    """The probe's driver (run only on a GPU) asks v5 for each benchmark's configuration from the
    case record: a change to the record must not break it unnoticed."""
    probe = load_experiment("v5_probe")
    monkeypatch.setattr(probe.v5, "device_key", lambda: ("NVIDIA H200", 132, 4814, 60))
    from eval import cases
    benchmarks = cases.select_cases("benchmarks")
    assert [probe.configs_for(case, []) for case in benchmarks] == [
        [probe.v5.TUNED[("NVIDIA H200", 132, 4814, 60)][shape]] for shape in ((7168, 16384, 1), (4096, 7168, 8), (7168, 2048, 4))]
    assert probe.configs_for(benchmarks[0], [(32, 2, 128, 2, 1, 1, 1)]) == [(32, 2, 128, 2, 1, 1, 1)]


def test_v5_pipes_variants_compile(tmp_path):
    """docs/experiments/v5_pipes.py (run by `.ci/gpu-check pipes`) edits v5's source as text: every
    edit must still apply (variant() asserts that) and each variant's CUDA must build for Hopper."""
    pipes = load_experiment("v5_pipes")
    base, module = (ROOT / "submission" / "v5.py").read_text(), load_submission("v5")
    for name in pipes.DOT8_NEW:
        src = tmp_path / f"{name}.cu"
        variant_src = pipes.variant(name, base)
        kernel = variant_src[variant_src.index('KERNEL_SRC = r"""') + len('KERNEL_SRC = r"""'):]
        src.write_text(module._configs_macro(module.KERNELS) + kernel[:kernel.index('"""')])
        built = compile_cuda(src, "90a")
        assert built.returncode == 0, f"{name}: {built.stderr[-3000:]}"
