"""v5's CUDA source compiles for Hopper (sm_90a) and Blackwell (sm_100a) with nvcc, no GPU needed;
the Blackwell build uses the hardware e2m1 conversion, the Hopper build the prmt/dp4a decode."""
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


def cuda_source(submission: str) -> str:
    text = (ROOT / "submission" / submission).read_text()
    return re.search(r'CUDA_SRC = r"""(.*?)"""', text, re.S).group(1)


@pytest.mark.parametrize("arch,present,absent", [
    ("90a", "dp4a", "e2m1x2"),
    ("100a", "cvt.rn.f16x2.e2m1x2", "dp4a"),
])
def test_v5_compiles(tmp_path, arch, present, absent):
    src = tmp_path / "v5.cu"
    src.write_text(cuda_source("v5.py"))
    gencode = f"-gencode=arch=compute_{arch},code=sm_{arch}"
    built = subprocess.run([NVCC, "-std=c++17", "-O3", gencode, "-c", str(src), "-o", str(tmp_path / "v5.o")],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    ptx = subprocess.run([NVCC, "-std=c++17", "-O3", f"-gencode=arch=compute_{arch},code=compute_{arch}", "-ptx",
                          str(src), "-o", str(tmp_path / "v5.ptx")], capture_output=True, text=True, timeout=600)
    assert ptx.returncode == 0, ptx.stderr[-3000:]
    text = (tmp_path / "v5.ptx").read_text()
    assert present in text and absent not in text
