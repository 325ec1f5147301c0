"""quantize_nvfp4: round-trip error bounds, exact grid values, zero blocks, layouts."""
import torch

from reference import E2M1_VALUES, decode_fp8, dequantize, quantize_nvfp4, to_permuted_scales
from reference import generate_input

GRID = sorted({abs(v) for v in E2M1_VALUES})


def half_step(x_over_scale: torch.Tensor) -> torch.Tensor:
    """Half the distance between the two e2m1 grid points around |x|/scale."""
    grid = torch.tensor(GRID)
    mag = x_over_scale.abs().clamp(max=6.0)
    idx = torch.bucketize(mag, grid).clamp(1, len(GRID) - 1)
    return (grid[idx] - grid[idx - 1]) / 2


def test_round_trip_error_within_half_a_step():
    torch.manual_seed(0)
    x = torch.randn(256, 512, 2) * torch.exp(torch.randn(256, 1, 2))
    packed, scales, permuted, g = quantize_nvfp4(x)
    assert g == 1.0
    back = dequantize(packed, scales)
    scale = decode_fp8(scales).repeat_interleave(16, dim=1)
    err = (back - x).abs()
    # values are divided by the rounded scale, so the bound is half a step of x/scale, times scale
    bound = half_step(x / scale) * scale + 1e-6
    assert bool((err <= bound).all())


def test_values_on_the_grid_round_trip_exactly():
    vals = torch.tensor(E2M1_VALUES * 2).reshape(1, 32, 1)
    packed, scales, _, _ = quantize_nvfp4(vals * 0.5)  # block amax 3 -> scale 0.5 exactly
    assert torch.equal(dequantize(packed, scales), vals * 0.5)


def test_ties_round_to_even_code():
    # block amax 6 -> scale 1: 2.5 lies between 2 (code 4, even) and 3 (code 5): ties go to 2
    x = torch.tensor([2.5, 5.0, 0.25, 6.0] + [0.0] * 12).reshape(1, 16, 1)
    packed, scales, _, _ = quantize_nvfp4(x)
    assert dequantize(packed, scales)[0, :4, 0].tolist() == [2.0, 4.0, 0.0, 6.0]


def test_zero_and_tiny_blocks():
    x = torch.zeros(128, 64, 1)
    x[0, 16:32, 0] = 1e-30
    packed, scales, _, _ = quantize_nvfp4(x, global_scale=1.0)
    assert torch.equal(dequantize(packed, scales), torch.zeros_like(x))
    assert not torch.isnan(decode_fp8(scales)).any()


def test_layout_identical_to_generate_input():
    a, b, sfa, sfb, sfa_p, sfb_p, c = generate_input(256, 512, 2, seed=3, dist="quantized")
    ref = generate_input(256, 512, 2, seed=3)
    for ours, theirs in zip((a, b, sfa, sfb, sfa_p, sfb_p, c), ref):
        assert (ours.shape, ours.dtype, ours.stride()) == (theirs.shape, theirs.dtype, theirs.stride())
    assert torch.equal(sfa_p.view(torch.uint8), to_permuted_scales(sfa).view(torch.uint8))


def test_global_scale_for_large_values():
    x = torch.full((128, 16, 1), 1e5)
    packed, scales, _, g = quantize_nvfp4(x)
    assert g > 1.0 and torch.allclose(dequantize(packed, scales) * g, x, rtol=0.07)
