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
