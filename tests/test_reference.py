"""generate_input, ref_kernel against brute force, check_implementation."""
import pytest
import torch

import reference
from reference import check_implementation, generate_input, ref_kernel
from tests.test_formats import e2m1_from_bits, e4m3_from_bits


def brute_force(data):
    """float64 loops over the raw bytes, using the bit-level decoders."""
    a, b, sfa, sfb, _, _, c = data
    a8, b8 = a.view(torch.uint8).cpu(), b.view(torch.uint8).cpu()
    sa, sb = sfa.view(torch.uint8).cpu(), sfb.view(torch.uint8).cpu()
    m, kh, l = a8.shape
    fp4 = [e2m1_from_bits(i) for i in range(16)]
    fp8 = [e4m3_from_bits(i) for i in range(256)]
    out = torch.empty(m, 1, l, dtype=torch.float64)
    for li in range(l):
        vec = [fp4[(b8[0, k // 2, li].item() >> (4 * (k % 2))) & 0xF] * fp8[sb[0, k // 16, li].item()] for k in range(2 * kh)]
        for i in range(m):
            row = a8[i, :, li].tolist()
            srow = sa[i, :, li].tolist()
            total = 0.0
            for k in range(2 * kh):
                total += fp4[(row[k // 2] >> (4 * (k % 2))) & 0xF] * fp8[srow[k // 16]] * vec[k]
            out[i, 0, li] = total
    return out


@pytest.mark.parametrize("dist", ["leaderboard", "stress", "quantized"])
@pytest.mark.parametrize("shape", [(128, 64, 1), (128, 192, 2), (256, 128, 3)])
def test_reference_matches_brute_force(dist, shape):
    m, k, l = shape
    data = generate_input(m, k, l, seed=5, dist=dist)
    got = ref_kernel(data)
    expected = brute_force(data).to(torch.float16)
    assert torch.equal(got.cpu(), expected)


def test_generate_input_shapes_dtypes_strides():
    m, k, l = 256, 512, 3
    a, b, sfa, sfb, sfa_p, sfb_p, c = generate_input(m, k, l, seed=1111)
    assert (a.shape, a.dtype, a.stride()) == ((m, k // 2, l), torch.float4_e2m1fn_x2, (k // 2, 1, m * k // 2))
    assert (b.shape, b.stride()) == ((128, k // 2, l), (k // 2, 1, 128 * k // 2))
    assert (sfa.shape, sfa.dtype, sfa.stride()) == ((m, k // 16, l), torch.float8_e4m3fn, (k // 16, 1, m * k // 16))
    assert sfb.shape == (128, k // 16, l)
    assert sfa_p.shape == (32, 4, m // 128, 4, k // 64, l) and sfb_p.shape == (32, 4, 1, 4, k // 64, l)
    assert (c.shape, c.dtype, c.stride()) == ((m, 1, l), torch.float16, (1, 1, m))
    codes = a.view(torch.uint8)
    assert int(codes.max()) <= 3  # leaderboard distribution: bytes 0..3
    assert set(sfa.float().unique().tolist()) <= {0.0, 1.0, 2.0}


def test_generate_input_deterministic_and_seed_dependent():
    one = generate_input(128, 256, 2, seed=7)
    two = generate_input(128, 256, 2, seed=7)
    other = generate_input(128, 256, 2, seed=8)
    for x, y in zip(one, two):
        assert torch.equal(x.view(torch.uint8) if x.dtype != torch.float16 else x,
                           y.view(torch.uint8) if y.dtype != torch.float16 else y)
    assert not torch.equal(one[0].view(torch.uint8), other[0].view(torch.uint8))


def test_stress_distribution_covers_all_codes():
    a = generate_input(256, 1024, 1, seed=3, dist="stress")[0].view(torch.uint8)
    assert set((a & 0xF).unique().tolist()) == set(range(16))
    assert set((a >> 4).unique().tolist()) == set(range(16))


def test_dist_from_environment(monkeypatch):
    monkeypatch.setenv(reference.DIST_ENV, "stress")
    a = generate_input(128, 256, 1, seed=3)[0].view(torch.uint8)
    assert int((a >> 4).max()) > 0


@pytest.mark.parametrize("m,k,l", [(100, 256, 1), (128, 96, 1), (128, 256, 0)])
def test_invalid_shapes_rejected(m, k, l):
    with pytest.raises(ValueError, match="invalid shape"):
        generate_input(m, k, l, seed=1)


def test_unknown_dist_rejected():
    with pytest.raises(ValueError, match="unknown data distribution"):
        generate_input(128, 256, 1, seed=1, dist="zeros")


def test_check_accepts_exact_and_rejects_perturbed():
    data = generate_input(256, 512, 2, seed=9)
    exact = ref_kernel(data)
    assert check_implementation(data, exact) == (True, "")
    bad = exact.clone()
    bad[17, 0, 1] += 1.0
    ok, message = check_implementation(data, bad)
    assert not ok and "Number of mismatched elements: 1" in message and "(17, 0, 1)" in message


def test_check_rejects_nan_shape_dtype_and_type():
    data = generate_input(128, 256, 1, seed=9)
    exact = ref_kernel(data)
    nan = exact.clone()
    nan[3, 0, 0] = float("nan")
    assert not check_implementation(data, nan)[0]
    assert "shape" in check_implementation(data, exact[:64])[1]
    assert "dtype" in check_implementation(data, exact.float())[1]
    assert "torch.Tensor" in check_implementation(data, exact.tolist())[1]


def test_check_treats_matching_infinities_as_equal():
    got = torch.tensor([float("inf"), 1.0])
    assert reference.mismatch_report(got, got.clone(), 1e-3, 1e-3) == []
    assert reference.mismatch_report(got, torch.tensor([float("-inf"), 1.0]), 1e-3, 1e-3)
